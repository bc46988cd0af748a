/* stepscope dashboard: one metric's history across commits. The charts are the chart module's (charts.js,
   uPlot): the page holds one <template> per view (x: commit date or commit order; y: relative or absolute);
   a toggle puts that view's figure in #ss-chart and has the chart module draw it. This script only adds what
   a history needs on top: which commit the cursor is on (subject, runs) and a click that opens its run. */
(function () {
  "use strict";
  var D = ssDash;
  function history(h) {
    var host = document.getElementById("ss-chart"), info = document.getElementById("ss-point-info");
    var P = h.points, C = P.cols, hasRel = !!document.querySelector('template[data-view="date-rel"]');
    var mode = { x: "date", y: hasRel ? "rel" : "abs" };
    function describe(i) {
      var commit = C.commit[i], sub = D.get(P, "subject", i);
      return (commit ? commit.slice(0, 10) : "(no commit)") + (C.dirty[i] ? " (dirty tree)" : "") + (sub ? " · " + sub : "") +
        " · " + D.date(C.t[i]) + " UTC · " + C.n[i] + " run(s), median " + D.fmt(C.v[i], h.unit) + " [" + D.fmt(C.lo[i], h.unit) +
        " – " + D.fmt(C.hi[i], h.unit) + "] · click opens run " + C.run[i];
    }
    function wire(fig) {
      var u = window.stepscope && window.stepscope.charts ? window.stepscope.charts[fig.id] : null;
      if (!u) return;
      var down = null;
      u.over.addEventListener("mousedown", function (ev) { down = [ev.clientX, ev.clientY]; });
      u.over.addEventListener("mousemove", function () {
        var i = u.cursor.idx;
        if (i !== null && i !== undefined) info.textContent = describe(i);
      });
      u.over.addEventListener("click", function (ev) {
        var i = u.cursor.idx;
        if (down && Math.abs(ev.clientX - down[0]) + Math.abs(ev.clientY - down[1]) > 4) return; /* a drag zooms */
        if (i !== null && i !== undefined) window.location.href = D.runHref(C.run[i], C.report[i], "../");
      });
    }
    function draw() {
      var t = document.querySelector('template[data-view="' + mode.x + "-" + mode.y + '"]');
      host.textContent = "";
      if (!t) { host.appendChild(D.el("p", {}, "no points")); return; }
      host.appendChild(t.content.cloneNode(true));
      if (window.stepscope && window.stepscope.drawAll) window.stepscope.drawAll();
      var fig = host.querySelector("figure.ss-plot");
      if (fig) wire(fig);
    }
    D.toggles(["x-date", "x-commit"], "x-date", function (id) { mode.x = id === "x-date" ? "date" : "commit"; draw(); });
    D.toggles(["y-rel", "y-abs"], mode.y === "rel" ? "y-rel" : "y-abs", function (id) {
      mode.y = id === "y-rel" && hasRel ? "rel" : "abs"; draw();
    });
    draw();
    D.drawn();
  }
  D.ready(function () { var h = D.data("ss-history"); if (h) history(h); });
})();
