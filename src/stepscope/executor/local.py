"""Jobs in this process (one worker) or in a pool of local processes: the default executor.

The pool's processes are forked from this one and share its pages until they write to them. While a pool runs,
the objects this process holds are frozen out of Python's garbage collector (``gc.freeze``): a full collection
in a worker would otherwise write to every one of them and so copy every page of the parent's that holds one
(8.1 MB for a worker forked from a process that has imported stepscope's analyses; 0.4 MB frozen).
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, as_completed
from contextlib import contextmanager
from typing import Any

from stepscope.executor.base import OnDone, Outcome, call

LOST = "its worker process died (twice: killed, or out of memory?) — not analysed"


def default_workers(jobs: int) -> int:
    """Half the CPUs (the other half for the rest of the machine), at most one per job."""
    return max(1, min(jobs, (os.cpu_count() or 1) // 2))


class LocalExecutor:
    """Runs jobs here (``workers`` 1) or in ``workers`` processes. A job whose process dies is retried once
    in a fresh pool, then reported as lost."""

    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers

    @property
    def description(self) -> str:
        return "this process" if self.workers == 1 else f"{self.workers or 'default'} local processes"

    def map(self, fn: Callable[[Any], Any], jobs: Sequence[Any], *,
            on_done: OnDone | None = None) -> list[Outcome[Any]]:
        n = self.workers if self.workers is not None else default_workers(len(jobs))
        out: list[Outcome[Any] | None] = [None] * len(jobs)
        if n <= 1 or len(jobs) <= 1:
            for i, job in enumerate(jobs):
                out[i] = call(fn, job)
                if on_done:
                    on_done()
            return [o for o in out if o is not None]
        todo = list(range(len(jobs)))
        for attempt in range(2):
            todo = _pool_round(fn, jobs, todo, out, min(n, len(todo)), on_done, last=attempt == 1)
            if not todo:
                break
        return [o if o is not None else Outcome(error=LOST) for o in out]

    def close(self) -> None:
        return None


def _pool_round(fn: Callable[[Any], Any], jobs: Sequence[Any], todo: list[int], out: list[Outcome[Any] | None],
                workers: int, on_done: OnDone | None, *, last: bool) -> list[int]:
    """Run the jobs ``todo``; return those lost with a broken pool (to retry), filling ``out`` for the rest."""
    from concurrent.futures.process import BrokenProcessPool, ProcessPoolExecutor  # (multiprocessing: only for a pool)

    lost = []
    with _frozen(), ProcessPoolExecutor(max_workers=workers) as pool:
        futures: dict[Future[Any], int] = {pool.submit(call, fn, jobs[i]): i for i in todo}
        for fut in as_completed(futures):
            i = futures[fut]
            try:
                out[i] = fut.result()
            except BrokenProcessPool:
                lost.append(i)
                if not last:
                    continue
                out[i] = Outcome(error=LOST)
            if on_done:
                on_done()
    return sorted(lost) if not last else []


@contextmanager
def _frozen() -> Iterator[None]:
    """This process's objects left out of garbage collection (here and in the processes forked meanwhile) until
    the block ends; nothing is done where some are frozen already (someone else's setting)."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
