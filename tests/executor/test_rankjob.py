"""One rank's job in a worker: the small result comes back, the table does not stay, and the heap's freed
pages go back to the system (the worker's resident size after a rank is about what it was before)."""

from __future__ import annotations

import gc
import gzip
import os
import weakref
from pathlib import Path
from typing import Any

import orjson
import pytest

from stepscope.executor.rankjob import release_memory, run_rank
from stepscope.model.events import EventTable
from stepscope.traces.traceset import RankJob
from tests.executor.rankset import FIXTURE, rank_doc

COPIES = 8
"""The 128-rank fixture's events repeated (times shifted): about 39k events, a 4.7 MB table."""


@pytest.fixture(scope="module")
def big_rank(tmp_path_factory: pytest.TempPathFactory) -> Path:
    doc = orjson.loads(gzip.decompress(FIXTURE.read_bytes()))
    events = [e for e in doc["traceEvents"] if e.get("ph") == "M"]
    for c in range(COPIES):
        events += [dict(e, ts=e["ts"] + c * 10_000_000) for e in doc["traceEvents"] if "ts" in e and e.get("ph") != "M"]
    p = tmp_path_factory.mktemp("big") / "rank3.json.gz"
    p.write_bytes(gzip.compress(orjson.dumps(rank_doc({**doc, "traceEvents": events}, 3, 4, k=1.0)), compresslevel=1))
    return p


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


kept: list[weakref.ref[Any]] = []
"""A weak reference to a column of each table seen (the table itself has slots, no weak references)."""


def size_and_keep_ref(table: EventTable) -> int:
    kept.append(weakref.ref(table.cols["ts_ns"]))
    return sum(a.nbytes for a in table.cols.values())


def test_only_the_result_leaves_and_the_table_is_freed(big_rank: Path) -> None:
    r = run_rank(RankJob(str(big_rank), None), size_and_keep_ref)
    assert r.error is None and r.rank == 3 and isinstance(r.value, int) and r.value > 0
    assert kept[-1]() is None  # no reference to the table's columns survives the job (no gc.collect needed)


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="reads the resident size from /proc")
def test_resident_size_after_a_rank_returns_near_where_it_was(big_rank: Path) -> None:
    sizes: list[Any] = []
    run_rank(RankJob(str(big_rank), None), size_and_keep_ref)  # imports and first-use caches
    gc.collect()
    release_memory()
    before = _rss()
    sizes.append(run_rank(RankJob(str(big_rank), None), size_and_keep_ref).value)
    grown = _rss() - before
    # without returning the freed heap the process keeps 1.5-3x the table after a rank (measured)
    assert grown < 0.5 * sizes[0], (grown, sizes[0])


def test_an_unreadable_rank_is_an_error_naming_it(tmp_path: Path) -> None:
    bad = tmp_path / "rank0.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "ts": 1, "dur": -5, "name": "x"}')
    r = run_rank(RankJob(str(bad), None), size_and_keep_ref)
    assert r.value is None and r.error is not None and str(bad) in r.error and "\n" not in r.error
