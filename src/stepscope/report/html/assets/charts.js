/* stepscope charts: renders the chart specs that report/html/charts.py writes, with uPlot (vendored,
   assets/uplot.iife.min.js, MIT) for x-y charts and plain HTML for horizontal bars and heat maps.
   A chart is a figure.ss-plot holding a script.ss-spec JSON element (the SPEC); SPEC.kind is
   "xy" | "bars" | "heatmap" (older "line" / "bar" specs are read as "xy" / "bars").
   Axes: uPlot draws grid and ticks; tick labels and axis titles are HTML elements (.ss-tick, .ss-axis-title)
   placed in a layer over the chart, so they can be measured (no overlap: the gutters are sized from the
   measured labels) and read. Units pick round ticks in human units (ms, MiB, k samples/s): the axis title
   carries the display unit, the ticks carry plain round numbers.
   Zoom: drag across the plot; double-click or the "reset zoom" button restores the full range.
   window.stepscope.charts[figure id] is the uPlot instance of each drawn x-y chart (tests read its scales). */
(function () {
  "use strict";
  var ss = window.stepscope = window.stepscope || {};
  var PALETTE = ["#2b6cb0", "#dd6b20", "#38a169", "#805ad5", "#d53f8c", "#718096", "#d69e2e", "#319795",
                 "#e53e3e", "#4c51bf", "#975a16", "#2c7a7b"];
  var FONT = "11px system-ui, -apple-system, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif";
  var TITLE_H = 14, TICK_LEN = 4, GAP = 4, FENCE = 3;
  var charts = ss.charts = ss.charts || {};
  var tip = null, measureCtx = null;

  function measure(s) {
    if (!measureCtx) { measureCtx = document.createElement("canvas").getContext("2d"); measureCtx.font = FONT; }
    return measureCtx.measureText(s).width;
  }
  function finite(v) { return v !== null && v !== undefined && isFinite(v); }
  function escText(s) { var d = document.createElement("div"); d.textContent = String(s); return d.innerHTML; }

  /* ---- units: a display scale for a range, and full-precision values for tooltips ---- */
  var TIME_NS = {ns: 1, "µs": 1e3, ms: 1e6, s: 1e9, min: 6e10, h: 3.6e12};
  function timeUnit(maxNs) {
    return maxNs < 1e3 ? "ns" : maxNs < 1e6 ? "µs" : maxNs < 1e9 ? "ms" : maxNs < 3e11 ? "s" : maxNs < 1.08e13 ? "min" : "h";
  }
  /* {div, title: unit shown in the axis title, suffix: appended to each tick} for values up to maxAbs */
  function scaleFor(unit, maxAbs) {
    maxAbs = maxAbs || 0;
    if (unit === "date") return {div: 1, title: "", suffix: ""};
    var toNs = unit === "ns" ? 1 : unit === "ms" ? 1e6 : unit === "s" ? 1e9 : 0;
    if (toNs) { var u = timeUnit(maxAbs * toNs); return {div: TIME_NS[u] / toNs, title: u, suffix: ""}; }
    if (unit === "bytes" || unit === "bytes/s") {
      var names = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"], i = 0;
      while (maxAbs >= 1024 * Math.pow(1024, i) && i < names.length - 1) i++;
      return {div: Math.pow(1024, i), title: names[i] + (unit === "bytes/s" ? "/s" : ""), suffix: ""};
    }
    if (unit === "%") return {div: 1, title: "%", suffix: ""};
    if (unit === "share") return {div: 0.01, title: "%", suffix: ""};
    var si = maxAbs >= 1e9 ? [1e9, "G"] : maxAbs >= 1e6 ? [1e6, "M"] : maxAbs >= 1e4 ? [1e3, "k"] : [1, ""];
    return {div: si[0], title: unit || "", suffix: si[1]};
  }
  /* dates: x in seconds since the epoch, shown in UTC; ticks at whole minutes, hours, days, weeks, months */
  var DATE_STEPS = [60, 300, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800, 1209600];
  function pad2(n) { return (n < 10 ? "0" : "") + n; }
  function dateText(t, step) {
    var d = new Date(t * 1000), day = d.getUTCFullYear() + "-" + pad2(d.getUTCMonth() + 1) + "-" + pad2(d.getUTCDate());
    if (step >= 2419200) return day.slice(0, 7);
    if (step >= 86400) return day;
    return day + " " + pad2(d.getUTCHours()) + ":" + pad2(d.getUTCMinutes());
  }
  function dateTicks(lo, hi, n) {
    var span = Math.max(1, hi - lo), step = null, out = [];
    for (var i = 0; i < DATE_STEPS.length; i++) if (span / DATE_STEPS[i] <= n) { step = DATE_STEPS[i]; break; }
    if (step === null) {  /* months: the first of each k-th month */
      var months = Math.max(1, Math.ceil(span / 2629800 / n)), d = new Date(lo * 1000);
      var m = new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1));
      while (m.getTime() / 1000 <= hi) {
        out.push(m.getTime() / 1000);
        m = new Date(Date.UTC(m.getUTCFullYear(), m.getUTCMonth() + months, 1));
      }
      return {values: out, step: 2419200 * months};
    }
    var base = step >= 604800 ? 345600 : 0;  /* weeks start on Monday (1970-01-05) */
    for (var t = Math.ceil((lo - base) / step) * step + base; t <= hi; t += step) out.push(t);
    return {values: out, step: step};
  }
  function trim(s) { return s.indexOf(".") >= 0 ? s.replace(/0+$/, "").replace(/\.$/, "") : s; }
  /* a value with its unit, 3 significant digits: tooltips, bar ends, heat-map cells */
  function fmt(v, unit) {
    if (!finite(v)) return "—";
    if (unit === "date") return dateText(v, 60) + " UTC";
    var sc = scaleFor(unit, Math.abs(v)), x = v / sc.div, a = Math.abs(x);
    var s = a === 0 ? "0" : a >= 100 ? x.toFixed(0) : a >= 10 ? trim(x.toFixed(1)) : trim(x.toFixed(2));
    if (unit === "%" || unit === "share") return s + "%";
    return s + sc.suffix + (sc.title ? " " + sc.title : "");
  }
  function niceStep(raw, integer) {
    if (!(raw > 0)) return 1;
    var p = Math.pow(10, Math.floor(Math.log10(raw))), m = raw / p;
    var step = (m <= 1.4 ? 1 : m <= 3 ? 2 : m <= 7 ? 5 : 10) * p;
    return integer ? Math.max(1, Math.round(step)) : step;
  }
  function decimals(step) { return Math.max(0, Math.min(6, -Math.floor(Math.log10(step) + 1e-9))); }
  /* round ticks in display units over [lo, hi] (data units), at most n of them */
  function linearTicks(lo, hi, n, sc, integer) {
    var a = lo / sc.div, b = hi / sc.div;
    if (!(b > a)) { b = a + 1; }
    var step = niceStep((b - a) / Math.max(1, n), integer && sc.div === 1), out = [];
    for (var t = Math.ceil(a / step - 1e-9) * step; t <= b + step * 1e-9; t += step) out.push(Math.abs(t) < step * 1e-9 ? 0 : t);
    return {values: out.map(function (t) { return t * sc.div; }), step: step};
  }
  function logTicks(lo, hi, base, maxN) {
    var out = [], e0 = Math.floor(Math.log(lo) / Math.log(base) - 1e-9), e1 = Math.ceil(Math.log(hi) / Math.log(base) + 1e-9);
    var mant = base === 10 && e1 - e0 <= 3 ? [1, 2, 5] : [1];
    for (var e = e0; e <= e1; e++) {
      mant.forEach(function (m) { var v = m * Math.pow(base, e); if (v >= lo * 0.9999 && v <= hi * 1.0001) out.push(v); });
    }
    while (out.length > maxN) out = out.filter(function (_, i) { return i % 2 === 0; });
    return out;
  }
  function tickLabel(v, sc, step) {
    var x = v / sc.div, d = step ? decimals(step) : (Math.abs(x) >= 10 || x === Math.round(x) ? 0 : Math.abs(x) >= 1 ? 1 : 2);
    return x === 0 ? "0" : x.toFixed(d) + sc.suffix;  /* "0", never "0k" */
  }
  function axisTitle(text, unit, sc) {
    if (!sc.title || !unit) return text || "";
    return (text ? text + " " : "") + "(" + sc.title + ")";
  }

  function withLog(title, log) {
    if (!log) return title;
    return /\)$/.test(title) ? title.slice(0, -1) + ", log scale)" : title + " (log scale)";
  }
  function tooltip(html, x, y) {
    if (!tip) { tip = document.createElement("div"); tip.id = "ss-tip"; document.body.appendChild(tip); }
    if (html === null) { tip.style.display = "none"; return; }
    tip.innerHTML = html; tip.style.display = "block";
    var w = tip.offsetWidth, h = tip.offsetHeight, px = x + 14, py = y + 12;
    if (px + w > window.innerWidth - 4) px = x - w - 14;
    if (py + h > window.innerHeight - 4) py = y - h - 12;
    tip.style.left = px + "px"; tip.style.top = py + "px";
  }

  function rollingMedian(y, w) {
    var half = Math.floor(w / 2), out = new Array(y.length);
    for (var i = 0; i < y.length; i++) {
      if (!finite(y[i])) { out[i] = y[i] === undefined ? undefined : null; continue; }
      var win = [];
      for (var j = Math.max(0, i - half); j <= Math.min(y.length - 1, i + half); j++) if (finite(y[j])) win.push(y[j]);
      win.sort(function (a, b) { return a - b; });
      var m = win.length >> 1;
      out[i] = win.length % 2 ? win[m] : (win[m - 1] + win[m]) / 2;
    }
    return out;
  }
  function alpha(color, a) {
    var m = /^#([0-9a-f]{6})$/i.exec(color || "");
    if (!m) return color;
    var n = parseInt(m[1], 16);
    return "rgba(" + (n >> 16) + "," + ((n >> 8) & 255) + "," + (n & 255) + "," + a + ")";
  }

  /* ---- x-y charts (uPlot) ---- */
  function normalize(spec) {
    if (spec.kind !== "line") return spec;
    return {kind: "xy", x: spec.x, height: spec.height, stacked: spec.stacked, shades: spec.bands, rules: spec.marks,
            xAxis: {title: spec.xlabel, unit: spec.xunit}, yAxis: {title: spec.ylabel, unit: spec.yunit, min: spec.ymin, max: spec.ymax},
            series: (spec.series || []).map(function (s) { return {label: s.name, y: s.y, color: s.color, dash: s.dash, area: s.area}; })};
  }

  function buildData(spec) {
    /* each series may carry its own x: join them on the union of x values; a value missing only because
       another series has that x is `undefined` (uPlot connects across it), a recorded gap stays null */
    var ser = spec.series || [], own = ser.some(function (s) { return s.x; });
    var data;
    if (own) {
      var tables = ser.map(function (s) { return [s.x || spec.x, s.y]; });
      data = uPlot.join(tables);
    } else {
      data = [spec.x || []].concat(ser.map(function (s) { return s.y; }));
    }
    return data;
  }

  function drawXY(fig, spec) {
    spec = normalize(spec);
    var xa = spec.xAxis || {}, ya = spec.yAxis || {}, ser = spec.series || [];
    var joined = buildData(spec), xs = joined[0];
    var integerX = xs.length > 0 && xs.every(function (v) { return v === Math.round(v); });
    var raw = joined.slice(1);
    var colors = ser.map(function (s, i) { return s.color || PALETTE[i % PALETTE.length]; });
    /* uPlot series list: [x, ...main series (smoothed where asked), ...raw behind smoothed, ...spread bands] */
    var useries = [{}], udata = [xs], main = [], tipRows = [], bands = [];
    var stackAcc = spec.stacked ? new Array(xs.length).fill(0) : null, stacked = [];
    ser.forEach(function (s, k) {
      var y = raw[k];
      if (spec.stacked) {
        var top = y.map(function (v, i) { if (finite(v)) stackAcc[i] += v; return v === undefined ? undefined : stackAcc[i]; });
        stacked.push(top);
        return;
      }
      var shown = s.smooth > 1 ? rollingMedian(y, s.smooth) : y;
      main.push({k: k, data: shown, raw: y});
    });
    if (spec.stacked) {
      /* the top layer first, filled to zero, each lower layer painted over it: a stack without bands */
      for (var k = ser.length - 1; k >= 0; k--) {
        useries.push({label: ser[k].label, stroke: colors[k], fill: alpha(colors[k], 0.78), width: 1, points: {show: false},
                      ssCount: k === ser.length - 1});
        udata.push(stacked[k]);
      }
    } else {
      main.forEach(function (m) {
        var s = ser[m.k];
        if (s.smooth > 1) {
          useries.push({label: s.label + " (raw)", stroke: alpha(colors[m.k], 0.28), width: 1, points: {show: false}, ssRaw: true,
                        ssCount: true});
          udata.push(m.raw);
        }
        if (s.spread) {
          var lo = m.raw.map(function (v, i) { return finite(v) && finite(s.spread[i]) ? v - s.spread[i] : null; });
          var hi = m.raw.map(function (v, i) { return finite(v) && finite(s.spread[i]) ? v + s.spread[i] : null; });
          useries.push({label: s.label + " +1 std", stroke: "transparent", width: 0, points: {show: false}, ssAux: true});
          udata.push(hi);
          useries.push({label: s.label + " −1 std", stroke: "transparent", width: 0, points: {show: false}, ssAux: true});
          udata.push(ya.log ? lo.map(function (v) { return v !== null && v > 0 ? v : null; }) : lo);
          bands.push({series: [useries.length - 2, useries.length - 1], fill: alpha(colors[m.k], 0.16)});
        }
      });
      main.forEach(function (m) {
        var s = ser[m.k];
        var one = m.data.filter(finite).length === 1 || s.points;
        useries.push({label: s.label, stroke: colors[m.k], width: s.smooth > 1 ? 2 : 1.6, dash: s.dash ? [6, 4] : undefined,
                      fill: s.area ? alpha(colors[m.k], 0.18) : undefined,
                      points: {show: one, size: 6, fill: colors[m.k]}, ssMain: m.k, ssCount: !(s.smooth > 1)});
        udata.push(m.data);
      });
    }
    /* y range, robust to noise: every point drawn in view (raw values and the rolling median alike) enters
       Tukey's far-out fences, Q1 - 3 IQR and Q3 + 3 IQR (the IQR at least 5% of the median); a point beyond them
       is clipped and marked at the edge (drawEdges), and the axis ends at the fence. Robust while fewer than a
       quarter of the points are outliers on one side; with IQR 0 at a zero median (a mostly idle disk) every
       point is in range. "show all" (st.fullY) restores the full extent. */
    function quantile(sorted, p) {
      var h = (sorted.length - 1) * p, i = Math.floor(h);
      return i + 1 < sorted.length ? sorted[i] + (h - i) * (sorted[i + 1] - sorted[i]) : sorted[i];
    }
    function visiblePoints(u, keep) {
      var x0 = st.xwin ? st.xwin[0] : -Infinity, x1 = st.xwin ? st.xwin[1] : Infinity, out = [];
      for (var i = 1; i < udata.length; i++) {
        if (u && u.series[i] && u.series[i].show === false) continue;
        if (!keep(useries[i])) continue;
        var d = udata[i];
        for (var j = 0; j < xs.length; j++) {
          if (xs[j] < x0 || xs[j] > x1 || !finite(d[j]) || (ya.log && d[j] <= 0)) continue;
          out.push(ya.log ? Math.log(d[j]) : d[j]);
        }
      }
      return out;
    }
    function visibleRange(u) {
      var pts = visiblePoints(u, function (us) { return !us.ssAux; }).sort(function (a, b) { return a - b; });
      var aux = visiblePoints(u, function (us) { return us.ssAux; });
      if (!pts.length) pts = aux.sort(function (a, b) { return a - b; });
      if (!pts.length) return {lo: Infinity, hi: -Infinity, f0: -Infinity, f1: Infinity};
      var f0 = -Infinity, f1 = Infinity;
      if (!st.fullY && pts.length >= 8) {
        var q1 = quantile(pts, 0.25), q3 = quantile(pts, 0.75), med = quantile(pts, 0.5);
        var spread = Math.max(q3 - q1, ya.log ? 0.05 : 0.05 * Math.abs(med));
        if (spread > 0) { f0 = q1 - FENCE * spread; f1 = q3 + FENCE * spread; }
      }
      var lo = Infinity, hi = -Infinity;
      pts.concat(aux).forEach(function (v) { if (v >= f0 && v <= f1) { if (v < lo) lo = v; if (v > hi) hi = v; } });
      /* points beyond a fence: the axis ends at the fence, so the edge where they are marked stands apart */
      if (pts[0] < f0) lo = f0;
      if (pts[pts.length - 1] > f1) hi = f1;
      var back = ya.log ? Math.exp : function (v) { return v; };
      return {lo: back(lo), hi: back(hi), clipLo: pts[0] < f0, clipHi: pts[pts.length - 1] > f1};
    }
    function yRange(u) {
      var r = visibleRange(u), lo = r.lo, hi = r.hi;
      if (!isFinite(lo)) { lo = ya.log ? 1 : 0; hi = ya.log ? 10 : 1; }
      if (ya.log) { return [finite(ya.min) ? ya.min : lo / (r.clipLo ? 1 : 1.4), finite(ya.max) ? ya.max : hi * (r.clipHi ? 1 : 1.4)]; }
      lo = finite(ya.min) ? ya.min : Math.min(0, lo);
      hi = finite(ya.max) ? ya.max : hi + (r.clipHi ? 0 : (hi - lo) * 0.06);
      if (!(hi > lo)) hi = lo + (lo === 0 ? 1 : Math.abs(lo) * 0.1);
      return [lo, hi];
    }
    var xFinite = xs.filter(finite), xmin = xFinite.length ? Math.min.apply(null, xFinite) : 0,
        xmax = xFinite.length ? Math.max.apply(null, xFinite) : 1;
    function fullX() {
      if (!(xmax > xmin)) return xa.log ? [xmin / 2, xmax * 2] : [xmin - 1, xmax + 1];
      return xa.log ? [xmin / 1.15, xmax * 1.15] : [xmin, xmax];
    }
    /* uPlot asks this before ranging y: the window it returns is the one y is ranged over */
    function xRange(u, lo, hi) {
      var r = lo === null || lo === undefined || (lo <= xmin && hi >= xmax) ? fullX() : [lo, hi];
      st.xwin = r;
      return r;
    }
    var st = {ticks: [[], []], scales: [null, null], xwin: null, fullY: false};
    function axisTicks(u, axisIdx, lo, hi) {
      var ax = axisIdx === 0 ? xa : ya, horizontal = axisIdx === 0;
      var sc = scaleFor(ax.unit, Math.max(Math.abs(lo), Math.abs(hi)));
      var plotPx = horizontal ? u.bbox.width / uPlot.pxRatio : u.bbox.height / uPlot.pxRatio;
      var vals, step = 0;
      if (horizontal && ax.labels) {
        var lw = 0;
        ax.labels.forEach(function (l) { lw = Math.max(lw, measure(String(l))); });
        var every = Math.max(1, Math.ceil((hi - lo + 1) / Math.max(1, Math.floor(plotPx / (lw + 16)))));
        every = niceStep(every, true);
        vals = [];
        for (var c = Math.ceil(lo / every) * every; c <= hi; c += every) if (c >= 0 && c < ax.labels.length) vals.push(c);
        st.ticks[0] = vals.map(function (v) { return {v: v, text: String(ax.labels[v])}; });
        st.scales[0] = scaleFor("", 0);
        return vals;
      } else if (horizontal && ax.unit === "date") {
        var dw = measure("2024-03-01 12:00") + 20;
        var dt = dateTicks(lo, hi, Math.max(2, Math.floor(plotPx / dw)));
        st.ticks[0] = dt.values.map(function (v) { return {v: v, text: dateText(v, dt.step)}; });
        st.scales[0] = scaleFor("date", 0);
        return dt.values;
      } else if (horizontal && ax.ticksAtData) {
        vals = xFinite.filter(function (v, i, a) { return a.indexOf(v) === i; });
      } else if (ax.log) {
        vals = logTicks(lo, hi, ax.log === 2 ? 2 : 10, Math.max(2, Math.floor(plotPx / (horizontal ? 60 : 24))));
      } else {
        var guess = Math.max(measure(tickLabel(hi, sc, 0)), measure(tickLabel(lo, sc, 0))) + 28;
        var n = horizontal ? Math.max(2, Math.min(10, Math.floor(plotPx / guess))) : Math.max(2, Math.min(8, Math.floor(plotPx / 30)));
        var lt = linearTicks(lo, hi, n, sc, horizontal && integerX);
        vals = lt.values; step = lt.step;
      }
      vals = vals.filter(function (v) { return v >= lo - Math.abs(hi - lo) * 1e-9 && v <= hi + Math.abs(hi - lo) * 1e-9; });
      st.ticks[axisIdx] = vals.map(function (v) { return {v: v, text: tickLabel(v, sc, step)}; });
      st.scales[axisIdx] = sc;
      return vals;
    }
    function ySize(u, values) {
      var w = 0;
      (st.ticks[1] || []).forEach(function (t) { w = Math.max(w, measure(t.text)); });
      if (!w) { var r = yRange(u); w = Math.max(measure(tickLabel(r[1], scaleFor(ya.unit, r[1]), 0)), 20); }
      return Math.ceil(TICK_LEN + GAP + w + 8 + TITLE_H + 4);
    }
    var width = Math.max(320, fig.clientWidth || 720), height = spec.height || 260;
    var opts = {
      width: width, height: height, legend: {show: false}, padding: [12, 16, 0, 0],
      scales: {
        x: {time: false, distr: xa.log ? 3 : 1, log: xa.log === 2 ? 2 : 10, range: xRange},
        y: {distr: ya.log ? 3 : 1, log: 10, range: function (u) { return yRange(u); }}
      },
      axes: [
        {scale: "x", side: 2, splits: function (u, i, lo, hi) { return axisTicks(u, 0, lo, hi); },
         values: function (u, splits) { return splits.map(function () { return ""; }); },
         size: TICK_LEN + GAP + 14 + 6 + TITLE_H + 4, gap: GAP, ticks: {size: TICK_LEN, stroke: "#cbd2db"},
         grid: {stroke: "#eef1f4", width: 1}, stroke: "#5b6475", font: FONT},
        {scale: "y", side: 3, splits: function (u, i, lo, hi) { return axisTicks(u, 1, lo, hi); },
         values: function (u, splits) { return splits.map(function () { return ""; }); },
         size: ySize, gap: GAP, ticks: {size: TICK_LEN, stroke: "#cbd2db"}, grid: {stroke: "#eef1f4", width: 1},
         stroke: "#5b6475", font: FONT}
      ],
      series: useries, bands: bands,
      cursor: {drag: {x: true, y: false, setScale: true}, points: {size: 6}},
      hooks: {
        drawClear: [function (u) { drawShades(u, spec.shades || []); }],
        draw: [function (u) { drawRules(u, spec.rules || []); drawEdges(u); placeAxes(u); }],
        setCursor: [function (u) { showTip(u); }],
        setScale: [function (u, key) { if (key === "x") updateReset(u); }]
      }
    };
    var clipped = document.createElement("button");
    clipped.type = "button"; clipped.className = "ss-clipped"; clipped.hidden = true;
    clipped.title = "points beyond the robust y range are marked at the edge (hover the chart for their values)";
    clipped.addEventListener("click", function () {
      st.fullY = !st.fullY;
      u.setScale("x", {min: u.scales.x.min, max: u.scales.x.max});  /* y re-ranges over the same window */
    });
    var holder = document.createElement("div"); holder.className = "ss-chart";
    var layer = document.createElement("div"); layer.className = "ss-axis-layer";
    fig.appendChild(holder);
    var u = new uPlot(opts, udata, holder);
    holder.appendChild(layer);
    var reset = document.createElement("button");
    reset.type = "button"; reset.className = "ss-reset"; reset.textContent = "reset zoom"; reset.hidden = true;
    reset.addEventListener("click", function () { u.setScale("x", {min: xmin, max: xmax}); });
    fig.insertBefore(reset, holder);
    function updateReset(u2) {
      var r = fullX(), zoomed = u2.scales.x.min > r[0] + 1e-9 * Math.abs(r[0] || 1) ||
                                            u2.scales.x.max < r[1] - 1e-9 * Math.abs(r[1] || 1);
      reset.hidden = !zoomed;
    }
    function drawShades(u2, shades) {
      var ctx = u2.ctx, top = u2.bbox.top, h = u2.bbox.height;
      shades.forEach(function (b) {
        var a = u2.valToPos(Math.max(b.x0, u2.scales.x.min), "x", true), c = u2.valToPos(Math.min(b.x1, u2.scales.x.max), "x", true);
        if (!(c > a)) return;
        ctx.save(); ctx.fillStyle = b.color || "#edf2f7"; ctx.fillRect(a, top, c - a, h);
        if (b.label) { ctx.fillStyle = "#5b6475"; ctx.font = Math.round(10 * uPlot.pxRatio) + "px sans-serif";
                       ctx.textAlign = "left"; ctx.textBaseline = "alphabetic"; /* uPlot leaves its axes' alignment */
                       ctx.fillText(b.label, a + 4 * uPlot.pxRatio, top + 12 * uPlot.pxRatio); }
        ctx.restore();
      });
    }
    function drawRules(u2, rules) {
      var ctx = u2.ctx, top = u2.bbox.top, h = u2.bbox.height;
      rules.forEach(function (m) {
        if (m.x < u2.scales.x.min || m.x > u2.scales.x.max) return;
        var px = u2.valToPos(m.x, "x", true);
        ctx.save(); ctx.strokeStyle = m.color || "#a0aec0"; ctx.setLineDash([3 * uPlot.pxRatio, 3 * uPlot.pxRatio]);
        ctx.beginPath(); ctx.moveTo(px, top); ctx.lineTo(px, top + h); ctx.stroke();
        if (m.label) { ctx.fillStyle = "#5b6475"; ctx.font = Math.round(9 * uPlot.pxRatio) + "px sans-serif";
                       ctx.textAlign = "left"; ctx.textBaseline = "alphabetic";
                       ctx.fillText(m.label, px + 2 * uPlot.pxRatio, top + h - 4 * uPlot.pxRatio); }
        ctx.restore();
      });
    }
    /* points beyond the y range: a small triangle at the edge they left by, in their series' colour */
    function drawEdges(u2) {
      var ctx = u2.ctx, top = u2.bbox.top, bottom = u2.bbox.top + u2.bbox.height, r = 3 * uPlot.pxRatio;
      var ymin = u2.scales.y.min, ymax = u2.scales.y.max, x0 = u2.scales.x.min, x1 = u2.scales.x.max, above = 0, below = 0;
      for (var i = 1; i < udata.length; i++) {
        if (!useries[i].ssCount || u2.series[i].show === false) continue;
        var d = udata[i];
        ctx.save(); ctx.fillStyle = "#c53030";
        for (var j = 0; j < xs.length; j++) {
          var v = d[j];
          if (!finite(v) || xs[j] < x0 || xs[j] > x1 || (v <= ymax && v >= ymin)) continue;
          var px = u2.valToPos(xs[j], "x", true), up = v > ymax, py = up ? top : bottom;
          if (up) above++; else below++;
          ctx.beginPath(); ctx.moveTo(px - r, up ? py + 2 * r : py - 2 * r); ctx.lineTo(px + r, up ? py + 2 * r : py - 2 * r);
          ctx.lineTo(px, py); ctx.closePath(); ctx.fill();
        }
        ctx.restore();
      }
      var parts = [];
      if (above) parts.push("▲ " + above + " point" + (above > 1 ? "s" : "") + " above");
      if (below) parts.push("▼ " + below + " point" + (below > 1 ? "s" : "") + " below");
      if (st.fullY) clipped.textContent = "full y range shown · clip outliers";
      else clipped.textContent = parts.join(", ") + " the y range, marked at the edge · show all";
      clipped.hidden = !st.fullY && !parts.length;
    }
    function placeAxes(u2) {
      layer.textContent = "";
      var left = u2.bbox.left / uPlot.pxRatio, top = u2.bbox.top / uPlot.pxRatio;
      var pw = u2.bbox.width / uPlot.pxRatio, ph = u2.bbox.height / uPlot.pxRatio;
      function span(cls, text, css) {
        var e = document.createElement("span"); e.className = cls; e.textContent = text;
        for (var k in css) e.style[k] = css[k];
        layer.appendChild(e); return e;
      }
      var lastRight = -Infinity;
      st.ticks[0].forEach(function (t) {
        var px = u2.valToPos(t.v, "x"), w = measure(t.text);
        if (px - w / 2 < lastRight + 6) return; /* never two x labels in one place */
        lastRight = px + w / 2;
        span("ss-tick ss-tick-x", t.text, {left: (left + px - w / 2) + "px", top: (top + ph + TICK_LEN + GAP) + "px"});
      });
      var lastTop = Infinity;
      st.ticks[1].slice().sort(function (a, b) { return a.v - b.v; }).forEach(function (t) {
        var py = u2.valToPos(t.v, "y");
        if (py + 7 > lastTop - 2) return;
        lastTop = py - 7;
        var e = span("ss-tick ss-tick-y", t.text, {top: (top + py - 7) + "px"});
        e.style.right = (u2.width - left + TICK_LEN + GAP) + "px";
      });
      span("ss-axis-title ss-axis-x", withLog(axisTitle(xa.title, xa.unit, st.scales[0] || scaleFor(xa.unit, 0)), xa.log),
           {left: left + "px", width: pw + "px", top: (top + ph + TICK_LEN + GAP + 16) + "px"});
      var yt = span("ss-axis-title ss-axis-y", withLog(axisTitle(ya.title, ya.unit, st.scales[1] || scaleFor(ya.unit, 0)), ya.log), {});
      yt.style.width = ph + "px";
      yt.style.left = (2 + TITLE_H / 2 - ph / 2) + "px";
      yt.style.top = (top + ph / 2 - TITLE_H / 2) + "px";
    }
    function showTip(u2) {
      var i = u2.cursor.idx;
      if (i === null || i === undefined || u2.cursor.left < 0) { tooltip(null); return; }
      var sx = st.scales[0] || scaleFor(xa.unit, 0);
      var xText = xa.labels ? String(xa.labels[xs[i]] !== undefined ? xa.labels[xs[i]] : xs[i])
                  : xa.unit ? fmt(xs[i], xa.unit) : tickLabel(xs[i], sx, 0);
      var h = "<b>" + escText((xa.title || "x") + " " + xText) + "</b>";
      ser.forEach(function (s, k) {
        var v = raw[k][i];
        var line = escText(s.label) + ": " + escText(fmt(v, ya.unit));
        if (s.smooth > 1 && !spec.stacked) {
          var med = main.filter(function (m) { return m.k === k; })[0].data[i];
          line += " <span class=\"dim\">(rolling median " + escText(fmt(med, ya.unit)) + ")</span>";
        }
        h += "<br><i style=\"background:" + colors[k] + "\"></i>" + line;
      });
      if (spec.stacked) h += "<br>total: " + escText(fmt(stackAcc[i], ya.unit));
      var r = u2.over.getBoundingClientRect();
      tooltip(h, r.left + u2.cursor.left, r.top + u2.cursor.top);
    }
    u.over.addEventListener("mouseleave", function () { tooltip(null); });
    legend(fig, ser.map(function (s, k) {
      var items = [k];
      if (spec.stacked) items = [ser.length - k];
      else {
        useries.forEach(function (us, j) { if (j && (us.ssMain === k)) items = [j]; });
        useries.forEach(function (us, j) { if (j && (us.ssRaw || us.ssAux) && us.label.indexOf(s.label + " ") === 0) items.push(j); });
      }
      return {label: s.label + (s.smooth > 1 && !spec.stacked ? " (rolling median of " + s.smooth + "; faint: raw, spikes clipped)" : ""),
              color: colors[k], dash: s.dash, idx: items};
    }), u);
    fig.appendChild(clipped);
    charts[fig.id || ("chart-" + Object.keys(charts).length)] = u;
    return u;
  }

  function legend(fig, items, u) {
    if (!items.length) return;
    var d = document.createElement("div"); d.className = "ss-legend";
    items.forEach(function (it) {
      var s = document.createElement(u ? "button" : "span"), sw = document.createElement("i");
      if (u) { s.type = "button"; s.title = "show / hide"; s.setAttribute("aria-pressed", "true"); }
      sw.style.background = it.dash ? "repeating-linear-gradient(90deg," + it.color + " 0 4px,transparent 4px 6px)" : it.color;
      s.appendChild(sw); s.appendChild(document.createTextNode(it.label)); d.appendChild(s);
      if (u) s.addEventListener("click", function () {
        var on = s.getAttribute("aria-pressed") !== "true";
        s.setAttribute("aria-pressed", on ? "true" : "false");
        it.idx.forEach(function (j) { u.setSeries(j, {show: on}); });
      });
    });
    fig.appendChild(d);
  }

  /* ---- horizontal bars (HTML): one row per category, shortened name, full name on hover ---- */
  function drawBars(fig, spec) {
    if (spec.kind === "bar") spec = {categories: spec.categories, series: (spec.series || []).map(function (s) {
      return {label: s.name, values: s.values}; }), axis: {title: spec.ylabel, unit: spec.yunit}, stacked: spec.stacked};
    var cats = spec.categories || [], short = spec.labels || cats, ser = spec.series || [], ax = spec.axis || {};
    var colors = ser.map(function (s, i) { return s.color || PALETTE[i % PALETTE.length]; });
    var totals = cats.map(function (_, i) {
      var s = 0, m = 0;
      ser.forEach(function (se) { var v = se.values[i]; if (finite(v)) { s += v; m = Math.max(m, v); } });
      return spec.stacked ? s : m;
    });
    var vmax = Math.max.apply(null, totals.concat([0])) || 1, sc = scaleFor(ax.unit, vmax);
    var lt = linearTicks(0, vmax, 5, sc, false), top = lt.values[lt.values.length - 1];
    if (top < vmax) top = vmax;
    var box = document.createElement("div"); box.className = "ss-bars";
    var html = "<div class=\"ss-bars-axis\"><span class=\"ss-axis-title\">" + escText(axisTitle(ax.title, ax.unit, sc)) + "</span><div class=\"ss-bars-ticks\">";
    lt.values.forEach(function (v) { html += "<span class=\"ss-tick\" style=\"left:" + (100 * v / top).toFixed(2) + "%\">" + escText(tickLabel(v, sc, lt.step)) + "</span>"; });
    html += "</div></div>";
    cats.forEach(function (c, i) {
      var tipText = c + ser.map(function (s) { return "\n" + s.label + ": " + fmt(s.values[i], ax.unit); }).join("");
      html += "<div class=\"ss-bar-row\" title=\"" + escText(tipText) + "\"><span class=\"ss-bar-name\">" + escText(short[i]) +
              "</span><span class=\"ss-bar-track\">";
      var acc = 0;
      ser.forEach(function (s, k) {
        var v = s.values[i]; if (!finite(v)) return;
        var left = spec.stacked ? acc : 0, hgt = spec.stacked ? 100 : 100 / ser.length, tp = spec.stacked ? 0 : k * hgt;
        html += "<i class=\"ss-bar\" style=\"left:" + (100 * left / top).toFixed(3) + "%;width:" + Math.max(0.2, 100 * v / top).toFixed(3) +
                "%;top:" + tp.toFixed(1) + "%;height:" + hgt.toFixed(1) + "%;background:" + colors[k] + "\"></i>";
        acc += v;
      });
      html += "</span><span class=\"ss-bar-value\">" + escText(fmt(totals[i], ax.unit)) + "</span></div>";
    });
    box.innerHTML = html;
    fig.appendChild(box);
    /* the names were shortened once, in Python (unique, full name on hover): their column is as wide as the
       longest, leaving the bars at least 120 px, so CSS never cuts a name a second time */
    var names = box.querySelectorAll(".ss-bar-name"), nameW = 0;
    for (var n = 0; n < names.length; n++) nameW = Math.max(nameW, names[n].scrollWidth);
    var room = (fig.clientWidth || 720) - 76 - 120;
    box.style.setProperty("--ss-name-w", Math.max(120, Math.min(Math.ceil(nameW) + 2, room)) + "px");
    if (ser.length > 1) legend(fig, ser.map(function (s, k) { return {label: s.label, color: colors[k], idx: []}; }), null);
  }

  /* ---- heat maps (HTML grid): rows and columns named, value on hover, scale below ---- */
  function heatColor(t) {
    t = Math.max(0, Math.min(1, t));
    var a = [247, 251, 255], b = [8, 48, 107];
    return "rgb(" + a.map(function (v, i) { return Math.round(v + (b[i] - v) * t); }).join(",") + ")";
  }
  function drawHeat(fig, spec) {
    var xl = spec.xlabels || [], yl = spec.ylabels || [], vals = spec.values || [], flat = [];
    vals.forEach(function (r) { r.forEach(function (v) { if (finite(v)) flat.push(v); }); });
    var lo = finite(spec.vmin) ? spec.vmin : Math.min.apply(null, flat.concat([0]));
    var hi = finite(spec.vmax) ? spec.vmax : Math.max.apply(null, flat.concat([1]));
    var every = Math.max(1, Math.ceil(xl.length / 24)), cw = Math.max(6, Math.min(48, Math.floor(((fig.clientWidth || 720) - 160) / Math.max(1, xl.length))));
    var html = "<div class=\"ss-heat\"><div class=\"ss-axis-title\">" + escText(spec.ylabel || "") + " ↓ · " + escText(spec.xlabel || "") +
               " →</div><table class=\"ss-heat-grid\"><thead><tr><th></th>";
    xl.forEach(function (x, i) { html += "<th class=\"ss-tick\" style=\"width:" + cw + "px\">" + (i % every === 0 ? escText(x) : "") + "</th>"; });
    html += "</tr></thead><tbody>";
    yl.forEach(function (name, j) {
      html += "<tr><th class=\"ss-tick\">" + escText(name) + "</th>";
      xl.forEach(function (xn, i) {
        var v = (vals[j] || [])[i];
        html += "<td title=\"" + escText(name + " × " + xn + ": " + fmt(v, spec.unit)) + "\" style=\"background:" +
                (finite(v) ? heatColor((v - lo) / ((hi - lo) || 1)) : "#f0f0f0") + "\"></td>";
      });
      html += "</tr>";
    });
    html += "</tbody></table></div>";
    var box = document.createElement("div"); box.innerHTML = html; fig.appendChild(box.firstChild);
    var d = document.createElement("div"); d.className = "ss-legend ss-heat-scale";
    d.innerHTML = "<span>" + escText(fmt(lo, spec.unit)) + "</span><i class=\"ss-heat-ramp\"></i><span>" + escText(fmt(hi, spec.unit)) + "</span>";
    fig.appendChild(d);
  }

  var DRAW = {xy: drawXY, line: drawXY, bars: drawBars, bar: drawBars, heatmap: drawHeat};
  function drawAll() {
    document.querySelectorAll("figure.ss-plot").forEach(function (fig) {
      var node = fig.querySelector("script.ss-spec");
      if (!node || fig.getAttribute("data-drawn")) return;
      var spec = JSON.parse(node.textContent), fn = DRAW[spec.kind];
      if (!fn) { fig.appendChild(document.createTextNode("unknown chart kind " + spec.kind)); return; }
      fn(fig, spec);
      fig.setAttribute("data-drawn", "1");
    });
  }
  var resizeTimer = null;
  window.addEventListener("resize", function () {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(function () {
      document.querySelectorAll("figure.ss-plot[data-drawn]").forEach(function (fig) {
        var u = charts[fig.id];
        if (u) u.setSize({width: Math.max(320, fig.clientWidth), height: u.height});
      });
    }, 120);
  });
  /* draw a figure again from a new spec (serve's live pages append records): the old chart goes, a zoomed
     x range is kept */
  function redraw(fig, spec) {
    var old = charts[fig.id], zoom = null;
    if (old) {
      var reset = fig.querySelector(".ss-reset");
      if (reset && !reset.hidden) zoom = {min: old.scales.x.min, max: old.scales.x.max};
      old.destroy();
      delete charts[fig.id];
    }
    Array.prototype.slice.call(fig.children).forEach(function (c) {
      if (c.tagName !== "FIGCAPTION" && !(c.tagName === "SCRIPT" && c.classList.contains("ss-spec"))) fig.removeChild(c);
    });
    var fn = DRAW[spec.kind];
    if (!fn) return;
    fn(fig, spec);
    fig.setAttribute("data-drawn", "1");
    if (zoom && charts[fig.id]) charts[fig.id].setScale("x", zoom);
  }
  ss.drawAll = drawAll;
  ss.redraw = redraw;
  ss.fmt = fmt;
  ss.scaleFor = scaleFor;
})();
