/* stepscope HTML base: sortable / filterable / tree tables, and start-up (charts: charts.js, drawn with the
   vendored uPlot). No network. */
(function () {
  "use strict";
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
  var ss = window.stepscope = window.stepscope || {};
  ss.initTables = initTables;
  function init() { if (ss.drawAll) ss.drawAll(); initTables(); }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init); else init();
})();
