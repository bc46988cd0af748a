/* stepscope dashboard: one metric's history across commits. Points come as one column table. */
(function () {
  "use strict";
  var D = ssDash, SVGNS = "http://www.w3.org/2000/svg";
  function svg(tag, attrs) { var e = document.createElementNS(SVGNS, tag); for (var k in attrs) e.setAttribute(k, attrs[k]); return e; }
  /* round, distinct tick positions: time ticks at whole minutes / hours / days / months, integer ticks for commit order */
  var SPANS = [60, 300, 900, 1800, 3600, 2 * 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400, 2 * 86400, 3 * 86400, 4 * 86400, 7 * 86400, 14 * 86400, 30 * 86400, 61 * 86400, 91 * 86400, 182 * 86400, 365 * 86400];
  function timeTicks(lo, hi, n) {
    var step = SPANS.filter(function (s) { return (hi - lo) / s <= n; })[0] || SPANS[SPANS.length - 1], out = [];
    for (var t = Math.ceil(lo / step) * step; t <= hi; t += step) out.push(t);
    return { ticks: out, label: function (t) {
      var iso = new Date(t * 1000).toISOString();
      return step >= 86400 ? iso.slice(0, 10) : iso.slice(0, 10) + " " + iso.slice(11, 16);
    } };
  }
  function intTicks(lo, hi, n) {
    var raw = Math.max(1, (hi - lo) / n), p = Math.pow(10, Math.floor(Math.log10(raw))), m = raw / p;
    var step = Math.max(1, (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p), out = [];
    for (var t = Math.ceil(lo / step) * step; t <= hi; t += step) out.push(t);
    return out;
  }
  function niceTicks(lo, hi, n) {
    var raw = (hi - lo) / n, p = Math.pow(10, Math.floor(Math.log10(raw))), m = raw / p;
    var step = (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p, out = [];
    for (var t = Math.ceil(lo / step) * step; t <= hi; t += step) out.push(+t.toPrecision(12));
    return out;
  }
  function history(h) {
    var host = document.getElementById("ss-chart"), tip = document.getElementById("ss-tip"), P = h.points, n = P.n, C = P.cols;
    var hasRel = C.rel.some(function (v) { return v !== null; });
    var mode = { x: "date", y: hasRel ? "rel" : "abs" };
    function yv(i, k) { return mode.y === "rel" ? C["r" + (k === "v" ? "el" : k)][i] : C[k][i]; }
    function xv(i) { return mode.x === "date" ? C.t[i] : i; }
    function draw() {
      var W = Math.max(420, Math.min(1400, host.clientWidth || 1100)), H = 380, M = { l: 84, r: 20, t: 20, b: 58 };
      host.textContent = "";
      if (!n) { host.appendChild(D.el("p", {}, "no points")); return; }
      var xs = [], ys = [];
      for (var i = 0; i < n; i++) { xs.push(xv(i)); ["v", "lo", "hi"].forEach(function (k) { var v = yv(i, k); if (v !== null) ys.push(v); }); }
      var x0 = Math.min.apply(null, xs), x1 = Math.max.apply(null, xs), y0 = Math.min.apply(null, ys), y1 = Math.max.apply(null, ys);
      if (x1 === x0) { x0 -= 1; x1 += 1; } var pad = (y1 - y0) * 0.08 || Math.abs(y1) * 0.05 || 1; y0 -= pad; y1 += pad;
      function X(v) { return M.l + (v - x0) / (x1 - x0) * (W - M.l - M.r); }
      function Y(v) { return H - M.b - (v - y0) / (y1 - y0) * (H - M.t - M.b); }
      var s = svg("svg", { viewBox: "0 0 " + W + " " + H, width: W, height: H, role: "img", id: "ss-history-svg" });
      var yt = niceTicks(y0, y1, 5);
      yt.forEach(function (t) {
        s.appendChild(svg("line", { x1: M.l, x2: W - M.r, y1: Y(t), y2: Y(t), stroke: "#e2e8f0" }));
        var ty = svg("text", { x: M.l - 6, y: Y(t) + 4, "text-anchor": "end", "font-size": 11, fill: "#4a5568", "class": "ss-ytick" });
        ty.textContent = mode.y === "rel" ? (+t.toPrecision(4)).toString() + "×" : D.fmt(t, h.unit); s.appendChild(ty);
      });
      var nx = Math.max(2, Math.floor((W - M.l - M.r) / 120));
      var xt = mode.x === "date" ? timeTicks(x0, x1, nx) : { ticks: intTicks(Math.ceil(x0), Math.floor(x1), nx), label: function (t) { return "#" + (t + 1); } };
      xt.ticks.forEach(function (t) {
        var tx = svg("text", { x: X(t), y: H - M.b + 16, "text-anchor": "middle", "font-size": 11, fill: "#4a5568", "class": "ss-xtick" });
        tx.textContent = xt.label(t); s.appendChild(tx);
      });
      var xl = svg("text", { x: (M.l + W - M.r) / 2, y: H - 8, "text-anchor": "middle", "font-size": 12, fill: "#2d3748", "class": "ss-axis-title" });
      xl.textContent = mode.x === "date" ? "commit date (UTC)" : "commit order (1 = oldest)"; s.appendChild(xl);
      var yl = svg("text", { x: 14, y: (M.t + H - M.b) / 2, "text-anchor": "middle", "font-size": 12, fill: "#2d3748", "class": "ss-axis-title",
        transform: "rotate(-90 14 " + (M.t + H - M.b) / 2 + ")" });
      yl.textContent = mode.y === "rel" ? "relative to baseline (×)" : h.title; s.appendChild(yl);
      if (mode.y === "rel") s.appendChild(svg("line", { x1: M.l, x2: W - M.r, y1: Y(1), y2: Y(1), stroke: "#a0aec0", "stroke-dasharray": "2 3" }));
      h.steps.forEach(function (st) {
        var xm = (X(xv(st.last_good)) + X(xv(st.first_bad))) / 2, col = st.kind === "not_confirmed" ? "#a0aec0" : "#c53030";
        s.appendChild(svg("line", { x1: xm, x2: xm, y1: M.t, y2: H - M.b, stroke: col, "stroke-dasharray": "5 4", "class": "ss-step", "data-kind": st.kind, "data-commit": C.commit[st.first_bad] || "" }));
      });
      var d = "";
      for (var j = 0; j < n; j++) if (!C.dirty[j]) d += (d ? "L" : "M") + X(xs[j]) + "," + Y(yv(j, "v"));
      s.appendChild(svg("path", { d: d, fill: "none", stroke: "#3182ce", "stroke-width": 1.5 }));
      var bars = "";
      for (var k = 0; k < n; k++) {
        if (yv(k, "lo") !== null) bars += "M" + X(xs[k]) + "," + Y(yv(k, "lo")) + "V" + Y(yv(k, "hi"));
      }
      if (bars) s.appendChild(svg("path", { d: bars, stroke: "#90cdf4", fill: "none", "class": "ss-interval" }));
      var r = n > 300 ? 2 : 4;
      for (var i = 0; i < n; i++) {
        s.appendChild(svg("circle", { cx: X(xs[i]), cy: Y(yv(i, "v")), r: r, fill: C.dirty[i] ? "#fff" : "#3182ce", stroke: "#2b6cb0",
          "class": "ss-point", "data-i": i, "data-run": C.run[i], "data-commit": C.commit[i] || "", style: "cursor:pointer" }));
      }
      /* one listener each for the whole chart (thousands of points) */
      function point(ev) { var a = ev.target.getAttribute && ev.target.getAttribute("data-i"); return a === null || a === undefined ? -1 : +a; }
      s.addEventListener("mousemove", function (ev) { var i = point(ev); if (i >= 0) showTip(ev, i); else tip.style.display = "none"; });
      s.addEventListener("mouseleave", function () { tip.style.display = "none"; });
      s.addEventListener("click", function (ev) { var i = point(ev); if (i >= 0) window.location.href = D.runHref(C.run[i], C.report[i], "../"); });
      host.appendChild(s);
    }
    function showTip(ev, i) {
      var commit = C.commit[i], sub = D.get(P, "subject", i);
      tip.textContent = "";
      tip.appendChild(D.el("b", {}, (commit ? commit.slice(0, 10) : "(no commit)") + (C.dirty[i] ? " (dirty tree)" : "")));
      [sub || "", D.date(C.t[i]) + " UTC", "value " + D.fmt(C.v[i], h.unit) + "  [" + D.fmt(C.lo[i], h.unit) + " – " + D.fmt(C.hi[i], h.unit) + "]",
        C.rel[i] === null ? "" : "relative " + C.rel[i].toFixed(3) + "  [" + C.rlo[i].toFixed(3) + " – " + C.rhi[i].toFixed(3) + "]",
        C.n[i] + " run(s); click opens " + C.run[i]].forEach(function (line) { if (line) tip.appendChild(D.el("div", {}, line)); });
      tip.style.display = "block"; tip.style.left = (ev.pageX + 12) + "px"; tip.style.top = (ev.pageY + 12) + "px";
    }
    D.toggles(["x-date", "x-commit"], "x-date", function (id) { mode.x = id === "x-date" ? "date" : "commit"; draw(); });
    D.toggles(["y-rel", "y-abs"], mode.y === "rel" ? "y-rel" : "y-abs", function (id) { mode.y = id === "y-rel" ? "rel" : "abs"; draw(); });
    draw();
  }
  D.ready(function () { var h = D.data("ss-history"); if (h) history(h); });
})();
