/* stepscope HTML base: a small offline SVG plot renderer and sortable / filterable / tree tables.
   Plots: figure.ss-plot elements holding a script.ss-spec JSON element (the SPEC).
   SPEC.kind is "line" | "bar" | "heatmap"; see report/html/plots.py for the fields. No network, no deps. */
(function () {
  "use strict";
  var NS = "http://www.w3.org/2000/svg";
  var PALETTE = ["#2b6cb0", "#dd6b20", "#38a169", "#805ad5", "#d53f8c", "#718096", "#d69e2e", "#319795",
                 "#e53e3e", "#4c51bf", "#975a16", "#2c7a7b"];
  var tip = null;

  function el(tag, attrs, parent) {
    var e = document.createElementNS(NS, tag);
    for (var k in attrs) { if (attrs[k] !== null && attrs[k] !== undefined) e.setAttribute(k, attrs[k]); }
    if (parent) parent.appendChild(e);
    return e;
  }
  function text(parent, x, y, s, attrs) {
    var t = el("text", Object.assign({x: x, y: y, "font-size": 11, fill: "#5b6475"}, attrs || {}), parent);
    t.textContent = s;
    return t;
  }
  function escText(s) { var d = document.createElement("div"); d.textContent = String(s); return d.innerHTML; }

  function num(v, d) {
    if (v === null || v === undefined || !isFinite(v)) return "—";
    var a = Math.abs(v);
    if (a >= 1e9) return (v / 1e9).toFixed(2) + "G";
    if (a >= 1e6) return (v / 1e6).toFixed(2) + "M";
    if (a >= 1e4) return (v / 1e3).toFixed(1) + "k";
    if (a >= 100 || v === Math.round(v)) return v.toFixed(0);
    return String(parseFloat(v.toPrecision(d || 3)));
  }
  function fmt(v, unit) {
    if (v === null || v === undefined || !isFinite(v)) return "—";
    var a = Math.abs(v);
    switch (unit) {
      case "ns": return a >= 1e9 ? (v / 1e9).toFixed(2) + " s" : a >= 1e6 ? (v / 1e6).toFixed(2) + " ms"
                   : a >= 1e3 ? (v / 1e3).toFixed(1) + " µs" : v.toFixed(0) + " ns";
      case "s": return fmt(v * 1e9, "ns");
      case "ms": return fmt(v * 1e6, "ns");
      case "bytes": case "bytes/s": {
        var u = ["B", "KiB", "MiB", "GiB", "TiB"], i = 0;
        while (Math.abs(v) >= 1024 && i < u.length - 1) { v /= 1024; i++; }
        return (i ? v.toFixed(1) : v.toFixed(0)) + " " + u[i] + (unit === "bytes/s" ? "/s" : "");
      }
      case "%": return v.toFixed(1) + "%";
      case "share": return (100 * v).toFixed(1) + "%";
      case "": case undefined: case null: return num(v);
      default: return num(v) + " " + unit;
    }
  }
  function ticks(lo, hi, n) {
    if (!(hi > lo)) { hi = lo + 1; }
    var span = hi - lo, step = Math.pow(10, Math.floor(Math.log10(span / n)));
    var err = (span / n) / step;
    if (err >= 7.5) step *= 10; else if (err >= 3.5) step *= 5; else if (err >= 1.5) step *= 2;
    var out = [], t = Math.ceil(lo / step) * step;
    for (; t <= hi + step * 1e-9; t += step) out.push(Math.abs(t) < step * 1e-9 ? 0 : t);
    return out;
  }
  function showTip(ev, html) {
    if (!tip) { tip = document.createElement("div"); tip.id = "ss-tip"; document.body.appendChild(tip); }
    tip.innerHTML = html; tip.style.display = "block";
    var x = ev.clientX + 14, y = ev.clientY + 12, w = tip.offsetWidth, h = tip.offsetHeight;
    if (x + w > window.innerWidth - 4) x = ev.clientX - w - 14;
    if (y + h > window.innerHeight - 4) y = ev.clientY - h - 12;
    tip.style.left = x + "px"; tip.style.top = y + "px";
  }
  function hideTip() { if (tip) tip.style.display = "none"; }
  function legend(fig, names, colors) {
    if (names.length < 2) return;
    var d = document.createElement("div"); d.className = "ss-legend";
    names.forEach(function (n, i) {
      var s = document.createElement("span"), sw = document.createElement("i");
      sw.style.background = colors[i]; s.appendChild(sw); s.appendChild(document.createTextNode(n)); d.appendChild(s);
    });
    fig.appendChild(d);
  }
  function frame(spec, W, H, M) {
    var svg = el("svg", {viewBox: "0 0 " + W + " " + H, role: "img", "class": "ss-svg"});
    el("rect", {x: M.l, y: M.t, width: W - M.l - M.r, height: H - M.t - M.b, fill: "#fff", stroke: "#dde1e7"}, svg);
    if (spec.ylabel) text(svg, 12, M.t + (H - M.t - M.b) / 2, spec.ylabel + unitName(spec.yunit),
                         {transform: "rotate(-90 12 " + (M.t + (H - M.t - M.b) / 2) + ")", "text-anchor": "middle"});
    if (spec.xlabel) text(svg, M.l + (W - M.l - M.r) / 2, H - 4, spec.xlabel + unitName(spec.xunit),
                         {"text-anchor": "middle"});
    return svg;
  }
  function width(fig) { return Math.max(420, Math.min(1400, fig.clientWidth || 720)); }
  function unitName(u) {
    /* units that the tick labels already carry (1.5 ms, 2.0 GiB) are not repeated in the axis title */
    if (!u || ["ns", "s", "ms", "bytes", "bytes/s"].indexOf(u) >= 0) return "";
    return " (" + (u === "share" ? "%" : u) + ")";
  }

  function drawLine(fig, spec) {
    var W = width(fig), H = spec.height || 260, M = {l: 92, r: 14, t: 10, b: 40};
    var x = spec.x || [], series = spec.series || [], n = x.length;
    var colors = series.map(function (s, i) { return s.color || PALETTE[i % PALETTE.length]; });
    var tops = series.map(function () { return new Array(n).fill(null); });
    var bots = series.map(function () { return new Array(n).fill(null); });
    var acc = new Array(n).fill(0);
    series.forEach(function (s, k) {
      for (var i = 0; i < n; i++) {
        var v = s.y[i];
        if (v === null || v === undefined || !isFinite(v)) { if (spec.stacked) { tops[k][i] = acc[i]; bots[k][i] = acc[i]; } continue; }
        if (spec.stacked) { bots[k][i] = acc[i]; acc[i] += v; tops[k][i] = acc[i]; } else { tops[k][i] = v; }
      }
    });
    var xs = x.filter(isFinite), ys = [];
    tops.forEach(function (t) { t.forEach(function (v) { if (v !== null && isFinite(v)) ys.push(v); }); });
    var svg = frame(spec, W, H, M);
    var x0 = xs.length ? Math.min.apply(null, xs) : 0, x1 = xs.length ? Math.max.apply(null, xs) : 1;
    if (x1 === x0) x1 = x0 + 1;
    var y0 = spec.ymin !== undefined && spec.ymin !== null ? spec.ymin : Math.min(0, ys.length ? Math.min.apply(null, ys) : 0);
    var y1 = ys.length ? Math.max.apply(null, ys) : 1;
    if (spec.ymax !== undefined && spec.ymax !== null) y1 = spec.ymax;
    if (y1 <= y0) y1 = y0 + 1; else y1 = y1 + (y1 - y0) * 0.05;
    var pw = W - M.l - M.r, ph = H - M.t - M.b;
    function X(v) { return M.l + (v - x0) / (x1 - x0) * pw; }
    function Y(v) { return M.t + ph - (v - y0) / (y1 - y0) * ph; }
    (spec.bands || []).forEach(function (b) {
      var a = X(Math.max(b.x0, x0)), c = X(Math.min(b.x1, x1));
      if (c > a) { el("rect", {x: a, y: M.t, width: c - a, height: ph, fill: b.color || "#edf2f7", "class": "ss-band"}, svg);
        if (b.label) text(svg, a + 4, M.t + 12, b.label, {"font-size": 10}); }
    });
    ticks(y0, y1, 5).forEach(function (t) {
      if (t < y0 || t > y1) return;
      el("line", {x1: M.l, x2: W - M.r, y1: Y(t), y2: Y(t), stroke: "#eef1f4"}, svg);
      text(svg, M.l - 6, Y(t) + 4, fmt(t, spec.yunit), {"text-anchor": "end"});
    });
    ticks(x0, x1, 7).forEach(function (t) {
      if (t < x0 || t > x1) return;
      text(svg, X(t), H - M.b + 14, fmt(t, spec.xunit), {"text-anchor": "middle"});
    });
    (spec.marks || []).forEach(function (m) {
      if (m.x < x0 || m.x > x1) return;
      el("line", {x1: X(m.x), x2: X(m.x), y1: M.t, y2: M.t + ph, stroke: m.color || "#a0aec0", "stroke-dasharray": "3 3", "class": "ss-mark"}, svg);
      if (m.label) text(svg, X(m.x) + 2, M.t + ph - 4, m.label, {"font-size": 9});
    });
    series.forEach(function (s, k) {
      var segs = [], cur = [];
      for (var i = 0; i < n; i++) {
        if (tops[k][i] === null || !isFinite(x[i])) { if (cur.length) segs.push(cur); cur = []; continue; }
        cur.push(i);
      }
      if (cur.length) segs.push(cur);
      segs.forEach(function (seg) {
        var top = seg.map(function (i) { return X(x[i]).toFixed(1) + "," + Y(tops[k][i]).toFixed(1); });
        if (spec.stacked || s.area) {
          var bot = seg.slice().reverse().map(function (i) { return X(x[i]).toFixed(1) + "," + Y(spec.stacked ? bots[k][i] : Math.max(y0, 0)).toFixed(1); });
          el("polygon", {points: top.concat(bot).join(" "), fill: colors[k], "fill-opacity": spec.stacked ? 0.75 : 0.2, stroke: "none", "class": "ss-area"}, svg);
        }
        if (seg.length === 1) el("circle", {cx: X(x[seg[0]]), cy: Y(tops[k][seg[0]]), r: 2.5, fill: colors[k], "class": "ss-series"}, svg);
        else el("polyline", {points: top.join(" "), fill: "none", stroke: colors[k], "stroke-width": spec.stacked ? 1 : 1.6,
                             "stroke-dasharray": s.dash ? "5 3" : null, "class": "ss-series"}, svg);
      });
    });
    var cursor = el("line", {y1: M.t, y2: M.t + ph, stroke: "#1d2330", "stroke-opacity": 0, "pointer-events": "none"}, svg);
    var hit = el("rect", {x: M.l, y: M.t, width: pw, height: ph, fill: "transparent"}, svg);
    hit.addEventListener("mousemove", function (ev) {
      if (!n) return;
      var r = svg.getBoundingClientRect(), vx = (ev.clientX - r.left) / r.width * W;
      var xv = x0 + (vx - M.l) / pw * (x1 - x0), best = 0, bd = Infinity;
      for (var i = 0; i < n; i++) { var d = Math.abs(x[i] - xv); if (d < bd) { bd = d; best = i; } }
      cursor.setAttribute("x1", X(x[best])); cursor.setAttribute("x2", X(x[best])); cursor.setAttribute("stroke-opacity", 0.3);
      var h = "<b>" + escText((spec.xlabel || "x") + " " + fmt(x[best], spec.xunit)) + "</b>";
      series.forEach(function (s, k) {
        h += "<br><i style=\"background:" + colors[k] + "\"></i>" + escText(s.name) + ": " + escText(fmt(s.y[best], spec.yunit));
      });
      if (spec.stacked) h += "<br>total: " + escText(fmt(acc[best], spec.yunit));
      showTip(ev, h);
    });
    hit.addEventListener("mouseleave", function () { hideTip(); cursor.setAttribute("stroke-opacity", 0); });
    fig.appendChild(svg);
    legend(fig, series.map(function (s) { return s.name; }), colors);
  }

  function drawBar(fig, spec) {
    var cats = spec.categories || [], series = spec.series || [];
    var colors = series.map(function (s, i) { return s.color || PALETTE[i % PALETTE.length]; });
    var longest = cats.reduce(function (m, c) { return Math.max(m, String(c).length); }, 0);
    var lw = Math.min(300, 12 + 6.2 * longest), row = 20;
    var W = width(fig), M = {l: lw, r: 70, t: 6, b: 34}, H = M.t + M.b + Math.max(1, cats.length) * row;
    var svg = frame({xlabel: spec.ylabel, xunit: spec.yunit}, W, H, M);
    var totals = cats.map(function (_, i) {
      var s = 0, m = 0;
      series.forEach(function (se) { var v = se.values[i]; if (v !== null && isFinite(v)) { s += v; m = Math.max(m, v); } });
      return spec.stacked ? s : m;
    });
    var vmax = Math.max.apply(null, totals.concat([0])) || 1, pw = W - M.l - M.r;
    function X(v) { return M.l + v / vmax * pw; }
    ticks(0, vmax, 6).forEach(function (t) {
      if (t > vmax) return;
      el("line", {x1: X(t), x2: X(t), y1: M.t, y2: H - M.b, stroke: "#eef1f4"}, svg);
      text(svg, X(t), H - M.b + 14, fmt(t, spec.yunit), {"text-anchor": "middle"});
    });
    cats.forEach(function (c, i) {
      var y = M.t + i * row, label = String(c);
      if (label.length > lw / 6.2) label = label.slice(0, Math.floor(lw / 6.2) - 1) + "…";
      var lt = text(svg, M.l - 6, y + row / 2 + 4, label, {"text-anchor": "end", fill: "#1d2330"});
      el("title", {}, lt).textContent = String(c);
      var acc = 0, nser = series.length, bh = spec.stacked ? row - 6 : (row - 6) / nser;
      series.forEach(function (s, k) {
        var v = s.values[i]; if (v === null || !isFinite(v)) return;
        var rx = spec.stacked ? X(acc) : M.l, ry = spec.stacked ? y + 3 : y + 3 + k * bh;
        var r = el("rect", {x: rx, y: ry, width: Math.max(0.5, X(v) - M.l), height: Math.max(1, bh - 1), fill: colors[k], "class": "ss-bar"}, svg);
        acc += v;
        r.addEventListener("mousemove", function (ev) {
          var h = "<b>" + escText(c) + "</b>";
          series.forEach(function (s2, k2) { h += "<br><i style=\"background:" + colors[k2] + "\"></i>" + escText(s2.name) + ": " + escText(fmt(s2.values[i], spec.yunit)); });
          showTip(ev, h);
        });
        r.addEventListener("mouseleave", hideTip);
      });
      text(svg, X(totals[i]) + 4, y + row / 2 + 4, fmt(totals[i], spec.yunit));
    });
    fig.appendChild(svg);
    legend(fig, series.map(function (s) { return s.name; }), colors);
  }

  function heatColor(t) {
    t = Math.max(0, Math.min(1, t));
    var a = [247, 251, 255], b = [8, 48, 107];
    return "rgb(" + a.map(function (v, i) { return Math.round(v + (b[i] - v) * t); }).join(",") + ")";
  }
  function drawHeat(fig, spec) {
    var xl = spec.xlabels || [], yl = spec.ylabels || [], vals = spec.values || [];
    var longest = yl.reduce(function (m, c) { return Math.max(m, String(c).length); }, 0);
    var M = {l: Math.min(200, 16 + 6.2 * longest), r: 14, t: 8, b: 44}, W = width(fig);
    var cw = (W - M.l - M.r) / Math.max(1, xl.length), ch = Math.min(28, Math.max(12, 300 / Math.max(1, yl.length)));
    var H = M.t + M.b + ch * yl.length, flat = [];
    vals.forEach(function (r) { r.forEach(function (v) { if (v !== null && isFinite(v)) flat.push(v); }); });
    var lo = spec.vmin !== undefined && spec.vmin !== null ? spec.vmin : Math.min.apply(null, flat.concat([0]));
    var hi = spec.vmax !== undefined && spec.vmax !== null ? spec.vmax : Math.max.apply(null, flat.concat([1]));
    var svg = frame(spec, W, H, M);
    yl.forEach(function (name, j) {
      text(svg, M.l - 6, M.t + j * ch + ch / 2 + 4, String(name), {"text-anchor": "end", fill: "#1d2330"});
      xl.forEach(function (xn, i) {
        var v = (vals[j] || [])[i];
        var r = el("rect", {x: M.l + i * cw, y: M.t + j * ch, width: Math.max(0.5, cw - 1), height: ch - 1,
                            fill: v === null || v === undefined || !isFinite(v) ? "#f0f0f0" : heatColor((v - lo) / ((hi - lo) || 1)), "class": "ss-cell"}, svg);
        r.addEventListener("mousemove", function (ev) {
          showTip(ev, "<b>" + escText(name) + " × " + escText(xn) + "</b><br>" + escText(fmt(v, spec.unit)));
        });
        r.addEventListener("mouseleave", hideTip);
      });
    });
    var every = Math.ceil(xl.length / 16);
    xl.forEach(function (xn, i) { if (i % every === 0) text(svg, M.l + i * cw + cw / 2, H - M.b + 14, String(xn), {"text-anchor": "middle"}); });
    fig.appendChild(svg);
    var d = document.createElement("div"); d.className = "ss-legend";
    d.textContent = "scale: " + fmt(lo, spec.unit) + " (light) to " + fmt(hi, spec.unit) + " (dark)";
    fig.appendChild(d);
  }

  var DRAW = {line: drawLine, bar: drawBar, heatmap: drawHeat};
  function drawAll() {
    document.querySelectorAll("figure.ss-plot").forEach(function (fig) {
      var node = fig.querySelector("script.ss-spec");
      if (!node || fig.getAttribute("data-drawn")) return;
      var spec = JSON.parse(node.textContent), fn = DRAW[spec.kind];
      if (!fn) { fig.appendChild(document.createTextNode("unknown plot kind " + spec.kind)); return; }
      fn(fig, spec);
      fig.setAttribute("data-drawn", "1");
    });
  }

  /* Tables: click a header to sort (numbers by data-v); a filter input hides rows without the text;
     tree tables (data-tree) keep children under their parent when sorting and collapse with the toggle. */
  function cellKey(td, numeric) {
    var v = td.getAttribute("data-v");
    if (numeric) { var f = parseFloat(v === null ? td.textContent : v); return isFinite(f) ? f : -Infinity; }
    return (v === null ? td.textContent : v).toLowerCase();
  }
  function sortTable(table, col, dir) {
    var tbody = table.tBodies[0], rows = Array.prototype.slice.call(tbody.rows);
    var th = table.tHead.rows[0].cells[col], numeric = !th.classList.contains("text");
    function cmp(a, b) {
      var ka = cellKey(a.cells[col], numeric), kb = cellKey(b.cells[col], numeric);
      return (ka < kb ? -1 : ka > kb ? 1 : 0) * dir;
    }
    if (table.hasAttribute("data-tree")) {
      var kids = {}, ids = {};
      rows.forEach(function (r) { ids[r.getAttribute("data-id")] = 1; });
      rows.forEach(function (r) { var p = r.getAttribute("data-parent") || ""; if (!ids[p]) p = "";
        (kids[p] = kids[p] || []).push(r); });
      var out = [];
      (function walk(p) { (kids[p] || []).sort(cmp).forEach(function (r) { out.push(r); walk(r.getAttribute("data-id")); }); })("");
      rows = out;
    } else { rows.sort(cmp); }
    rows.forEach(function (r) { tbody.appendChild(r); });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (c, i) {
      if (i === col) c.setAttribute("aria-sort", dir > 0 ? "ascending" : "descending"); else c.removeAttribute("aria-sort");
    });
  }
  function setCollapsed(table, id, collapsed) {
    Array.prototype.forEach.call(table.tBodies[0].rows, function (r) {
      var p = r.getAttribute("data-id") || "";
      if (p.indexOf(id + "/") === 0) r.style.display = collapsed ? "none" : "";
      if (!collapsed && p.indexOf(id + "/") === 0) { var b = r.querySelector(".ss-toggle"); if (b) b.textContent = "▾"; }
    });
  }
  function initTables() {
    document.querySelectorAll("table.ss-table").forEach(function (table) {
      if (!table.tHead) return;
      Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, i) {
        th.addEventListener("click", function () {
          var cur = th.getAttribute("aria-sort");
          sortTable(table, i, cur === "descending" ? 1 : cur === "ascending" ? -1 : (th.classList.contains("text") ? 1 : -1));
        });
      });
      table.querySelectorAll(".ss-toggle").forEach(function (b) {
        b.addEventListener("click", function (ev) {
          ev.stopPropagation();
          var open = b.textContent === "▾"; b.textContent = open ? "▸" : "▾";
          setCollapsed(table, b.closest("tr").getAttribute("data-id"), open);
        });
      });
    });
    document.querySelectorAll("input.ss-filter").forEach(function (inp) {
      var table = document.getElementById(inp.getAttribute("data-table"));
      if (!table) return;
      inp.addEventListener("input", function () {
        var q = inp.value.toLowerCase();
        Array.prototype.forEach.call(table.tBodies[0].rows, function (r) {
          r.style.display = !q || r.textContent.toLowerCase().indexOf(q) >= 0 ? "" : "none";
        });
      });
    });
  }
  window.stepscope = {drawAll: drawAll, initTables: initTables, fmt: fmt};
  function init() { drawAll(); initTables(); }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init); else init();
})();
