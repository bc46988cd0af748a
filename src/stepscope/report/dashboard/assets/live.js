/* stepscope serve: running runs, updated without a reload. The page holds a JSON element with id
   ss-live: {"run": ID or null, "poll_ms": N}. The runs list marks running runs and polls /live/status.json
   for their status; a running run's report shows a banner polled from /live/runs/ID.json (steps, rate, step
   times, stragglers, findings) and redraws its charts (step time, stacked phases, throughput, logged metrics)
   with the records polled from /live/runs/ID/records.json?after=STEP&metrics=ROWS (cli/liverecords.py), until
   the run ends. The throughput's rolling-median window follows the run's length as the server gives it, so the
   page draws the median a report rendered after the run would. */
(function () {
  "use strict";
  var cfgEl = document.getElementById("ss-live");
  if (!cfgEl) return;
  var cfg = JSON.parse(cfgEl.textContent);
  var statuses = {};

  function ms(ns) {
    if (ns === null || ns === undefined) return "—";
    if (ns >= 1e9) return (ns / 1e9).toFixed(2) + " s";
    return (ns / 1e6).toFixed(2) + " ms";
  }

  function markRows() {
    var rows = document.querySelectorAll("tr[data-run]");
    for (var i = 0; i < rows.length; i++) {
      var id = rows[i].getAttribute("data-run"), cell = rows[i].children[2];
      if (!cell) continue;
      var st = statuses[id] || cell.getAttribute("data-status") || cell.textContent.replace(/^● /, "");
      cell.setAttribute("data-status", st);
      var text = st === "running" ? "● running" : st;
      if (cell.textContent !== text) cell.textContent = text;
      cell.className = "text" + (st === "running" ? " ss-running" : "");
    }
  }

  function get(url, done, fail) {
    var xhr = new XMLHttpRequest();
    xhr.open("GET", url);
    xhr.timeout = 10000;
    xhr.onload = function () {
      if (xhr.status === 200) done(JSON.parse(xhr.responseText));
      else if (fail && xhr.status >= 500) fail();  /* busy or a failed read: ask again later */
    };
    if (fail) { xhr.onerror = fail; xhr.ontimeout = fail; }
    xhr.send();
  }

  function pollStatus() {
    get("/live/status.json", function (doc) {
      statuses = doc.runs || {};
      markRows();
      var running = Object.keys(statuses).filter(function (k) { return statuses[k] === "running"; });
      if (running.length) setTimeout(pollStatus, cfg.poll_ms);
    });
  }

  function banner() {
    var b = document.getElementById("ss-live-banner");
    if (!b) {
      b = document.createElement("div");
      b.id = "ss-live-banner";
      b.setAttribute("role", "status");
      b.style.cssText = "position:sticky;top:0;z-index:20;background:#e8f4ff;border-bottom:1px solid #8bb8e8;" +
        "padding:6px 12px;font:13px system-ui,sans-serif";
      document.body.insertBefore(b, document.body.firstChild);
    }
    return b;
  }

  function pollRun() {
    get("/live/runs/" + encodeURIComponent(cfg.run) + ".json", function (d) {
      var b = banner(), parts;
      if (d.status !== "running") {
        b.textContent = "finished: " + d.status + " after " + d.steps + " steps — reload for the final report";
        return;
      }
      parts = ["● running", d.steps + " steps",
        (d.recent_steps_per_s === null ? "—" : d.recent_steps_per_s.toFixed(2)) + " steps/s",
        "last step " + ms(d.last_step_ns), "median of last " + d.recent_steps + " " + ms(d.recent_step_median_ns)];
      if (d.stragglers.length) parts.push("straggler: " + d.stragglers.map(function (s) {
        return "rank " + s.rank + " (" + s.why + ")"; }).join(", "));
      if (d.findings.length) parts.push("advice: " + d.findings.join("; "));
      parts.push("updated " + new Date().toLocaleTimeString());
      b.textContent = parts.join(" · ");
      setTimeout(pollRun, cfg.poll_ms);
    });
  }

  /* ---- the charts of a running run: each poll's records appended to the figures' specs, redrawn ---- */
  function specOf(fig) {
    if (!fig.ssSpec) {
      var node = fig.querySelector("script.ss-spec");
      fig.ssSpec = node ? JSON.parse(node.textContent) : null;
    }
    return fig.ssSpec;
  }
  function metricFigures() {
    return Array.prototype.slice.call(document.querySelectorAll("figure.ss-plot[id^='plot-metric-']"));
  }
  /* the cursor of what the page holds: its last step index, and its metric rows (one per point by step) */
  function pageCursor() {
    var fig = document.getElementById("plot-step-time"), spec = fig && specOf(fig), after = -1, rows = 0;
    (spec ? spec.x : []).forEach(function (v) { if (v !== null && v > after) after = Math.floor(v); });
    metricFigures().forEach(function (f) {
      var sp = specOf(f);
      if (sp && /^plot-metric-step-/.test(f.id)) rows += sp.series[0].y.length * (sp.binned || 1);
    });
    return {after: after, metrics: rows};
  }
  /* a figure the page was rendered without (no step yet): made here, in the Speed section */
  function ensureFigure(id, title, xAxis, yAxis, label) {
    var fig = document.getElementById(id), speed = document.getElementById("speed");
    if (fig || !speed) return fig;
    Array.prototype.slice.call(speed.querySelectorAll("p")).forEach(function (p) {
      if (/^No steps were recorded/.test(p.textContent)) p.parentNode.removeChild(p);
    });
    fig = document.createElement("figure");
    fig.className = "ss-plot"; fig.id = id; fig.setAttribute("data-kind", "xy");
    var cap = document.createElement("figcaption"); cap.textContent = title; fig.appendChild(cap);
    fig.ssSpec = {kind: "xy", x: [], xAxis: xAxis, yAxis: yAxis, stacked: false, height: 260, binned: 1,
                  shades: [], rules: [], series: [{label: label, y: [], smooth: 0}]};
    speed.appendChild(fig);
    return fig;
  }
  /* a metric the page was rendered without (logged after it was rendered): its two figures, by step and over
     time, in the User metrics section, numbered as metrics_section numbers them (in the order first logged) */
  function ensureMetricFigures(name) {
    var section = document.getElementById("metrics"), figs = metricFigures();
    if (!section || figs.some(function (f) { var sp = specOf(f); return sp && sp.series[0].label === name; })) return;
    Array.prototype.slice.call(section.querySelectorAll("p")).forEach(function (p) {
      if (/^No metric was logged/.test(p.textContent)) p.parentNode.removeChild(p);
    });
    var grid = section.querySelector(".ss-grid2");
    if (!grid) { grid = document.createElement("div"); grid.className = "ss-grid2"; section.appendChild(grid); }
    var code = figs.filter(function (f) { return /^plot-metric-step-/.test(f.id); }).length;
    [["step", name + " by step", {title: "step"}], ["time", name + " over time", {title: "time since the run started", unit: "s"}]]
      .forEach(function (k) {
        var fig = document.createElement("figure"), cap = document.createElement("figcaption"), cell = document.createElement("div");
        fig.className = "ss-plot"; fig.id = "plot-metric-" + k[0] + "-" + code; fig.setAttribute("data-kind", "xy");
        cap.textContent = k[1]; fig.appendChild(cap);
        fig.ssSpec = {kind: "xy", x: [], xAxis: k[2], yAxis: {title: name}, stacked: false, height: 200, binned: 1,
                      shades: [], rules: [], series: [{label: name, y: [], smooth: 0}]};
        cell.appendChild(fig); grid.appendChild(cell);
      });
  }
  /* xs appended to a figure's x and ys[k] to its series k (ys: one array per series), redrawn */
  function append(fig, xs, ys, smooth) {
    var spec = fig && specOf(fig);
    if (!spec || !window.stepscope || !window.stepscope.redraw) return;
    var resmooth = smooth !== undefined && spec.series[0].smooth !== smooth;
    if (!xs.length && !resmooth) return;
    spec.x = spec.x.concat(xs);
    spec.series.forEach(function (s, k) { s.y = s.y.concat(ys[k]); });
    if (smooth !== undefined) spec.series[0].smooth = smooth;
    window.stepscope.redraw(fig, spec);
  }
  /* the rolling-median window, in the figure's points, for the server's window in steps (charts.py xy_chart
     scales it to a binned series) */
  function windowOf(fig, steps) {
    var spec = fig && specOf(fig), binned = (spec && spec.binned) || 1;
    if (!(steps > 1)) return 0;
    return binned > 1 ? Math.max(3, Math.floor(steps / binned) | 1) : steps;
  }
  var PHASES = ["data_wait", "forward", "backward", "optimizer", "comm"];
  /* the stacked phases chart: each measured phase's time per step, and "other" (the step less the phases
     drawn, never below 0), as run_report.speed_section stacks them */
  function appendPhases(st) {
    var fig = document.getElementById("plot-phases");
    if (!fig) {
      var shown = PHASES.filter(function (p) {
        return (st.phases[p] || []).some(function (v) { return v !== null; });
      });
      if (!shown.length || !document.getElementById("speed")) return;
      fig = ensureFigure("plot-phases", "Step time by phase (stacked)", {title: "step"},
                         {title: "time per step", unit: "ns"}, "other");
      var spec = specOf(fig);
      spec.stacked = true;
      spec.series = shown.map(function (p) { return {label: p.replace(/_/g, " "), y: [], smooth: 0}; })
                         .concat(spec.series);
      var step = document.getElementById("plot-step-time");
      if (step && step.nextSibling !== fig) step.parentNode.insertBefore(fig, step.nextSibling);
    }
    var sp = specOf(fig);
    if (!sp) return;
    var keys = sp.series.map(function (s) { return s.label === "other" ? null : s.label.replace(/ /g, "_"); });
    var ys = keys.map(function (key) {
      if (key !== null) return st.index.map(function (_, i) { var v = (st.phases[key] || [])[i]; return v === undefined ? null : v; });
      return st.index.map(function (_, i) {
        var measured = 0;
        keys.forEach(function (k2) { var v = k2 !== null ? (st.phases[k2] || [])[i] : null; if (v !== null && v !== undefined) measured += v; });
        return Math.max(0, st.duration_ns[i] - measured);
      });
    });
    append(fig, st.index, ys);
  }
  function applyRecords(d) {
    var st = d.steps, m = d.metrics;
    if (st.index.length) {
      append(ensureFigure("plot-step-time", "Step time", {title: "step"}, {title: "step time", unit: "ns"}, "step time"),
             st.index, [st.duration_ns]);
      if (st.phases) appendPhases(st);
    }
    var tput = st.index.length ? ensureFigure("plot-throughput", "Throughput over time (rolling median, raw steps faint)",
                                              {title: "time since the first step", unit: "s"},
                                              {title: "throughput", unit: "samples/s"}, "samples per second")
                               : document.getElementById("plot-throughput");
    if (tput) {
      append(tput, st.t_s, [st.samples.map(function (n, i) {
        var dur = st.duration_ns[i];
        return n !== null && dur !== null && dur > 0 ? n / (dur / 1e9) : null;
      })], st.window === undefined ? undefined : windowOf(tput, st.window));
    }
    if (m.name.length) {
      m.name.forEach(ensureMetricFigures);
      var figs = metricFigures();
      figs.forEach(function (f) {
        var sp = specOf(f), byStep = /^plot-metric-step-/.test(f.id), xs = [], ys = [];
        if (!sp) return;
        m.name.forEach(function (name, i) {
          if (name !== sp.series[0].label) return;
          xs.push(byStep ? m.step[i] : m.t_s[i]); ys.push(m.value[i]);
        });
        append(f, xs, [ys]);
      });
    }
  }
  function pollRecords(cursor) {
    var url = "/live/runs/" + encodeURIComponent(cfg.run) + "/records.json?after=" + cursor.after +
              "&metrics=" + cursor.metrics;
    get(url, function (d) {
      applyRecords(d);
      var next = {after: d.steps.next, metrics: d.metrics.next};
      if (d.status === "running" || d.more) setTimeout(function () { pollRecords(next); }, cfg.poll_ms);
    }, function () { setTimeout(function () { pollRecords(cursor); }, cfg.poll_ms); });
  }

  var style = document.createElement("style");
  style.textContent = ".ss-running{color:#0a6bd6;font-weight:600}";
  document.head.appendChild(style);
  var list = document.getElementById("ss-runlist");
  if (list) {
    new MutationObserver(markRows).observe(list, { childList: true });
    markRows();
    pollStatus();
  }
  if (cfg.run) {
    pollRun();
    pollRecords(pageCursor());
  }
})();
