"""Collapsed-stack export (`stepscope export RUN --format collapsed`): the sampled Python stacks of a run
(`--sample-stacks`) in Brendan Gregg's folded format, one ``frame;frame;...;leaf COUNT`` line per stack,
which flamegraph.pl, speedscope and inferno read.

Files: ``stacks-rank<R>.collapsed`` (main thread, stacks merged over regions and phases),
``stacks-rank<R>-context.collapsed`` (the same with ``region:<path>`` and ``phase:<name>`` as the two root
frames, so the flame graph splits by region and phase first) and ``stacks-rank<R>-workers.collapsed``
when DataLoader workers were sampled.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from stepscope.errors import UserError

NO_REGION = "(no region)"


def folded_lines(stacks: dict[str, int]) -> str:
    """Lines sorted by stack (deterministic), each ``stack count``."""
    return "".join(f"{s} {n}\n" for s, n in sorted(stacks.items()))


def write_collapsed(tables: dict[str, dict[str, list[Any]]], out: Path) -> list[Path]:
    t = tables.get("stacks")
    if not t or not t.get("rank"):
        raise UserError("the run has no stack samples — record it with `stepscope run --sample-stacks 100 -- ...`")
    plain: dict[tuple[int, str], Counter[str]] = {}
    context: dict[int, Counter[str]] = {}
    for rank, process, region, phase, stack, n in zip(t["rank"], t["process"], t["region"], t["phase"], t["stack"],
                                                      t["samples"], strict=True):
        plain.setdefault((rank, process), Counter())[stack] += n
        if process == "main":
            context.setdefault(rank, Counter())[f"region:{region or NO_REGION};phase:{phase};{stack}"] += n
    paths = []
    for (rank, process), stacks in sorted(plain.items()):
        p = out / (f"stacks-rank{rank}.collapsed" if process == "main" else f"stacks-rank{rank}-workers.collapsed")
        p.write_text(folded_lines(stacks))
        paths.append(p)
    for rank, stacks in sorted(context.items()):
        p = out / f"stacks-rank{rank}-context.collapsed"
        p.write_text(folded_lines(stacks))
        paths.append(p)
    return paths
