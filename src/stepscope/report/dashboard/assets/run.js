/* stepscope dashboard: a run's index record (runs without a full report page), run.html#ID. */
(function () {
  "use strict";
  var D = ssDash;
  function runPage(t) {
    var out = document.getElementById("ss-run"), id = decodeURIComponent(window.location.hash.slice(1)), i = t.cols.id.indexOf(id);
    out.textContent = "";
    if (i < 0) { out.appendChild(D.el("p", {}, "no such run in this site")); return; }
    function c(k) { return D.get(t, k, i); }
    out.appendChild(D.el("h3", { id: "run-name" }, c("name") + " (" + id + ")"));
    var tb = D.el("table", { "class": "ss-kv" });
    [["status", c("status")], ["started (UTC)", D.date(t.cols.start[i])], ["commit", (c("commit") || "(no commit)") + (t.cols.dirty[i] ? " +dirty" : "")],
      ["branch", c("branch") || ""], ["subject", c("subject") || ""], ["params", D.labels(c("params"))], ["tags", D.labels(c("tags"))],
      ["group", c("group") || ""], ["host", c("host") || ""]].forEach(function (kv) {
      var tr = tb.appendChild(D.el("tr")); tr.appendChild(D.el("th", {}, kv[0])); tr.appendChild(D.el("td", {}, kv[1]));
    });
    Object.keys(t.metrics).sort().forEach(function (m) {
      var v = t.metrics[m][i];
      if (v === null) return;
      var tr = tb.appendChild(D.el("tr")); tr.appendChild(D.el("th", {}, m)); tr.appendChild(D.el("td", {}, D.fmt(v, t.units[m])));
    });
    out.appendChild(tb);
  }
  D.ready(function () {
    var t = D.data("ss-runs");
    if (t && document.getElementById("ss-run")) { runPage(t); D.drawn(); window.addEventListener("hashchange", function () { runPage(t); }); }
  });
})();
