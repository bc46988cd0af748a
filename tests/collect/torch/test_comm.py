"""Communication timing: a real 3-rank gloo job with known calls and bytes, DDP's numerics unchanged
bit for bit by the timing hook, and every wrapper removed on undo."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import SCRIPTS, load

TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "3"]
STEPS = 4


def _why(r: subprocess.CompletedProcess[str]) -> str:
    """A failed torchrun's stderr: its head (what a rank printed as it died) and its tail (the launcher's
    summary, which names only the signal)."""
    err = r.stderr
    return err if len(err) <= 6000 else f"{err[:4000]}\n[...]\n{err[-2000:]}"


def test_known_calls_are_timed_and_ddp_numerics_unchanged(tmp_path: Path) -> None:
    script = str(SCRIPTS / "comm_counts.py")
    env = {**os.environ, "STEPS": str(STEPS), "OMP_NUM_THREADS": "1"}
    for _ in range(2):  # the bare reference: gloo's teardown once aborted a rank of plain torch under load
        plain = subprocess.run([*TORCHRUN, script], env={**env, "OUT": str(tmp_path / "plain.pt")},
                               capture_output=True, text=True, timeout=300)
        if "terminate called without an active exception" not in plain.stderr:
            break
    assert plain.returncode == 0, _why(plain)
    store = tmp_path / "store"
    observed = subprocess.run([sys.executable, "-m", "stepscope", "run", "--store", str(store), "--quiet",
                               "--sample-interval", "0", "--", *TORCHRUN, script],
                              env={**env, "OUT": str(tmp_path / "observed.pt")}, capture_output=True, text=True,
                              timeout=300)
    assert observed.returncode == 0, _why(observed)

    import torch

    a, b = torch.load(tmp_path / "plain.pt"), torch.load(tmp_path / "observed.pt")
    # world size 3: torch's own allreduce_hook (divide) would differ in the last bit; the Reducer's
    # multiply-by-1/n does not
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))

    data = load(store)
    assert [r.stream.rank for r in data.ranks] == [0, 1, 2]
    seqs = []
    for r in data.ranks:
        c = r.comm
        ops = c.column_strings()
        rows = list(zip(ops, c["bytes"].tolist(), strict=True))
        counts = Counter(rows)
        assert counts[("all_reduce", 4000.0)] == STEPS
        assert counts[("all_reduce", 40.0)] == STEPS
        assert counts[("broadcast", 400.0)] == 1
        assert counts[("barrier", 0.0)] == 1
        assert counts[("ddp:all_reduce", 2177 * 4.0)] == STEPS
        if r.stream.rank < 2:  # rank 0 isends to 1, rank 1 irecvs from 0; rank 2 takes no part
            i = ops.index("isend" if r.stream.rank == 0 else "irecv")
            assert (c["bytes"][i], c["peer"][i]) == (200.0, 1 - r.stream.rank)
        else:
            assert "isend" not in ops and "irecv" not in ops
        coll = [i for i, o in enumerate(ops) if o in ("all_reduce", "broadcast", "barrier")]
        assert set(c["group_size"][coll].tolist()) == {3}
        assert (c["duration_ns"] > 0).all()
        seqs.append([(ops[i], int(c["seq"][i])) for i in coll])
        train = r.steps.take(r.steps["phase"] == 0)
        assert len(train) == STEPS
        assert (train["comm_ns"][1:] > 0).all()  # every step after the first waits in its all_reduces
    assert seqs[0] == seqs[1] == seqs[2]  # the same collective has the same seq on every rank


def test_wrappers_removed_on_undo_and_errors_pass_through(tmp_path: Path) -> None:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from stepscope.collect.core.options import Options
    from stepscope.collect.core.session import Session
    from stepscope.collect.torch.comm import install_comm_hooks

    before = (dist.all_reduce, dist.distributed_c10d.barrier, dist.isend, DDP.__init__, DDP.register_comm_hook)
    session = Session(tmp_path, "t", Options(sample_interval_s=0))
    undo: list = []  # type: ignore[type-arg]
    install_comm_hooks(session, undo)
    try:
        assert dist.all_reduce is not before[0] and dist.all_reduce.__wrapped__ is before[0]  # type: ignore[attr-defined]
        assert DDP.__init__ is not before[3]
        with pytest.raises(Exception) as ours:  # no process group: torch's own error, unchanged
            dist.all_reduce(torch.ones(3))
        with pytest.raises(Exception) as theirs:
            before[0](torch.ones(3))
        assert type(ours.value) is type(theirs.value) and str(ours.value) == str(theirs.value)
        assert not session.active and session.buffers.comm["op"] == []
    finally:
        for u in reversed(undo):
            u()
        session.close()
    assert (dist.all_reduce, dist.distributed_c10d.barrier, dist.isend, DDP.__init__, DDP.register_comm_hook) == before


class _Event:
    """Stands in for a torch.cuda.Event (there is no GPU here): completes when the test says so."""

    def __init__(self) -> None:
        self.done = False

    def query(self) -> bool:
        return self.done

    def synchronize(self) -> None:
        self.done = True

    def elapsed_time(self, other: _Event) -> float:
        return 1.5  # ms


def test_cuda_events_are_polled_only_while_some_are_pending(tmp_path: Path) -> None:
    """The per-step poll of the collectives' CUDA events is a step collector only while events are pending
    (issue 20: a process without CUDA collectives pays nothing per step); each completed call is recorded once."""
    from stepscope.collect.core.options import Options
    from stepscope.collect.core.session import Session
    from stepscope.collect.torch.comm import CommRecorder

    s = Session(tmp_path, "r", Options(sample_interval_s=0, flush_interval_s=600))  # no flush mid-test
    rec = CommRecorder(s)
    assert s.extras == []
    a, b, c, d = _Event(), _Event(), _Event(), _Event()
    rec.queue_cuda(0, "all_reduce", a, b)
    rec.queue_cuda(1, "broadcast", c, d)
    assert s.extras == [rec.poll_cuda]  # registered once, however many are pending
    try:
        s.mark_step(10, source="optimizer")
        assert s.extras == [rec.poll_cuda] and len(rec.cuda_pending) == 2  # nothing complete yet
        b.done = True
        s.mark_step(20, source="optimizer")
        assert [p[0] for p in rec.cuda_pending] == [1] and s.extras == [rec.poll_cuda]
        d.done = True
        s.mark_step(30, source="optimizer")
        assert rec.cuda_pending == [] and s.extras == []  # retired: no call per step any more
        rec.queue_cuda(2, "all_gather", _Event(), _Event())
        assert s.extras == [rec.poll_cuda]  # a later CUDA collective registers it again
        device = [r for r in s.buffers.other if r.get("kind") == "comm_device"]
        assert [(r["seq"], r["op"], r["device_ns"]) for r in device] == [(0, "all_reduce", 1.5e6),
                                                                          (1, "broadcast", 1.5e6)]
    finally:
        s.close()
