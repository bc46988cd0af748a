/* stepscope dashboard: the runs list. The runs come as one column table; filtering and sorting work on
   an index array, and only the rows of the current page are drawn. */
(function () {
  "use strict";
  var D = ssDash, PAGE = 100;
  function hasLabel(o, q) {
    if (!q) return true;
    var p = q.split("="), k = p[0].trim(), v = p.length > 1 ? p.slice(1).join("=").trim() : null;
    return Object.prototype.hasOwnProperty.call(o || {}, k) && (v === null || String(o[k]) === v);
  }
  function runsList(t) {
    var host = document.getElementById("ss-runlist"), pager = document.getElementById("ss-pager");
    var state = { key: "start", dir: -1, page: 0 }, rows = [];
    var cols = [["name", "name"], ["id", "run"], ["status", "status"], ["start", "started (UTC)"],
      ["branch", "branch"], ["commit", "commit"], ["subject", "subject"], ["labels", "params / tags"],
      ["step", "step time"], ["thr", "throughput [samples/s]"]];
    var f = {};
    ["f-name", "f-text", "f-branch", "f-status", "f-tag", "f-param"].forEach(function (id) {
      f[id] = document.getElementById(id);
      f[id].addEventListener("input", function () { state.page = 0; filter(); });
    });
    D.onName(function (name) { f["f-name"].value = name; state.page = 0; filter(); });
    var C = t.cols, dict = t.dict;
    function cell(k, i) { return D.get(t, k, i); }
    function match(i) {
      var q = f["f-text"].value.toLowerCase();
      if (f["f-name"].value && cell("name", i) !== f["f-name"].value) return false;
      if (q && (cell("name", i) + " " + C.id[i] + " " + (cell("subject", i) || "") + " " + (cell("commit", i) || "")).toLowerCase().indexOf(q) < 0) return false;
      if (f["f-branch"].value && (cell("branch", i) || "") !== f["f-branch"].value) return false;
      if (f["f-status"].value && cell("status", i) !== f["f-status"].value) return false;
      return hasLabel(cell("tags", i), f["f-tag"].value) && hasLabel(cell("params", i), f["f-param"].value);
    }
    function key(k, i) {
      if (k === "labels") return D.labels(cell("params", i));
      return dict[k] ? dict[k][C[k][i]] : C[k][i];
    }
    function filter() {
      rows = [];
      for (var i = 0; i < t.n; i++) if (match(i)) rows.push(i);
      sort();
    }
    function sort() {
      var k = state.key, dir = state.dir, vals = new Array(t.n);
      rows.forEach(function (i) { vals[i] = key(k, i); });
      rows.sort(function (a, b) {
        var x = vals[a], y = vals[b];
        if (x === y) return a - b; if (x === null || x === undefined) return 1; if (y === null || y === undefined) return -1;
        return (x < y ? -1 : 1) * dir;
      });
      draw();
    }
    function draw() {
      var pages = Math.max(1, Math.ceil(rows.length / PAGE));
      state.page = Math.min(state.page, pages - 1);
      var table = D.el("table", { "class": "ss-table", id: "ss-runs-table" }), head = D.el("tr");
      cols.forEach(function (c) {
        var th = D.el("th", { "class": "text", "data-key": c[0] }, c[1]);
        if (state.key === c[0]) th.setAttribute("aria-sort", state.dir > 0 ? "ascending" : "descending");
        th.style.cursor = "pointer";
        th.addEventListener("click", function () { state.dir = state.key === c[0] ? -state.dir : 1; state.key = c[0]; state.page = 0; sort(); });
        head.appendChild(th);
      });
      table.appendChild(D.el("thead")).appendChild(head);
      var body = D.el("tbody");
      rows.slice(state.page * PAGE, (state.page + 1) * PAGE).forEach(function (i) {
        var id = C.id[i], tr = D.el("tr", { "data-run": id }), commit = cell("commit", i);
        tr.appendChild(D.el("td", { "class": "text" })).appendChild(D.el("a", { href: D.runHref(id, C.report[i]) }, cell("name", i)));
        tr.appendChild(D.el("td", { "class": "text mono" }, id));
        tr.appendChild(D.el("td", { "class": "text", "data-status": cell("status", i) }, cell("status", i)));
        tr.appendChild(D.el("td", { "class": "text ss-nowrap" }, D.date(C.start[i])));
        tr.appendChild(D.el("td", { "class": "text" }, cell("branch", i) || ""));
        tr.appendChild(D.el("td", { "class": "text mono" }, (commit ? commit.slice(0, 10) : "") + (C.dirty[i] ? "+dirty" : "")));
        tr.appendChild(D.el("td", { "class": "text" }, cell("subject", i) || ""));
        tr.appendChild(D.el("td", { "class": "text" }, (D.labels(cell("params", i)) + " " + D.labels(cell("tags", i))).trim()));
        tr.appendChild(D.el("td", {}, C.step[i] === null ? "—" : D.fmt(C.step[i], "s")));
        tr.appendChild(D.el("td", {}, C.thr[i] === null ? "—" : D.fmt(C.thr[i], "")));
        body.appendChild(tr);
      });
      table.appendChild(body);
      host.textContent = "";
      var first = rows.length ? state.page * PAGE + 1 : 0, last = Math.min(rows.length, (state.page + 1) * PAGE);
      host.appendChild(D.el("p", { "class": "ss-note", id: "ss-count" },
        rows.length + " of " + t.n + " runs" + (rows.length > PAGE ? " (rows " + first + "–" + last + ")" : "")));
      var wrap = D.el("div", { "class": "ss-table-wrap" });
      wrap.appendChild(table);
      host.appendChild(wrap);
      pager.textContent = "";
      if (pages > 1) {
        [["ss-first", "« first", 0], ["ss-prev", "‹ previous", state.page - 1], ["ss-next", "next ›", state.page + 1],
          ["ss-last", "last »", pages - 1]].forEach(function (b) {
          var btn = D.el("button", { "class": "ss-btn", id: b[0] }, b[1]);
          if (b[2] < 0 || b[2] >= pages || b[2] === state.page) btn.disabled = true;
          btn.addEventListener("click", function () { state.page = b[2]; draw(); });
          pager.appendChild(btn);
        });
        pager.appendChild(D.el("span", { id: "ss-page" }, "page " + (state.page + 1) + " of " + pages));
      }
    }
    filter();
    D.drawn();
  }
  D.ready(function () { var t = D.data("ss-runs"); if (t && document.getElementById("ss-runlist")) runsList(t); });
})();
