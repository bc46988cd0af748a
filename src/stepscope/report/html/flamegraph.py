"""Flame graph section of the HTML report, from sampled Python stacks (analyze/hostprof.py).

Drawn server-side as nested, absolutely positioned blocks (an icicle: root on top), so it needs no
script: width = share of samples, hover shows the function, its samples and share. Frames narrower than
MIN_SHARE are left out (their samples stay in the parent's width). Call it as
``flamegraph_section(data)`` (RunData) or ``flamegraph_html(stacks)`` with collapsed stacks.
"""

from __future__ import annotations

from typing import Any

from stepscope.analyze.hostprof import NO_REGION, collapsed, host_profile, stack_rows
from stepscope.model.tables import RunData
from stepscope.report.html import Section, esc, notice

MIN_SHARE = 0.005
MAX_DEPTH = 48
ROW_PX = 18
CSS = (".ss-flame{position:relative;font:11px monospace;overflow:hidden;border:1px solid #ddd}"
       ".ss-flame div{position:absolute;height:17px;overflow:hidden;white-space:nowrap;box-sizing:border-box;"
       "border:1px solid #fff;padding:0 3px;line-height:15px;color:#222}")


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


def flamegraph_html(stacks: dict[str, int]) -> str:
    """The icicle of collapsed stacks (``root;...;leaf`` -> samples), as one HTML block."""
    root = _tree(stacks)
    total = root["n"]
    if not total:
        return notice("no samples", "info")
    blocks: list[str] = []
    depth_max = 0

    def walk(node: dict[str, Any], x: float, depth: int) -> None:
        nonlocal depth_max
        for name, child in sorted(node["c"].items()):
            w = child["n"] / total
            if w >= MIN_SHARE:
                depth_max = max(depth_max, depth)
                tip = f"{name} — {child['n']:,} samples ({100 * w:.1f}%)"
                blocks.append(f'<div style="left:{100 * x:.3f}%;width:{100 * w:.3f}%;top:{depth * ROW_PX}px;'
                              f'background:{_color(name)}" title="{esc(tip)}">{esc(name)}</div>')
                walk(child, x, depth + 1)
            x += w

    walk(root, 0.0, 0)
    return (f"<style>{CSS}</style><div class=\"ss-flame\" style=\"height:{(depth_max + 1) * ROW_PX + 2}px\">"
            + "".join(blocks) + "</div>")


def flamegraph_section(data: RunData, *, rank: int | None = None) -> Section | None:
    """Flame graph of one rank's main thread (default: the first rank with samples), region and phase as
    the two root levels; None when the run has no stack samples (record with --sample-stacks)."""
    prof = host_profile(data)
    main = [p for p in prof.processes if p.process == "main" and (rank is None or p.rank == rank)]
    if not main:
        return None
    p = main[0]
    stacks = collapsed(stack_rows(data.rank(p.rank)), with_context=True)
    note = (f"rank {p.rank}, main thread: {p.samples:,} Python stack samples at {p.hz:g} Hz; top levels are the "
            f"stepscope region ({NO_REGION} outside any) and the step phase. Hover a block for its samples.")
    return Section("flamegraph", "Flame graph (Python host time)", flamegraph_html(stacks), note=note)
