/* stepscope serve: running runs, updated without a reload. The page holds a JSON element with id
   ss-live: {"run": ID or null, "poll_ms": N}. The runs list marks running runs and polls /live/status.json
   for their status; a running run's report shows a banner polled from /live/runs/ID.json (steps, rate, step
   times, stragglers, findings) and redraws its charts (step time, throughput, logged metrics) with the records
   polled from /live/runs/ID/records.json?after=STEP&metrics=ROWS (cli/liverecords.py), until the run ends. */
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
  function append(fig, xs, ys) {
    var spec = fig && specOf(fig);
    if (!spec || !xs.length || !window.stepscope || !window.stepscope.redraw) return;
    spec.x = spec.x.concat(xs);
    spec.series[0].y = spec.series[0].y.concat(ys);
    window.stepscope.redraw(fig, spec);
  }
  function applyRecords(d) {
    var st = d.steps, m = d.metrics;
    if (st.index.length) {
      append(ensureFigure("plot-step-time", "Step time", {title: "step"}, {title: "step time", unit: "ns"}, "step time"),
             st.index, st.duration_ns);
      append(ensureFigure("plot-throughput", "Throughput over time", {title: "time since the first step", unit: "s"},
                          {title: "throughput", unit: "samples/s"}, "samples per second"),
             st.t_s, st.samples.map(function (n, i) {
               var dur = st.duration_ns[i];
               return n !== null && dur !== null && dur > 0 ? n / (dur / 1e9) : null;
             }));
    }
    if (m.name.length) {
      var figs = metricFigures();
      figs.forEach(function (f) {
        var sp = specOf(f), byStep = /^plot-metric-step-/.test(f.id), xs = [], ys = [];
        if (!sp) return;
        m.name.forEach(function (name, i) {
          if (name !== sp.series[0].label) return;
          xs.push(byStep ? m.step[i] : m.t_s[i]); ys.push(m.value[i]);
        });
        append(f, xs, ys);
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
