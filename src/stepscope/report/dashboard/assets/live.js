/* stepscope serve: running runs, updated without a reload. The page holds a JSON element with id
   ss-live: {"run": ID or null, "poll_ms": N}. The runs list marks running runs and polls /live/status.json for their status; a running run's report
   shows a banner polled from /live/runs/ID.json (steps, rate, step times, stragglers, findings). */
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

  function get(url, done) {
    var xhr = new XMLHttpRequest();
    xhr.open("GET", url);
    xhr.timeout = 10000;
    xhr.onload = function () { if (xhr.status === 200) done(JSON.parse(xhr.responseText)); };
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

  var style = document.createElement("style");
  style.textContent = ".ss-running{color:#0a6bd6;font-weight:600}";
  document.head.appendChild(style);
  var list = document.getElementById("ss-runlist");
  if (list) {
    new MutationObserver(markRows).observe(list, { childList: true });
    markRows();
    pollStatus();
  }
  if (cfg.run) pollRun();
})();
