/* stepscope dashboard: runs list, history charts, compare and run pages. Data come from
   <script type="application/json"> elements in the page; every user string is set with textContent. */
(function () {
  "use strict";
  var fmt = (window.stepscope && window.stepscope.fmt) || function (v) { return String(v); };
  function data(id) { var el = document.getElementById(id); return el ? JSON.parse(el.textContent) : null; }
  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function labels(o) { return Object.keys(o || {}).sort().map(function (k) { return k + "=" + o[k]; }).join(" "); }
  function date(t) { return t ? new Date(t * 1000).toISOString().slice(0, 16).replace("T", " ") : ""; }
  function hasLabel(o, q) {
    if (!q) return true;
    var p = q.split("="), k = p[0].trim(), v = p.length > 1 ? p.slice(1).join("=").trim() : null;
    return Object.prototype.hasOwnProperty.call(o || {}, k) && (v === null || String(o[k]) === v);
  }

  /* ---- runs list ---------------------------------------------------------------------------- */
  var MAX_ROWS = 2000;
  function runsList(runs) {
    var host = document.getElementById("ss-runlist"), state = { key: "start", dir: -1 };
    var cols = [["name", "name"], ["id", "run"], ["status", "status"], ["start", "started"],
      ["branch", "branch"], ["short", "commit"], ["subject", "subject"], ["labels", "params / tags"],
      ["step", "step time"], ["thr", "samples/s"]];
    var f = {};
    ["f-text", "f-branch", "f-status", "f-tag", "f-param"].forEach(function (id) {
      f[id] = document.getElementById(id);
      f[id].addEventListener("input", draw);
    });
    function match(r) {
      var t = f["f-text"].value.toLowerCase();
      if (t && (r.name + " " + r.id + " " + (r.subject || "") + " " + (r.commit || "")).toLowerCase().indexOf(t) < 0) return false;
      if (f["f-branch"].value && (r.branch || "") !== f["f-branch"].value) return false;
      if (f["f-status"].value && r.status !== f["f-status"].value) return false;
      return hasLabel(r.tags, f["f-tag"].value) && hasLabel(r.params, f["f-param"].value);
    }
    function draw() {
      var rows = runs.filter(match);
      rows.sort(function (a, b) {
        var x = state.key === "labels" ? labels(a.params) : a[state.key], y = state.key === "labels" ? labels(b.params) : b[state.key];
        if (x === y) return 0; if (x === null || x === undefined) return 1; if (y === null || y === undefined) return -1;
        return (x < y ? -1 : 1) * state.dir;
      });
      var table = el("table", { "class": "ss-table", id: "ss-runs-table" }), head = el("tr");
      cols.forEach(function (c) {
        var th = el("th", { "class": "text", "data-key": c[0] }, c[1]);
        if (state.key === c[0]) th.setAttribute("aria-sort", state.dir > 0 ? "ascending" : "descending");
        th.addEventListener("click", function () { state.dir = state.key === c[0] ? -state.dir : 1; state.key = c[0]; draw(); });
        head.appendChild(th);
      });
      table.appendChild(el("thead")).appendChild(head);
      var body = el("tbody");
      rows.slice(0, MAX_ROWS).forEach(function (r) {
        var tr = el("tr", { "data-run": r.id }), a = el("a", { href: r.href }, r.name);
        tr.appendChild(el("td", { "class": "text" })).appendChild(a);
        tr.appendChild(el("td", { "class": "text mono" }, r.id));
        tr.appendChild(el("td", { "class": "text" }, r.status));
        tr.appendChild(el("td", { "class": "text" }, date(r.start)));
        tr.appendChild(el("td", { "class": "text" }, r.branch || ""));
        tr.appendChild(el("td", { "class": "text mono" }, (r.short || "") + (r.dirty ? "+dirty" : "")));
        tr.appendChild(el("td", { "class": "text" }, r.subject || ""));
        tr.appendChild(el("td", { "class": "text" }, (labels(r.params) + " " + labels(r.tags)).trim()));
        tr.appendChild(el("td", {}, r.step === null ? "—" : fmt(r.step, "s")));
        tr.appendChild(el("td", {}, r.thr === null ? "—" : fmt(r.thr, "")));
        body.appendChild(tr);
      });
      table.appendChild(body);
      host.textContent = "";
      host.appendChild(el("p", { "class": "ss-note", id: "ss-count" },
        rows.length + " of " + runs.length + " runs" + (rows.length > MAX_ROWS ? " (first " + MAX_ROWS + " shown: filter to narrow)" : "")));
      host.appendChild(table);
    }
    draw();
  }

  /* ---- history chart ------------------------------------------------------------------------ */
  var SVGNS = "http://www.w3.org/2000/svg";
  function svg(tag, attrs) { var e = document.createElementNS(SVGNS, tag); for (var k in attrs) e.setAttribute(k, attrs[k]); return e; }
  function history(h) {
    var host = document.getElementById("ss-chart"), tip = document.getElementById("ss-tip");
    var mode = { x: "date", y: h.points.some(function (p) { return p.rel !== null; }) ? "rel" : "abs" };
    function yv(p, k) { return mode.y === "rel" ? p["r" + k] : p[k]; }
    function draw() {
      var W = 1100, H = 380, M = { l: 70, r: 20, t: 16, b: 44 }, pts = h.points;
      host.textContent = "";
      if (!pts.length) { host.appendChild(el("p", {}, "no points")); return; }
      var xs = pts.map(function (p) { return mode.x === "date" ? p.t : p.i; });
      var ys = []; pts.forEach(function (p) { [yv(p, "v"), yv(p, "lo"), yv(p, "hi")].forEach(function (v) { if (v !== null) ys.push(v); }); });
      var x0 = Math.min.apply(null, xs), x1 = Math.max.apply(null, xs), y0 = Math.min.apply(null, ys), y1 = Math.max.apply(null, ys);
      if (x1 === x0) { x0 -= 1; x1 += 1; } var pad = (y1 - y0) * 0.08 || Math.abs(y1) * 0.05 || 1; y0 -= pad; y1 += pad;
      function X(v) { return M.l + (v - x0) / (x1 - x0) * (W - M.l - M.r); }
      function Y(v) { return H - M.b - (v - y0) / (y1 - y0) * (H - M.t - M.b); }
      var s = svg("svg", { viewBox: "0 0 " + W + " " + H, role: "img", id: "ss-history-svg" });
      for (var k = 0; k <= 5; k++) {
        var yt = y0 + (y1 - y0) * k / 5, xt = x0 + (x1 - x0) * k / 5;
        s.appendChild(svg("line", { x1: M.l, x2: W - M.r, y1: Y(yt), y2: Y(yt), stroke: "#e2e8f0" }));
        var ty = svg("text", { x: M.l - 6, y: Y(yt) + 4, "text-anchor": "end", "font-size": 11, fill: "#4a5568" });
        ty.textContent = mode.y === "rel" ? yt.toFixed(3) : fmt(yt, h.unit); s.appendChild(ty);
        var tx = svg("text", { x: X(xt), y: H - M.b + 16, "text-anchor": "middle", "font-size": 11, fill: "#4a5568" });
        tx.textContent = mode.x === "date" ? date(xt).slice(0, 10) : "#" + Math.round(xt); s.appendChild(tx);
      }
      var xl = svg("text", { x: (M.l + W - M.r) / 2, y: H - 6, "text-anchor": "middle", "font-size": 12, fill: "#4a5568" });
      xl.textContent = mode.x === "date" ? "commit date" : "commit order"; s.appendChild(xl);
      if (mode.y === "rel") s.appendChild(svg("line", { x1: M.l, x2: W - M.r, y1: Y(1), y2: Y(1), stroke: "#a0aec0", "stroke-dasharray": "2 3" }));
      h.steps.forEach(function (st) {
        var a = pts[st.last_good], b = pts[st.first_bad], xm = (X(mode.x === "date" ? a.t : a.i) + X(mode.x === "date" ? b.t : b.i)) / 2;
        s.appendChild(svg("line", { x1: xm, x2: xm, y1: M.t, y2: H - M.b, stroke: "#c53030", "stroke-dasharray": "5 4", "class": "ss-step", "data-commit": b.commit || "" }));
        var t = svg("text", { x: xm + 4, y: M.t + 12, "font-size": 11, fill: "#c53030" });
        t.textContent = "step " + (st.rel === null ? "" : (st.rel > 0 ? "+" : "") + (100 * st.rel).toFixed(1) + "%") + " at " + b.short; s.appendChild(t);
      });
      var d = "";
      pts.forEach(function (p, i) { if (!p.dirty) d += (d ? "L" : "M") + X(xs[i]) + "," + Y(yv(p, "v")); });
      s.appendChild(svg("path", { d: d, fill: "none", stroke: "#3182ce", "stroke-width": 1.5 }));
      pts.forEach(function (p, i) {
        var cx = X(xs[i]);
        if (yv(p, "lo") !== null) s.appendChild(svg("line", { x1: cx, x2: cx, y1: Y(yv(p, "lo")), y2: Y(yv(p, "hi")), stroke: "#90cdf4" }));
        var c = svg("circle", { cx: cx, cy: Y(yv(p, "v")), r: 5, fill: p.dirty ? "#fff" : "#3182ce", stroke: "#2b6cb0", "class": "ss-point", "data-run": p.run, "data-commit": p.commit || "", tabindex: 0 });
        c.style.cursor = "pointer";
        c.addEventListener("mousemove", function (ev) { showTip(ev, p); });
        c.addEventListener("mouseleave", function () { tip.style.display = "none"; });
        c.addEventListener("click", function () { window.location.href = p.href; });
        s.appendChild(c);
      });
      host.appendChild(s);
    }
    function showTip(ev, p) {
      tip.textContent = "";
      tip.appendChild(el("b", {}, p.short + (p.dirty ? " (dirty tree)" : "")));
      [p.subject || "", date(p.t), "value " + fmt(p.v, h.unit) + "  [" + fmt(p.lo, h.unit) + " – " + fmt(p.hi, h.unit) + "]",
        p.rel === null ? "" : "relative " + p.rel.toFixed(3) + "  [" + p.rlo.toFixed(3) + " – " + p.rhi.toFixed(3) + "]",
        p.n + " run(s); click opens " + p.run].forEach(function (line) { if (line) tip.appendChild(el("div", {}, line)); });
      tip.style.display = "block"; tip.style.left = (ev.pageX + 12) + "px"; tip.style.top = (ev.pageY + 12) + "px";
    }
    ["x-date", "x-commit", "y-rel", "y-abs"].forEach(function (id) {
      var b = document.getElementById(id);
      if (b) b.addEventListener("click", function () { var p = id.split("-"); mode[p[0]] = p[1] === "commit" ? "commit" : p[1]; draw(); });
    });
    draw();
  }

  /* ---- compare and run pages ------------------------------------------------------------------ */
  function runsById(runs) { var m = {}; runs.forEach(function (r) { m[r.id] = r; }); return m; }
  function compare(runs) {
    var byId = runsById(runs), a = document.getElementById("cmp-a"), b = document.getElementById("cmp-b");
    var out = document.getElementById("ss-compare");
    runs.forEach(function (r) {
      [a, b].forEach(function (s) { s.appendChild(el("option", { value: r.id }, r.id + " · " + r.name + " · " + date(r.start))); });
    });
    var h = window.location.hash.slice(1).split(",");
    if (h.length === 2 && byId[h[0]] && byId[h[1]]) { a.value = h[0]; b.value = h[1]; }
    else if (runs.length > 1) { a.value = runs[1].id; b.value = runs[0].id; }
    function draw() {
      var ra = byId[a.value], rb = byId[b.value]; out.textContent = "";
      if (!ra || !rb) return;
      var pair = ra.id + "--" + rb.id, diffs = data("ss-diffs") || { live: false, pairs: [] };
      if (diffs.live || diffs.pairs.indexOf(pair) >= 0) {
        out.appendChild(el("p")).appendChild(el("a", { href: "diffs/" + pair + ".html", id: "cmp-diff" }, "full diff report of A and B"));
      }
      out.appendChild(el("p", {}, "Full diff in a terminal: ")).appendChild(el("code", { id: "cmp-cmd" }, "stepscope diff " + ra.id + " " + rb.id));
      var t = el("table", { "class": "ss-table", id: "cmp-table" }), head = el("tr");
      ["metric", "A: " + ra.name, "B: " + rb.name, "B / A"].forEach(function (c, i) { head.appendChild(el("th", i ? {} : { "class": "text" }, c)); });
      t.appendChild(el("thead")).appendChild(head);
      var body = el("tbody"), names = Object.keys(Object.assign({}, ra.metrics, rb.metrics)).sort();
      names.forEach(function (m) {
        var va = ra.metrics[m], vb = rb.metrics[m], tr = el("tr");
        tr.appendChild(el("td", { "class": "text" }, m));
        tr.appendChild(el("td", {}, va === undefined || va === null ? "—" : fmt(va, "")));
        tr.appendChild(el("td", {}, vb === undefined || vb === null ? "—" : fmt(vb, "")));
        tr.appendChild(el("td", {}, va && vb !== undefined && vb !== null ? (vb / va).toFixed(3) : "—"));
        body.appendChild(tr);
      });
      t.appendChild(body); out.appendChild(t);
      [["A", ra], ["B", rb]].forEach(function (x) { var p = out.appendChild(el("p")); p.appendChild(el("a", { href: x[1].href }, "open run " + x[0] + " (" + x[1].id + ")")); });
    }
    a.addEventListener("change", draw); b.addEventListener("change", draw); draw();
  }
  function runPage(runs) {
    var byId = runsById(runs), out = document.getElementById("ss-run"), r = byId[window.location.hash.slice(1)];
    out.textContent = "";
    if (!r) { out.appendChild(el("p", {}, "no such run in this site")); return; }
    out.appendChild(el("h3", { id: "run-name" }, r.name + " (" + r.id + ")"));
    var t = el("table", { "class": "ss-kv" });
    [["status", r.status], ["started", date(r.start)], ["commit", (r.commit || "(no commit)") + (r.dirty ? " +dirty" : "")],
      ["branch", r.branch || ""], ["subject", r.subject || ""], ["params", labels(r.params)], ["tags", labels(r.tags)],
      ["group", r.group || ""], ["host", r.host || ""]].forEach(function (kv) {
      var tr = t.appendChild(el("tr")); tr.appendChild(el("th", {}, kv[0])); tr.appendChild(el("td", {}, kv[1]));
    });
    Object.keys(r.metrics).sort().forEach(function (m) {
      var tr = t.appendChild(el("tr")); tr.appendChild(el("th", {}, m)); tr.appendChild(el("td", {}, r.metrics[m] === null ? "—" : fmt(r.metrics[m], "")));
    });
    out.appendChild(t);
  }
  function start() {
    var runs = data("ss-runs"), h = data("ss-history");
    if (h) history(h);
    if (runs && document.getElementById("ss-runlist")) runsList(runs);
    if (runs && document.getElementById("ss-compare")) compare(runs);
    if (runs && document.getElementById("ss-run")) { runPage(runs); window.addEventListener("hashchange", function () { runPage(runs); }); }
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start); else start();
})();
