/* stepscope dashboard: compare two runs. The comparison is the `stepscope diff` HTML page: compare.html#A,B
   opens diffs/A--B.html where the site has it (every pair under `stepscope serve`). */
(function () {
  "use strict";
  var D = ssDash, MAX = 500;
  function compare(t, diffs) {
    var a = document.getElementById("cmp-a"), b = document.getElementById("cmp-b"), out = document.getElementById("ss-compare");
    var sel = document.getElementById("ss-name"), byId = {};
    for (var i = 0; i < t.n; i++) byId[t.cols.id[i]] = i;
    function option(i) {
      var c = D.get(t, "commit", i), label = t.cols.id[i] + " · " + D.get(t, "name", i) + " · " + D.date(t.cols.start[i]) + (c ? " · " + c.slice(0, 10) : "");
      [a, b].forEach(function (s) { s.appendChild(D.el("option", { value: t.cols.id[i] }, label)); });
    }
    /* the newest MAX runs of the chosen name (a select of 10,000 options is slow to build and to use) */
    function fill(name, extra) {
      [a, b].forEach(function (s) { s.textContent = ""; });
      var shown = 0;
      (extra || []).forEach(option);
      for (var i = 0; i < t.n && shown < MAX; i++) {
        if ((name && D.get(t, "name", i) !== name) || (extra || []).indexOf(i) >= 0) continue;
        shown++;
        option(i);
      }
      if (a.options.length > 1) { a.selectedIndex = 1; b.selectedIndex = 0; }
    }
    function has(pair) { return diffs.live || diffs.pairs.indexOf(pair) >= 0; }
    function show(x, y) {
      out.textContent = "";
      if (!(x in byId) || !(y in byId)) return;
      var pair = x + "--" + y;
      if (has(pair)) { window.location.href = "diffs/" + pair + ".html"; return; }
      var p = out.appendChild(D.el("p", { id: "cmp-missing" }, "This static site has no diff page for " + x + " and " + y +
        " (it holds the diffs of the runs around each detected step, listed below). Open it live with `stepscope serve`, or write it with: "));
      p.appendChild(D.el("code", { id: "cmp-cmd" }, "stepscope diff " + x + " " + y + " --html"));
    }
    fill(sel ? sel.value : "");
    D.onName(function (name) { fill(name); });
    document.getElementById("cmp-go").addEventListener("click", function () { show(a.value, b.value); });
    var h = window.location.hash.slice(1).split(",");
    if (h.length === 2) {
      if (h[0] in byId && h[1] in byId) { fill(sel ? sel.value : "", [byId[h[0]], byId[h[1]]]); a.value = h[0]; b.value = h[1]; show(h[0], h[1]); }
      else out.appendChild(D.el("p", { id: "cmp-missing" }, "no such runs in this site"));
    }
  }
  D.ready(function () {
    var t = D.data("ss-runs"), diffs = D.data("ss-diffs");
    if (t && document.getElementById("ss-compare")) { compare(t, diffs || { live: false, pairs: [] }); D.drawn(); }
  });
})();
