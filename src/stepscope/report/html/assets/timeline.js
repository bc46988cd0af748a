/* stepscope timeline: draws each figure.ss-timeline from its embedded JSON (report/html/timeline.py) on a canvas.
   Rows: CPU threads (nesting lanes), then GPU streams. Wheel: zoom around the pointer; drag: pan; drag on the
   time axis: zoom to that range; double-click or "reset zoom": the whole window. The level drawn is the
   coarsest embedded one whose column is no wider than a pixel (else the finest). window.stepscope.timelines[id]
   exposes the view for tests: view() -> [start, end] in ns from the window start, level(), setView(a, b). */
(function () {
  "use strict";
  var ss = window.stepscope = window.stepscope || {};
  var timelines = ss.timelines = ss.timelines || {};
  var AXIS_H = 22, LABEL_W = 190, GPU_H = 18, LANE0_H = 14, LANE_H = 11, GAP = 3;
  var FONT = "11px system-ui, -apple-system, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif";

  function fmtNs(v) {
    if (ss.fmt) return ss.fmt(v, "ns");
    var a = Math.abs(v);
    if (a >= 1e9) return (v / 1e9).toPrecision(4) + " s";
    if (a >= 1e6) return (v / 1e6).toPrecision(4) + " ms";
    if (a >= 1e3) return (v / 1e3).toPrecision(4) + " µs";
    return Math.round(v) + " ns";
  }

  function undelta(d, at) {
    var out = new Float64Array(d.length);
    for (var r = 0; r + 1 < at.length; r++) {
      var acc = 0;
      for (var i = at[r]; i < at[r + 1]; i++) { acc += d[i]; out[i] = acc; }
    }
    return out;
  }

  function niceStep(raw) {
    var p = Math.pow(10, Math.floor(Math.log10(raw))), m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
  }

  function tickLabel(v, step, ref) {
    // the unit of the view's end (100.2 ms, not 100200 µs), as many decimals as the step needs
    var units = [[1e9, " s"], [1e6, " ms"], [1e3, " µs"], [1, " ns"]], u = units[units.length - 1];
    for (var i = 0; i < units.length; i++) if (ref >= units[i][0]) { u = units[i]; break; }
    var dec = Math.max(0, -Math.floor(Math.log10(step / u[0]) + 1e-9));
    return (v / u[0]).toFixed(dec) + u[1];
  }

  function Timeline(fig) {
    var spec = JSON.parse(fig.querySelector("script.ss-tl-data").textContent);
    var canvas = fig.querySelector("canvas"), tip = fig.querySelector(".ss-tl-tip");
    var wrap = fig.querySelector(".ss-tl-wrap"), range = fig.querySelector(".ss-tl-range");
    var crit = fig.querySelector(".ss-tl-crit input");
    var q = spec.q, span = spec.span;
    spec.levels.forEach(function (lv) {
      lv.xsAbs = undelta(lv.xs, lv.xAt);
      lv.rcAbs = undelta(lv.rc, lv.rAt);
      lv.w = lv.cols ? span / lv.cols : 0;
    });
    var rowY = [], rowH = [], y = AXIS_H + GAP;
    spec.rows.forEach(function (r) {
      var h = r.kind === "gpu" ? GPU_H : r.lane === 0 ? LANE0_H : LANE_H;
      if (r.kind === "gpu" && (rowY.length === 0 || spec.rows[rowY.length - 1].kind !== "gpu")) y += 8;
      rowY.push(y); rowH.push(h); y += h + (r.kind === "gpu" ? 3 : 1);
    });
    var height = y + GAP;
    var v0 = 0, v1 = span, levelAt = 0, drag = null, self = this;

    function plotW() { return Math.max(10, wrap.clientWidth - LABEL_W); }
    function nsPerPx() { return (v1 - v0) / plotW(); }
    function xOf(t) { return LABEL_W + (t - v0) / (v1 - v0) * plotW(); }
    function pickLevel() {
      var px = nsPerPx();
      for (var i = 0; i < spec.levels.length; i++) if (spec.levels[i].cols === 0 || spec.levels[i].w <= px) return i;
      return spec.levels.length - 1;
    }

    function draw() {
      var w = wrap.clientWidth;
      if (!w) return;  // in a hidden rank block: drawn when shown (the selector fires resize)
      var dpr = window.devicePixelRatio || 1;
      canvas.width = Math.round(w * dpr); canvas.height = Math.round(height * dpr);
      canvas.style.height = height + "px";
      var ctx = canvas.getContext("2d");
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      ctx.clearRect(0, 0, w, height);
      ctx.font = FONT;
      levelAt = pickLevel();
      var lv = spec.levels[levelAt], pw = plotW(), scale = pw / (v1 - v0), drawn = 0;
      ctx.save();
      ctx.beginPath(); ctx.rect(LABEL_W, 0, pw, height); ctx.clip();
      for (var r = 0; r < spec.rows.length; r++) {
        var top = rowY[r], h = rowH[r];
        ctx.fillStyle = r % 2 ? "#f7fafc" : "#ffffff";
        ctx.fillRect(LABEL_W, top, pw, h);
        for (var i = lv.rAt[r]; i < lv.rAt[r + 1]; i++) {  // merged runs: faint by their busy share
          var a = lv.rcAbs[i] * lv.w, b = a + lv.rl[i] * lv.w;
          if (b < v0 || a > v1) continue;
          ctx.globalAlpha = 0.25 + 0.075 * lv.rb[i];
          ctx.fillStyle = spec.colors[lv.rk[i]];
          var x0 = LABEL_W + (a - v0) * scale;
          ctx.fillRect(x0, top, Math.max(1, (b - a) * scale), h);
          drawn++;
        }
        ctx.globalAlpha = 1;
        for (i = lv.xAt[r]; i < lv.xAt[r + 1]; i++) {
          var s = lv.xsAbs[i] * q, e = s + lv.xd[i];
          if (e < v0 || s > v1) continue;
          ctx.fillStyle = spec.colors[lv.xk[i]];
          var xs = LABEL_W + (s - v0) * scale, ww = Math.max(1, (e - s) * scale);
          ctx.fillRect(xs, top, ww, h);
          if (ww > 40) {
            ctx.fillStyle = lv.xk[i] < spec.components ? "#fff" : "#1a202c";  // host colours are light
            ctx.fillText(spec.names[lv.xn[i]].slice(0, Math.floor(ww / 6)), Math.max(xs, LABEL_W) + 2, top + h - 3);
          }
          drawn++;
        }
      }
      if (spec.critical && (!crit || crit.checked)) {
        ctx.fillStyle = "#c53030";  // a red band along the top of each path item: its colours stay visible
        var c = spec.critical;
        for (var k = 0; k < c.row.length; k++) {
          var cs = c.s[k] * q, ce = cs + c.d[k];
          if (ce < v0 || cs > v1) continue;
          ctx.fillRect(LABEL_W + (cs - v0) * scale, rowY[c.row[k]] - 1, Math.max(2, (ce - cs) * scale), 3);
        }
      }
      ctx.restore();
      // labels
      ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, LABEL_W, height);
      for (r = 0; r < spec.rows.length; r++) {
        var row = spec.rows[r];
        ctx.fillStyle = row.lane === 0 ? "#2d3748" : "#a0aec0";
        ctx.fillText(row.label, 4, rowY[r] + rowH[r] - 3);
      }
      // time axis
      ctx.fillStyle = "#fff"; ctx.fillRect(LABEL_W, 0, pw, AXIS_H);
      var step = niceStep((v1 - v0) / Math.max(2, pw / 110)), t = Math.ceil(v0 / step) * step;
      ctx.fillStyle = "#4a5568"; ctx.strokeStyle = "#cbd5e0"; ctx.lineWidth = 1;
      for (; t <= v1; t += step) {
        var x = Math.round(LABEL_W + (t - v0) * scale) + 0.5;
        ctx.beginPath(); ctx.moveTo(x, AXIS_H - 5); ctx.lineTo(x, height); ctx.stroke();
        ctx.fillText(tickLabel(t, step, v1), x + 2, AXIS_H - 8);
      }
      if (drag && drag.axis) {
        ctx.fillStyle = "rgba(66,153,225,0.25)";
        var d0 = Math.min(drag.x0, drag.x), d1 = Math.max(drag.x0, drag.x);
        ctx.fillRect(d0, 0, d1 - d0, height);
      }
      range.textContent = "showing " + fmtNs(v0) + " – " + fmtNs(v1) + " of " + fmtNs(span) +
        (levelAt === spec.levels.length - 1 && !spec.complete && lv.w > nsPerPx() ? " (finest embedded level)" : "");
      fig.setAttribute("data-drawn", "1");
      fig.setAttribute("data-items", String(drawn));
    }

    function setView(a, b) {
      var minSpan = Math.min(span, 1000);
      if (b - a < minSpan) { var m = (a + b) / 2; a = m - minSpan / 2; b = m + minSpan / 2; }
      if (b - a > span) { a = 0; b = span; }
      if (a < 0) { b -= a; a = 0; }
      if (b > span) { a -= b - span; b = span; }
      v0 = Math.max(0, a); v1 = Math.min(span, b);
      draw();
    }

    function pos(ev) {
      var rect = canvas.getBoundingClientRect();
      return {x: ev.clientX - rect.left, y: ev.clientY - rect.top};
    }

    function rowAt(yy) {
      for (var r = 0; r < rowY.length; r++) if (yy >= rowY[r] && yy < rowY[r] + rowH[r]) return r;
      return -1;
    }

    function hit(p) {
      var r = rowAt(p.y);
      if (r < 0 || p.x < LABEL_W) return null;
      var lv = spec.levels[levelAt], t = v0 + (p.x - LABEL_W) * nsPerPx(), tol = nsPerPx(), best = null;
      for (var i = lv.xAt[r]; i < lv.xAt[r + 1]; i++) {
        var s = lv.xsAbs[i] * q, e = s + lv.xd[i];
        if (s - tol <= t && t <= e + tol && (!best || Math.abs((s + e) / 2 - t) < best.dist))
          best = {dist: Math.abs((s + e) / 2 - t), text: spec.names[lv.xn[i]] + "\n" + spec.styles[lv.xk[i]] +
            " · " + fmtNs(lv.xd[i]) + "\n" + spec.rows[r].label + " · starts at " + fmtNs(s)};
      }
      if (best) return best.text;
      for (i = lv.rAt[r]; i < lv.rAt[r + 1]; i++) {
        var a = lv.rcAbs[i] * lv.w, b = a + lv.rl[i] * lv.w;
        if (a - tol <= t && t <= b + tol)
          return lv.rn[i] + " events merged (each shorter than " + fmtNs(lv.w) + "), " + (lv.rb[i] * 10) +
            "% busy, mostly " + spec.styles[lv.rk[i]] + "\n" + spec.rows[r].label + " · " + fmtNs(a) + " – " +
            fmtNs(b) + "\nzoom in to see them one by one";
      }
      return null;
    }

    canvas.addEventListener("wheel", function (ev) {
      ev.preventDefault();
      var p = pos(ev);
      if (p.x < LABEL_W) return;
      var t = v0 + (p.x - LABEL_W) * nsPerPx(), f = Math.exp(Math.max(-1, Math.min(1, ev.deltaY * 0.002)));
      setView(t - (t - v0) * f, t + (v1 - t) * f);
    }, {passive: false});
    canvas.addEventListener("mousedown", function (ev) {
      var p = pos(ev);
      if (p.x < LABEL_W) return;
      drag = {x0: p.x, x: p.x, v0: v0, v1: v1, axis: p.y < AXIS_H};
      ev.preventDefault();
    });
    window.addEventListener("mousemove", function (ev) {
      var p = pos(ev);
      if (drag) {
        drag.x = p.x;
        if (drag.axis) draw();
        else {
          var dt = (p.x - drag.x0) * (drag.v1 - drag.v0) / plotW();
          setView(drag.v0 - dt, drag.v1 - dt);
        }
        tip.hidden = true;
        return;
      }
      if (ev.target !== canvas) { tip.hidden = true; return; }
      var text = hit(p);
      if (!text) { tip.hidden = true; return; }
      tip.textContent = text;
      tip.hidden = false;
      tip.style.left = Math.min(p.x + 12, wrap.clientWidth - 300) + "px";
      tip.style.top = (p.y + 14) + "px";
    });
    window.addEventListener("mouseup", function () {
      if (!drag) return;
      var d = drag;
      drag = null;
      if (d.axis && Math.abs(d.x - d.x0) > 3) {
        var k = (d.v1 - d.v0) / plotW();
        var a = d.v0 + (Math.min(d.x0, d.x) - LABEL_W) * k, b = d.v0 + (Math.max(d.x0, d.x) - LABEL_W) * k;
        setView(a, b);
      } else draw();
    });
    canvas.addEventListener("dblclick", function () { setView(0, span); });
    fig.querySelector(".ss-tl-reset").addEventListener("click", function () { setView(0, span); });
    if (crit) crit.addEventListener("change", draw);
    window.addEventListener("resize", draw);
    self.view = function () { return [v0, v1]; };
    self.level = function () { return levelAt; };
    self.setView = setView;
    self.hit = function (x, yy) { return hit({x: x, y: yy}); };
    self.rowY = function (r) { return rowY[r] + rowH[r] / 2; };
    self.labelWidth = LABEL_W;
    self.spec = spec;
    draw();
  }

  function drawAll() {
    document.querySelectorAll("figure.ss-timeline").forEach(function (fig) {
      if (!timelines[fig.id]) timelines[fig.id] = new Timeline(fig);
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", drawAll);
  else drawAll();
})();
