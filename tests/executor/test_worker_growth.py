"""Each worker's growth over an idle one, measured as benchmarks/trace_scale.py does, in a real forked local pool
and a real Dask LocalCluster (2 workers each) over 4 ranks of 107,732 events (13.2 MB of table each): the issue's
bound, 1.5x one rank's table, held by the worker's anonymous memory.

A worker's whole RSS grows by more (forked pool 1.79-1.82x, Dask 1.49-1.51x on 16 ranks): its first rank faults in
code pages for good (numpy's, the extension's; 6.1-6.2 MB in a forked process, which does not inherit the parent's
page-table entries for them, 2.1 MB in a Dask worker). Those are the page cache's, shared by every process that
maps the libraries, and no new memory; its anonymous memory (the table, the analyses' arrays, the heap) grows by
1.33-1.35x in both on 16 ranks (1.40x and 1.47x on 256: docs/traces.md), and the first rank leaves 0.2-0.6 MB of
it behind. The anonymous peak is bounded above from samples of /proc/self/status (``AnonPeak``), whose soundness
the first test checks on a known allocation. The last test holds what a full garbage collection in a forked worker
copies of its parent's pages (the pool freezes the parent's objects out of the collector while it runs).
"""

from __future__ import annotations

import gc
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from stepscope.executor.local import LocalExecutor
from tests.conftest import ROOT

BENCH = ROOT / "benchmarks" / "trace_scale.py"
EVENTS = 100_000
RANKS = 4
BOUND = 1.5
"""The issue's bound: a worker's growth below 1.5x one rank's table."""
pytestmark = pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux /proc")

PROBE = """
import mmap, sys, time
sys.path.insert(0, sys.argv[1])
import trace_scale as ts
MiB = 2**20
f = open(sys.argv[2], "rb")
m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
ts._reset_peak()
sampler = ts.AnonPeak()
sampler.start()
time.sleep(0.05)
touched = sum(m[i] for i in range(0, len(m), 4096))  # the file's pages faulted in: file-backed, not anonymous
time.sleep(0.05)
block = b"\\x01" * (24 * MiB)  # 24 MiB of anonymous memory, written
time.sleep(0.05)
del block
time.sleep(0.05)
bound = sampler.bound()
first, last = sampler.samples[0], sampler.samples[-1]
print(bound - first["RssAnon"], last["VmHWM"] - first["RssAnon"] - first["RssFile"] - first["RssShmem"],
      last["RssFile"] - first["RssFile"], len(sampler.samples))
"""


def test_anonymous_peak_bound_counts_an_allocation_not_the_file_pages_faulted_in(tmp_path: Path) -> None:
    data = tmp_path / "data.bin"
    data.write_bytes(bytes(range(256)) * (32 * 1024))  # 8 MiB, in the page cache once written
    out = subprocess.run([sys.executable, "-c", PROBE, str(BENCH.parent), str(data)], capture_output=True,
                         text=True, check=True, env={"PYTHONPATH": str(ROOT / "src"), "PATH": ""})
    anon, rss, faulted, samples = (int(x) for x in out.stdout.split())
    mib = 2**20
    assert faulted >= 7 * mib, f"the file's pages were not faulted in ({faulted / mib:.1f} MiB)"
    assert rss >= 31 * mib, f"RSS grew by {rss / mib:.1f} MiB: the block and the file's pages"
    # at least the block (an upper bound), and without the file's 8 MiB: the sampler saw them come in first
    assert 24 * mib <= anon < 26 * mib, f"anonymous peak {anon / mib:.1f} MiB over {samples} samples"


def _build_set() -> Any:
    spec = importlib.util.spec_from_file_location("trace_scale", BENCH)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.build_set


@pytest.fixture(scope="module")
def rank_set(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("ranks4")
    assert _build_set()(folder, RANKS, EVENTS) >= EVENTS
    return folder


def _dask() -> Any:
    return pytest.mark.skipif(importlib.util.find_spec("distributed") is None, reason="needs Dask's distributed")


@pytest.mark.parametrize("executor", ["local", pytest.param("dask", marks=_dask())])
def test_each_worker_grows_by_less_than_one_and_a_half_tables_of_anonymous_memory(rank_set: Path,
                                                                                   executor: str) -> None:
    out = subprocess.run([sys.executable, str(BENCH), "--one", str(rank_set), executor, "2"], capture_output=True,
                         text=True, check=True, env={"PYTHONPATH": str(ROOT / "src"), "PATH": ""})
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["ranks"] == RANKS and got["errors"] == 0
    table = got["table_bytes"]
    assert table > 12 * 2**20  # the 107,732-event rank: 13.2 MB of columns
    for w in got["workers"]:
        what = {k: round(v / table, 2) for k, v in w.items() if k != "ranks"}
        # the table itself is anonymous memory, alive at the peak; the anonymous growth is part of the RSS growth
        assert table < w["anon_growth"] <= w["growth"], what
        assert w["anon_growth"] < BOUND * table, what
        assert w["first_anon_left"] < 0.1 * table, what  # measured 0.2-0.4 MB: the first rank keeps little


def _collect_in_worker(_: int) -> int:
    """A job that runs a full garbage collection: the private dirty bytes it gained meanwhile."""
    def dirty() -> int:
        with open("/proc/self/smaps_rollup", "rb") as f:
            return next(int(x.split()[1]) for x in f if x.startswith(b"Private_Dirty:")) * 1024
    before = dirty()
    gc.collect()
    return dirty() - before


def test_a_full_collection_in_a_pool_worker_copies_little_of_the_parent() -> None:
    # a forked worker shares the parent's objects; a full collection writes to each one it examines: before the
    # pool froze them, 14.4 MB of this test process's pages copied per worker (8.1 MB from a process that imported
    # the analyses alone); frozen, 0.4-0.5 MB, once 3.0 MB with both cores busy: the bound sits well below the
    # unfrozen copy
    import stepscope.analyze.trace.analysis  # noqa: F401  (what a worker of ``trace analyze`` inherits)

    frozen_before = gc.get_freeze_count()
    copied = LocalExecutor(2).map(_collect_in_worker, [0, 1])
    assert all(o.error is None for o in copied)
    assert max(o.value for o in copied) < 5 * 2**20, [o.value for o in copied]
    assert gc.get_freeze_count() == frozen_before  # the parent's collector as it was
