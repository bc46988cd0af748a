/* stepscope dashboard, shared: JSON data from <script type="application/json"> elements, column tables,
   and the run-name selector. Every user string is set with textContent. */
var ssDash = (function () {
  "use strict";
  var fmt = (window.stepscope && window.stepscope.fmt) || function (v) { return String(v); };
  function data(id) { var e = document.getElementById(id); return e ? JSON.parse(e.textContent) : null; }
  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  /* a column table {n, cols, dict}: get(t, key, row) reads one cell, decoding dictionary columns */
  function get(t, k, i) { var c = t.cols[k][i], d = t.dict[k]; return d ? d[c] : c; }
  function labels(o) { return Object.keys(o || {}).sort().map(function (k) { return k + "=" + o[k]; }).join(" "); }
  function date(t) { return t ? new Date(t * 1000).toISOString().slice(0, 16).replace("T", " ") : ""; }
  function runHref(id, report, prefix) { return (prefix || "") + (report ? "runs/" + id + ".html" : "run.html#" + id); }
  /* the nav's run-name selector: on a history page it opens the same metric of the chosen name (or its first
     metric); elsewhere it relinks the metric links and tells the page (onName callbacks). */
  var nameHandlers = [];
  function onName(f) { nameHandlers.push(f); }
  function navInit() {
    var nav = data("ss-nav"), sel = document.getElementById("ss-name"), links = document.getElementById("ss-metric-links");
    var host = document.getElementById("ss-dash-nav");
    if (!nav || !sel || !host) return;
    var prefix = host.getAttribute("data-prefix") || "", hist = data("ss-history");
    function view(name) { for (var i = 0; i < nav.names.length; i++) if (nav.names[i].name === name) return nav.names[i]; return null; }
    sel.addEventListener("change", function () {
      var v = view(sel.value);
      if (!v) return;
      if (hist) {
        var target = v.metrics.filter(function (m) { return m[0] === hist.metric; })[0] || v.metrics[0];
        if (target) window.location.href = prefix + target[1];
        return;
      }
      links.textContent = "history: ";
      v.metrics.forEach(function (m) { links.appendChild(el("a", { href: prefix + m[1], "data-metric": m[0] }, m[2] || m[0])); links.appendChild(document.createTextNode(" ")); });
      if (!v.metrics.length) links.appendChild(document.createTextNode("(no tracked metric)"));
      nameHandlers.forEach(function (f) { f(v.name); });
    });
  }
  /* toggle buttons: exactly one of each group pressed (aria-pressed), the callback gets the pressed id */
  function toggles(ids, current, cb) {
    function press(id) {
      ids.forEach(function (x) { var b = document.getElementById(x); if (b) b.setAttribute("aria-pressed", String(x === id)); });
    }
    ids.forEach(function (id) {
      var b = document.getElementById(id);
      if (b) b.addEventListener("click", function () { press(id); cb(id); });
    });
    press(current);
  }
  /* the page's content is drawn: performance marks (benchmarks/dashboard.py reads their times from navigation
     start), set once: ss-drawn when the script has put it in the document, ss-painted after the next frame
     (the first one that can show it) */
  function drawn() {
    if (!window.performance || !performance.mark || performance.getEntriesByName("ss-drawn").length) return;
    performance.mark("ss-drawn");
    requestAnimationFrame(function () { setTimeout(function () { performance.mark("ss-painted"); }, 0); });
  }
  function ready(f) { if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", f); else f(); }
  ready(navInit);
  return { fmt: fmt, data: data, el: el, get: get, labels: labels, date: date, runHref: runHref, onName: onName,
           toggles: toggles, ready: ready, drawn: drawn };
})();
