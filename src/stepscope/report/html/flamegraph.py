"""Flame graph section of the HTML report, from sampled Python stacks (analyze/run/hostprof.py).

Drawn server-side as nested, absolutely positioned blocks (an icicle: root on top): width = share of
samples, hover shows the function, its samples and share. Each block carries its position (``data-x``,
``data-w``: fractions of all samples; ``data-d``: depth), so the inlined script (FLAME_JS) can zoom:
click a frame to widen it to the full width (its ancestors stay above it, full width; a click on one of
them zooms out to it), "reset" shows the whole graph again; the search box highlights the frames whose
name contains the text. Frames narrower than MIN_SHARE are left out (their samples stay in the parent's
width). One block per rank with stack samples, behind the report's rank selector, each with a button that
saves its collapsed stacks (embedded as JSON) and the export command for all ranks and workers.

Call it as ``flamegraph_section(data)`` (RunData) or ``flamegraph_html(stacks)`` with collapsed stacks.
"""

from __future__ import annotations

from typing import Any

from stepscope.analyze.run.hostprof import NO_REGION, collapsed, host_profile, stack_rows
from stepscope.model.tables import RunData
from stepscope.report.html.escape import esc, json_script
from stepscope.report.html.gpu_sections import per_rank
from stepscope.report.html.page import Section, notice, paragraph

MIN_SHARE = 0.001
MAX_DEPTH = 48
MAX_BLOCKS = 2000
"""Blocks drawn at most per graph (the widest first; about 250 bytes each), so the page stays small."""
MAX_EMBEDDED_EXPORT = 250_000
"""The collapsed stacks are embedded (with a download button) when their text is at most this long."""
ROW_PX = 18
CSS = (".ss-flame{position:relative;font:11px monospace;overflow:hidden;border:1px solid #ddd}"
       ".ss-flame .ss-fr{position:absolute;height:17px;overflow:hidden;white-space:nowrap;box-sizing:border-box;"
       "border:1px solid #fff;padding:0 3px;line-height:15px;color:#222;cursor:pointer}"
       ".ss-flame .ss-fr.hit{background:#e53e3e !important;color:#fff}"
       ".ss-flame.searching .ss-fr:not(.hit){opacity:.45}"
       ".ss-flamebar{display:flex;gap:8px;align-items:center;margin:4px 0 6px;font-size:12px}"
       ".ss-flamebar input{padding:3px 8px;border:1px solid #dde1e7;border-radius:4px;width:240px}")
FLAME_JS = """
(function () {
  function layout(fg, x0, w0, d0) {
    fg.querySelectorAll(".ss-fr").forEach(function (b) {
      var x = +b.getAttribute("data-x"), w = +b.getAttribute("data-w"), d = +b.getAttribute("data-d");
      var eps = 1e-9, show, left, width;
      if (d < d0) { show = x <= x0 + eps && x + w >= x0 + w0 - eps; left = 0; width = 1; }
      else { show = x >= x0 - eps && x + w <= x0 + w0 + eps && w / w0 >= 0.001; left = (x - x0) / w0; width = w / w0; }
      b.style.display = show ? "" : "none";
      if (show) { b.style.left = (100 * left).toFixed(3) + "%"; b.style.width = (100 * width).toFixed(3) + "%"; }
    });
    fg.setAttribute("data-zoom", d0 > 0 || w0 < 1 ? "1" : "0");
  }
  document.querySelectorAll("button.ss-flame-dl").forEach(function (btn) {
    btn.addEventListener("click", function () {
      var src = document.getElementById(btn.getAttribute("data-src"));
      var url = URL.createObjectURL(new Blob([JSON.parse(src.textContent)], {type: "text/plain"}));
      var a = document.createElement("a");
      a.href = url; a.download = btn.getAttribute("data-name");
      document.body.appendChild(a); a.click(); a.remove();
      setTimeout(function () { URL.revokeObjectURL(url); }, 1000);
    });
  });
  document.querySelectorAll(".ss-flame").forEach(function (fg) {
    fg.addEventListener("click", function (ev) {
      var b = ev.target.closest(".ss-fr");
      if (b) layout(fg, +b.getAttribute("data-x"), +b.getAttribute("data-w"), +b.getAttribute("data-d"));
    });
    var bar = document.querySelector('.ss-flamebar[data-for="' + fg.id + '"]');
    if (!bar) return;
    bar.querySelector("button").addEventListener("click", function () { layout(fg, 0, 1, 0); });
    var inp = bar.querySelector("input"), out = bar.querySelector("span");
    inp.addEventListener("input", function () {
      var q = inp.value.toLowerCase(), n = 0;
      fg.querySelectorAll(".ss-fr").forEach(function (b) {
        var hit = q !== "" && b.textContent.toLowerCase().indexOf(q) >= 0;
        b.classList.toggle("hit", hit); if (hit) n += 1;
      });
      fg.classList.toggle("searching", q !== "");
      out.textContent = q ? n + " matching frame" + (n === 1 ? "" : "s") : "";
    });
  });
})();
"""


def _tree(stacks: dict[str, int]) -> dict[str, Any]:
    root: dict[str, Any] = {"n": 0, "c": {}}
    for stack, n in stacks.items():
        root["n"] += n
        node = root
        for frame in stack.split(";")[:MAX_DEPTH]:
            node = node["c"].setdefault(frame, {"n": 0, "c": {}})
            node["n"] += n
    return root


def _color(name: str) -> str:
    h = sum(ord(c) for c in name) % 60
    if name.startswith(("region:", "phase:")):
        return "hsl(210,60%,80%)"
    return f"hsl({h},75%,{68 + h % 12}%)"


def flamegraph_html(stacks: dict[str, int], *, graph_id: str = "flame") -> str:
    """The icicle of collapsed stacks (``root;...;leaf`` -> samples), with its zoom and search bar."""
    root = _tree(stacks)
    total = root["n"]
    if not total:
        return notice("no samples", "info")
    found: list[tuple[float, float, float, int, str, int]] = []  # (-w, x, w, depth, name, samples)

    def walk(node: dict[str, Any], x: float, depth: int) -> None:
        for name, child in sorted(node["c"].items()):
            w = child["n"] / total
            if w >= MIN_SHARE:
                found.append((-w, x, w, depth, name, child["n"]))
                walk(child, x, depth + 1)
            x += w

    walk(root, 0.0, 0)
    kept = sorted(found)[:MAX_BLOCKS]
    depth_max = max((d for _, _, _, d, _, _ in kept), default=0)
    blocks = []
    for _, x, w, depth, name, n in sorted(kept, key=lambda b: (b[3], b[1])):
        tip = f"{name} — {n:,} samples ({100 * w:.1f}%)"
        blocks.append(f'<div class="ss-fr" data-x="{x:.6f}" data-w="{w:.6f}" data-d="{depth}" '
                      f'style="left:{100 * x:.3f}%;width:{100 * w:.3f}%;top:{depth * ROW_PX}px;'
                      f'background:{_color(name)}" title="{esc(tip)}">{esc(name)}</div>')
    gid = esc(graph_id)
    bar = (f'<div class="ss-flamebar" data-for="{gid}"><input type="search" placeholder="search frames" '
           f'aria-label="search frames"><button type="button">reset zoom</button><span></span></div>')
    return (bar + f'<div class="ss-flame" id="{gid}" style="height:{(depth_max + 1) * ROW_PX + 2}px">'
            + "".join(blocks) + "</div>")


def _export_button(stacks: dict[str, int], rank: int, graph_id: str) -> str:
    """A button that saves the collapsed stacks (embedded as JSON) as ``stacks-rank<R>-context.collapsed``."""
    text = "".join(f"{k} {v}\n" for k, v in sorted(stacks.items()))
    if len(text) > MAX_EMBEDDED_EXPORT:
        return ""
    return (json_script(text, element_id=f"{graph_id}-collapsed")
            + f'<button type="button" class="ss-flame-dl" data-src="{esc(graph_id)}-collapsed" '
              f'data-name="stacks-rank{rank}-context.collapsed">download these collapsed stacks</button> ')


def flamegraph_section(data: RunData, *, rank: int | None = None) -> Section | None:
    """Flame graphs of each rank's main thread (only ``rank`` when given), region and phase as the two
    root levels; None when the run has no stack samples (record with --sample-stacks)."""
    prof = host_profile(data)
    main = [p for p in prof.processes if p.process == "main" and (rank is None or p.rank == rank)]
    if not main:
        return None
    blocks = {}
    for p in main:
        stacks = collapsed(stack_rows(data.rank(p.rank)), with_context=True)
        note = paragraph(f"rank {p.rank}, main thread: {p.samples:,} Python stack samples at {p.hz:g} Hz "
                         f"({p.dropped:,} dropped).")
        export = ('<p class="ss-note">' + _export_button(stacks, p.rank, f"flame-r{p.rank}")
                  + esc(f"all ranks and DataLoader workers: stepscope export {data.run.id} --format collapsed "
                        "(for flamegraph.pl, speedscope, inferno)") + "</p>")
        blocks[p.rank] = note + flamegraph_html(stacks, graph_id=f"flame-r{p.rank}") + export
    return Section("flamegraph", "Flame graph (Python host time)", per_rank("flame", blocks),
                   note=f"top levels are the stepscope region ('{NO_REGION}' outside any) and the step phase. Hover a "
                        "frame for its samples, click it to zoom in (reset zoom to go back), search to highlight.")
