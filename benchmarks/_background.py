"""The work of stepscope's background threads, counted (``sys.setprofile``) rather than timed: Python calls,
C calls and file/OS calls (each a system call or more) per system sample and per flush. These do not move
with the machine's load; tests/collect/system/test_background_budget.py holds them to a budget and
benchmarks/hook_costs.py prints them beside the threads' CPU time.

A sample is counted in full (psutil's Python code included, where it is used), the sampler thread's wait for
the next period too; a flush is the flush thread's ``drain`` of the buffers plus the record writer's append.
"""

from __future__ import annotations

import gc
import io
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stepscope.collect.core.buffers import Buffers
from stepscope.collect.core.options import Options
from stepscope.collect.core.session import Session
from stepscope.collect.system.sampler import Sampler
from stepscope.store.rundir import RecordWriter


@dataclass(frozen=True, slots=True)
class Calls:
    py: float
    """Python function calls (any module's)."""
    c: float
    """C function calls."""
    os: float
    """C calls that go to the kernel: ``os`` functions, ``open`` and the methods of open files."""


def _is_os(fn: Any) -> bool:
    if getattr(fn, "__module__", None) in ("posix", "nt") or fn is io.open:
        return True
    return isinstance(getattr(fn, "__self__", None), io.IOBase)


def count(fn: Any) -> Calls:
    """Every Python, C and file/OS call made while ``fn()`` runs in this thread (garbage collection held off)."""
    py = c = osc = 0

    def prof(frame: Any, event: str, arg: Any) -> None:
        nonlocal py, c, osc
        if event == "call":
            py += 1
        elif event == "c_call":
            c += 1
            if _is_os(arg):
                osc += 1

    gc.collect()
    gc.disable()  # a collection's finalizers (others' objects) are not the work counted
    sys.setprofile(prof)
    try:
        fn()
    finally:
        sys.setprofile(None)
        gc.enable()
    return Calls(py, c, osc)


class _StopAfter(Buffers):
    """Buffers that stop the sampler once they hold ``n`` samples (it then takes its last one at once)."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n
        self.sampler: Sampler | None = None

    def add_sample(self, sample: dict[str, Any]) -> None:
        super().add_sample(sample)
        if len(self.samples) >= self.n and self.sampler is not None:
            self.sampler.stop_event.set()


def sample_calls(samples: int = 12, interval_s: float = 0.001) -> tuple[Calls, list[dict[str, Any]]]:
    """Calls per periodic system sample (the wait for it included): the sampler run in this thread until it
    holds ``samples`` + 1 samples, minus a run of 2 (the first sample, the setup and the last are in both),
    divided by the ``samples`` - 1 periodic samples between. Also the samples of the longer run."""
    def run(n: int) -> tuple[Calls, list[dict[str, Any]]]:
        with tempfile.TemporaryDirectory() as d:
            session = Session(Path(d), "count", Options(sample_interval_s=interval_s))
            buffers = session.buffers = _StopAfter(n)
            sampler = buffers.sampler = Sampler(session, interval_s, gpus=False)
            calls = count(sampler.run)
            return calls, buffers.samples

    run(1)  # imports and first-time set-up out of the way
    base, _ = run(1)
    more, got = run(samples)
    if len(got) != samples + 1:
        raise RuntimeError(f"the sampler took {len(got)} samples, not {samples + 1}: it stopped early")
    k = samples - 1
    return Calls((more.py - base.py) / k, (more.c - base.c) / k, (more.os - base.os) / k), got


def flush_calls(rows: int) -> Calls:
    """Calls of one flush of ``rows`` step rows (and one system sample): drain, encode, write."""
    nan = float("nan")
    b = Buffers(1_764_000_000_000_000_000)
    for i in range(rows):
        b.add_step((i, 10**13 + i, 10**13 + i + 500, 64.0, nan, nan, 1234567, 2345678, 345678, nan, 0, 0, 2345678,
                    2456789))
    b.add_sample({"t_ns": 1, "rss_bytes": 1.0, "cpu_process_pct": 50.0})
    with tempfile.TemporaryDirectory() as d:
        writer = RecordWriter(Path(d) / "rank.jsonl")
        try:
            return count(lambda: writer.append(b.drain()))
        finally:
            writer.close()
