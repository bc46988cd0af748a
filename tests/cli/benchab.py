"""One `stepscope bench --ab` study run in-process for a test module: its store and its JSON document."""

from __future__ import annotations

import contextlib
import io
import json
import math
from pathlib import Path
from typing import Any

from stepscope.cli import main
from tests.conftest import PY


def bench_ab(store: Path, script: str, a: list[str], b: list[str], *, repeat: int, warmup: int,
             metric: str) -> dict[str, Any]:
    """``bench --ab --repeat repeat --metric metric`` of ``python script *a`` against ``python script *b``."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["bench", "--store", str(store), "--ab", "--repeat", str(repeat), "--sample-interval", "0",
                   "--warmup-steps", str(warmup), "--metric", metric, "--json", "--",
                   PY, script, *a, "--", PY, script, *b])
    assert rc == 0
    doc: dict[str, Any] = json.loads(out.getvalue())
    return doc


def per_run(store: Path, ids: list[str], column: str, stat: Any, *, warmup: int) -> list[float]:
    """``stat`` of each run's step ``column`` ("wall": the step's wall time) after ``warmup`` steps, read from the
    store directly (not through the diff being tested)."""
    from stepscope.store import open_store

    st = open_store(store)
    try:
        out = []
        for i in ids:
            steps = st.load(i).ranks[0].steps
            vals = (steps.duration_ns if column == "wall" else steps[column]).astype("float64")[warmup:]
            out.append(float(stat(vals)))
        return out
    finally:
        st.close()


def geo(vals: list[float]) -> float:
    """The geometric mean: how a side's per-run values are summarised in the verdict."""
    return math.exp(sum(math.log(v) for v in vals) / len(vals))
