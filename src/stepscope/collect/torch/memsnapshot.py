"""CUDA memory snapshots: `stepscope run --memory-snapshot N`.

Records the CUDA caching allocator's history (every alloc / free with its Python and C++ stack) with
``torch.cuda.memory._record_memory_history`` for N training steps, then dumps it with
``torch.cuda.memory._dump_snapshot`` to ``artifacts/memory/rank<R>.pickle``; drag that file onto
https://pytorch.org/memory_viz to see the allocation timeline and the state of every segment.

Recording starts at the first step boundary at which this process uses CUDA (starting earlier would
create a CUDA context on the default device before a distributed script picks its own), so the window
covers training steps k+1 .. k+N; memory allocated before (weights, optimizer state) appears in the
snapshot's segments, without a stack trace. A process ending inside the window dumps what it has.
Without CUDA the option warns once and the run goes on. Recording costs a stack capture per allocation
(a few microseconds each) during the window only; the dump takes about a second per 100k entries.

Record: ``{"kind": "memory_snapshot", "path": "artifacts/memory/rank0.pickle", "first_step": k+1,
"last_step": k+N, "bytes": size, "dump_s": seconds}``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from stepscope.collect.core.session import Session

MAX_ENTRIES = 200_000
"""Ring-buffer size of the allocator history (older entries are dropped first)."""

NO_GPU = "--memory-snapshot needs a CUDA GPU: this process has none, so no memory snapshot is recorded"


def snapshot_path(run_dir: Path, rank: int) -> Path:
    from stepscope.store.rundir import ARTIFACTS  # here: the store is not imported before a run records

    return run_dir / ARTIFACTS / "memory" / f"rank{rank}.pickle"


class MemorySnapshot:
    """Starts and stops the allocator history from step boundaries (Session.extras)."""

    def __init__(self, session: Session, steps: int) -> None:
        import torch

        self.torch: Any = torch
        self.session = session
        self.steps = steps
        self.first_step: int | None = None
        self.done = False

    def on_step(self) -> None:
        if self.done:
            return
        s = self.session
        if self.first_step is None:
            if not self.torch.cuda.is_initialized():
                return
            self.torch.cuda.memory._record_memory_history(max_entries=MAX_ENTRIES)
            self.first_step = s.step_index
        elif s.step_index >= self.first_step + self.steps:
            self.dump()

    def dump(self) -> None:
        if self.done or self.first_step is None:
            self.done = True
            return
        self.done = True
        s = self.session
        rank = s.stream.rank if s.stream is not None else 0
        path = snapshot_path(s.run_dir, rank)
        path.parent.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        try:
            self.torch.cuda.memory._dump_snapshot(str(path))
        finally:
            self.torch.cuda.memory._record_memory_history(enabled=None)
        s.record("memory_snapshot", path=str(path.relative_to(s.run_dir)), first_step=self.first_step,
                 last_step=min(s.step_index, self.first_step + self.steps) - 1,
                 bytes=path.stat().st_size, dump_s=time.perf_counter() - t0)


def install_memory_snapshot(session: Session) -> None:
    """Arm the snapshot window when --memory-snapshot N > 0; without CUDA say so once and go on."""
    n = session.options.memory_snapshot_steps
    if n <= 0:
        return
    import torch

    if not torch.cuda.is_available():
        # Said at the first step, so only processes that train say it.
        session.extras.append(lambda: session.warn_once("memory-snapshot", NO_GPU))
        return
    snap = MemorySnapshot(session, n)

    def on_step() -> None:
        try:
            snap.on_step()
        except Exception as e:
            snap.done = True
            session.warn_once("memory-snapshot", f"the memory snapshot failed ({e})")

    def close() -> Any:
        try:
            snap.dump()
        except Exception as e:
            session.warn_once("memory-snapshot", f"the memory snapshot could not be saved ({e})")

    session.extras.append(on_step)
    session.closers.insert(0, close)
