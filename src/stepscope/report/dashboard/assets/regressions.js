/* stepscope dashboard: the regressions page; the run-name selector filters its rows ("all" by default). */
(function () {
  "use strict";
  var D = ssDash;
  D.ready(function () {
    var sel = document.getElementById("ss-name");
    if (sel) {
      var all = D.el("option", { value: "" }, "all run names");
      sel.insertBefore(all, sel.firstChild);
      sel.value = "";
    }
    D.onName(function (name) {
      document.querySelectorAll("tr[data-name]").forEach(function (tr) {
        tr.style.display = !name || tr.getAttribute("data-name") === name ? "" : "none";
      });
    });
    if (sel) sel.addEventListener("change", function () {
      if (!sel.value) document.querySelectorAll("tr[data-name]").forEach(function (tr) { tr.style.display = ""; });
    });
    D.drawn();
  });
})();
