"""A worker's peak for one rank, measured in a fresh process: the rank's table plus the reader's and the
analyses' working sets. A rank of 107,732 events (the A100 NCCL fixture repeated, as benchmarks/trace_scale.py
builds it) is read and analysed by ``run_rank`` twice; for each, the process's VmHWM, reset just before the rank,
less its RSS then, is the rank's growth. Measured here (results identical before and after), the same to 0.01
over repeated runs: before the memory work of issue 17, 2.28x the table for the first rank and 2.14x for the
next; after it, 1.63x and 1.45x. The first rank of a process leaves about 3 MB behind for good (modules such as
numpy.ma imported on first use, the allocator's first arenas) and so peaks higher; the next ones are a worker's
steady state, held to the issue's 1.5x; the first to 1.7x (both bounds fail on the old code). No margin beyond
that: the figures do not vary between runs, only between allocators, and a change there should be looked at.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EVENTS = 100_000
FIRST_BOUND = 1.7
BOUND = 1.5

CHILD = """
import json, os, sys
from stepscope.analyze.trace.analysis import analyze_trace
from stepscope.executor.rankjob import release_memory, run_rank
from stepscope.traces.components import ComponentRules
from stepscope.traces.traceset import RankJob
ComponentRules.defaults()
sizes = []
def fn(table):
    sizes.append(sum(a.nbytes for a in table.cols.values()) + sum(a.nbytes for a in table.flows.values()))
    return analyze_trace(table).events
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
growth = []
for _ in range(2):
    release_memory()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = rss()
    result = run_rank(RankJob(sys.argv[1], None), fn)
    with open("/proc/self/status") as f:
        growth.append(int(next(x for x in f if x.startswith("VmHWM:")).split()[1]) * 1024 - before)
print(json.dumps({"growth": growth, "table": sizes[0], "events": result.value, "error": result.error}))
"""


def _build_set() -> object:
    spec = importlib.util.spec_from_file_location("trace_scale", ROOT / "benchmarks" / "trace_scale.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.build_set


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="VmHWM reset needs Linux /proc")
def test_one_rank_peak_growth_is_bounded_by_its_table(tmp_path: Path) -> None:
    events = _build_set()(tmp_path, 1, EVENTS)  # type: ignore[operator]
    out = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "rank0.json.gz")], capture_output=True,
                         text=True, check=True, env={"PYTHONPATH": str(ROOT / "src"), "PATH": ""})
    got = json.loads(out.stdout)
    assert got["error"] is None and got["events"] == events >= EVENTS
    assert got["table"] > 12 * 2**20  # the 107,732-event rank: 13.2 MB of columns
    first, steady = (g / got["table"] for g in got["growth"])
    assert first < FIRST_BOUND and steady < BOUND, f"growth {first:.2f}x, then {steady:.2f}x the table"
