"""mpi4py timing on latency-bound programs (collect/mpi/mpi_sample.py): every call counted exactly, past the row
budget a sample timed, and the cost per call small enough for a same-host 1-byte ping-pong. Real `mpirun`,
2 ranks, tests/scripts/mpi_pingpong.py."""

from __future__ import annotations

import importlib.util
import json
import os
import pickle
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from stepscope.collect.mpi.mpi_sample import FREE_ROWS, SAMPLE_EVERY, Budget, Counts
from tests.conftest import SCRIPTS, load

no_mpirun = pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun is not installed (openmpi-bin)")
no_mpi4py = pytest.mark.skipif(importlib.util.find_spec("mpi4py") is None, reason="mpi4py is not installed")
PROTOCOL = 5  # mpi4py's default pickle protocol (MPI.pickle.PROTOCOL)
PROGRAM = SCRIPTS / "mpi_pingpong.py"


def _run(store: Path, *args: str) -> dict[str, Any]:
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    env.pop("STEPSCOPE_DB", None)
    cmd = [sys.executable, "-m", "stepscope", "run", "--store", str(store), "--quiet", "--sample-interval", "0",
           "--", "mpirun", "--oversubscribe", "-n", "2", sys.executable, str(PROGRAM), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


@pytest.mark.slow
@no_mpirun
@no_mpi4py
def test_exact_counts_past_the_budget(tmp_path: Path) -> None:
    """A ping-pong, an allreduce loop and pickled round trips, far past the row budget: the ranks' mpi_calls
    records hold each method's exact calls and bytes, from the program's own loop counts; the rows are a
    sample of them, and the rank says so."""
    store = tmp_path / "store"
    got = _run(store, "--round-trips", "3000", "--allreduces", "40", "--allreduce-bytes", "4096", "--pickled", "30")
    n, m, k, size = got["round_trips"], got["allreduces"], got["pickled"], got["allreduce_bytes"]
    assert got["allreduce_ok"] and got["pickled_sum"] == 7 * k  # the user's results, timing or not
    seven = len(pickle.dumps(7, PROTOCOL))
    want = {"Send": (n, n), "Recv": (n, n), "Allreduce": (m, m * size), "send": (k, k * seven),
            "recv": (k, k * seven), "Barrier": (1, 0)}  # the program's one timed Barrier before its phases
    data = load(store)
    assert sorted(r.stream.rank for r in data.ranks) == [0, 1]
    for r in data.ranks:
        rec = r.extra["mpi_calls"][-1]
        methods = rec["methods"]
        assert {name: (c["calls"], c["bytes"]) for name, c in methods.items()} == want
        assert all(c["bytes_unknown"] == 0 for c in methods.values())
        # rows: the timed calls only, as many as the record says, each with the call's real size
        ops = r.comm.column_strings()
        nbytes = r.comm["bytes"].tolist()
        rows = {op: [b for o, b in zip(ops, nbytes, strict=True) if o == op] for op in set(ops)}
        assert len(rows["send"]) == methods["Send"]["timed"] + methods["send"]["timed"]
        assert len(rows["recv"]) == methods["Recv"]["timed"] + methods["recv"]["timed"]
        assert set(rows["send"]) <= {1.0, float(seven)} and set(rows["recv"]) <= {1.0, float(seven)}
        # the budget timed (refilled every flush interval on a slow host), then a sample
        assert FREE_ROWS <= len(ops) < sum(c["calls"] for c in methods.values()) // 2
        assert rec["sampled_rows"] > 0 and any("1 in 64 is timed" in note for note in r.notes)


@pytest.mark.slow
@no_mpirun
@no_mpi4py
def test_exact_counts_of_every_kind_sampled(tmp_path: Path) -> None:
    """Non-blocking calls with their waits, pickled non-blocking calls, Sendrecv, a non-blocking collective, a
    pickled bcast, Barrier and buffer specs with a count and a type, far past the budget (9 calls an
    iteration): exact calls and bytes per method, the program's received values unchanged. An untimed
    Irecv's bytes are unknown (never looked at): the record says how many, and the known ones are exact."""
    store = tmp_path / "store"
    got = _run(store, "--mixed", "400")
    j = 400
    assert got["mixed_ok"]
    seven, abc = len(pickle.dumps(7, PROTOCOL)), len(pickle.dumps("abc", PROTOCOL))
    for r in load(store).ranks:
        methods = r.extra["mpi_calls"][-1]["methods"]
        exact = {name: (c["calls"], c["bytes"]) for name, c in methods.items() if name not in ("Irecv", "irecv")}
        assert exact == {"Isend": (j, j * 12), "isend": (j, j * seven), "Sendrecv": (j, j * (16 + 16)),
                         "Iallreduce": (j, j * 16), "bcast": (j, j * abc), "Barrier": (j + 1, 0),
                         "Send": (j, j * 8), "Recv": (j, j * 8)}  # 2 int32 by count and type, received: 8
        for name, size in (("Irecv", 12), ("irecv", seven)):
            c = methods[name]
            assert c["calls"] == j and 0 < c["bytes_unknown"] < j
            assert c["bytes"] == (j - c["bytes_unknown"]) * size
        assert r.extra["mpi_calls"][-1]["sampled_rows"] > 0


@pytest.mark.slow
@no_mpirun
@no_mpi4py
def test_pingpong_cost_paired(tmp_path: Path) -> None:
    """Inside one job, blocks of 1-byte round trips alternate between the timed methods and mpi4py's own on the
    same communicator (order alternating per pair). The median per-pair ratio stays under 2.5x and the median
    added time under 2 µs per call (4 calls per round trip on the critical path): the per-call timing of
    before (≈ 3 µs per call on a quiet host, ≈ 17 µs loaded; 8x a 1.7 µs round trip) fails both; blocks a
    busy host stalls for milliseconds hit either arm and the medians ignore them."""
    got = _run(tmp_path / "store", "--pairs", "40", "--block", "300")
    timed, bare = got["pairs_timed_us"], got["pairs_bare_us"]
    assert len(timed) == len(bare) == 40
    ratio = statistics.median(t / b for t, b in zip(timed, bare, strict=True))
    per_call = statistics.median(t - b for t, b in zip(timed, bare, strict=True)) / 4
    assert ratio < 2.5 and per_call < 2.0, (ratio, per_call, statistics.median(bare))


def test_budget_rule() -> None:
    """The budget: FREE_ROWS weight-1 rows, then weight SAMPLE_EVERY; past it a point-to-point call is timed
    with probability 1/SAMPLE_EVERY (gap mean SAMPLE_EVERY - 1) and a collective by its index, at the same
    rate whatever period the program's loop has; a refill frees rows again, unless the interval was busy."""
    b = Budget(per_interval=10, sample_every=8, seed=1)
    assert [b.take() for _ in range(12)] == [1] * 10 + [8, 8] and b.sampled == 2
    gaps = [b.gap() for _ in range(20000)]
    assert statistics.mean(gaps) == pytest.approx(7, rel=0.05)
    for period in (1, 2, 3, 8, 64):  # each phase of a periodic loop is sampled at the same rate
        for phase in range(min(period, 3)):
            hits = sum(not b.collective_untimed(phase + period * i) for i in range(8000))
            assert hits / 8000 == pytest.approx(1 / 8, abs=0.02), (period, phase)
    b.refill(busy=True)
    assert b.take() == 8 and b.collective_untimed(3)  # hash(3) is past the threshold: untimed
    b.refill()
    assert not b.collective_untimed(3) and b.gap() == 0 and b.take() == 1
    assert SAMPLE_EVERY > 1 and FREE_ROWS > 0


def test_busy_interval_keeps_sampling(tmp_path: Path) -> None:
    """The flush thread's refill: after an interval with more calls than the budget the next one starts
    sampling (a steady fast loop pays full rows once); after a quiet one the rows are free again. The counts
    record is written once per change."""
    from stepscope.collect.core.options import Options
    from stepscope.collect.core.session import Session
    from stepscope.collect.mpi.mpi import MpiRecorder

    session = Session(tmp_path, "t", Options(sample_interval_s=0, flush_interval_s=600))
    m = MpiRecorder(session, mpi=None, budget=Budget(per_interval=10, sample_every=8, seed=3))
    send = m.counts.setdefault("Send", Counts())
    try:
        for calls, free in ((5, 10), (11, 0), (20, 0), (3, 10), (0, 10)):
            send.calls += calls
            m.budget.free = 0  # whatever the interval used
            m.on_flush()
            assert m.budget.free == free, (calls, free)
        records = [r for r in session.buffers.drain() if r.get("kind") == "mpi_calls"]
        assert [r["methods"]["Send"]["calls"] for r in records] == [5, 16, 36, 39]  # none for the idle interval
    finally:
        session.close()
