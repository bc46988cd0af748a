"""Jobs on a Dask cluster (the optional ``stepscope[dask]`` extra): an existing scheduler, or a LocalCluster.

Jobs travel in batches of up to :data:`BATCH_MAX` per task (each worker still gets several tasks, for
balance), so a set of thousands of small ranks does not pay the scheduler's per-task cost for each; only
the (small) values travel back to this process. A job that raises is one error in its batch, the others
keep their values. The scheduler reruns a task whose worker died on another worker (up to its
``allowed-failures``, 3 by default); a task that still fails (``KilledWorker``) comes back as an error for
each of its jobs, so nothing goes silently missing. Workers must be able to import stepscope (install it
in the workers' environment).

A cluster that cannot start (a worker that dies at start-up, a temporary folder it cannot write) is one line
(:class:`~stepscope.errors.UserError`, exit code 2); so is a scheduler that does not answer. Dask's own log
lines (a heartbeat that fails while the cluster shuts down) are silenced: a LocalCluster's workers log only
CRITICAL, and this process's ``distributed`` loggers are quiet while the cluster closes.

A LocalCluster started here runs its workers without Dask's statistical profiler, which samples every
worker thread's stack every 10 ms: on the per-rank analyses it cost 20-40 % more CPU in the task's thread
than the same job in a local pool process (figures in docs/traces.md). A cluster given by address keeps its
own configuration (set ``distributed.worker.profile.enabled: false`` there for the same gain).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any

from stepscope.errors import UserError
from stepscope.executor.base import OnDone, Outcome, call, failure

CONNECT_TIMEOUT_S = 10.0
BATCH_MAX = 8
"""Most jobs per task."""
TASKS_PER_WORKER = 4
"""Batches are sized so that each worker gets about this many tasks (load balance, progress granularity)."""
_LOCAL_CONFIG = {"distributed.worker.profile.enabled": False}
"""A LocalCluster's workers run without the statistical profiler (see the module's docstring)."""
RETRIES = 1
"""Extra attempts of a task that raised on its worker (a worker's death is retried by the scheduler)."""


def _distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise UserError("--dask needs Dask's distributed scheduler — pip install 'stepscope[dask]'") from None
    return distributed


class DaskExecutor:
    """Tasks on the Dask scheduler at ``address``, or on a new LocalCluster of ``local_workers`` processes.

    Raises:
        UserError: the scheduler did not answer within ``timeout_s``, or Dask is not installed.
    """

    def __init__(self, address: str | None = None, *, local_workers: int | None = None,
                 timeout_s: float = CONNECT_TIMEOUT_S) -> None:
        distributed = _distributed()
        self._cluster: Any = None
        if local_workers is not None:
            try:
                with _quiet():
                    # config: each nanny passes it to its worker, and again to the one it starts after a death
                    self._cluster = distributed.LocalCluster(
                        n_workers=local_workers, threads_per_worker=1, processes=True, dashboard_address=None,
                        silence_logs=logging.CRITICAL, config=_LOCAL_CONFIG)
                    self.client: Any = distributed.Client(self._cluster)
            except Exception as exc:  # the cluster's own start-up errors (RuntimeError: Nanny failed to start, ...)
                self.close()
                raise UserError(f"--dask local:{local_workers}: the Dask cluster could not start ({_cause(exc)}) — "
                                "a worker died at start-up: check that it can import stepscope and write its "
                                "temporary folder (DASK_TEMPORARY_DIRECTORY)") from None
            self._where = f"Dask LocalCluster ({local_workers} worker processes)"
            return
        try:
            self.client = distributed.Client(address, timeout=timeout_s)
        except (OSError, TimeoutError) as exc:
            raise UserError(f"--dask {address}: no Dask scheduler answered within {timeout_s:g} s "
                            f"({failure(exc)}) — check the address, or use --dask local:N") from None
        self._where = f"Dask {address}"

    @property
    def description(self) -> str:
        return self._where

    def map(self, fn: Callable[[Any], Any], jobs: Sequence[Any], *,
            on_done: OnDone | None = None) -> list[Outcome[Any]]:
        distributed = _distributed()
        batches = batched(len(jobs), batch_size(len(jobs), self._workers()))
        futures = self.client.map(partial(run_batch, fn), [[jobs[i] for i in b] for b in batches], pure=False,
                                  retries=RETRIES)
        index = {f.key: b for f, b in zip(futures, batches, strict=True)}
        out: list[Outcome[Any]] = [Outcome(error="not run")] * len(jobs)
        # with_results: the client fetches each value in the background as its task finishes, instead of one
        # blocking round trip to a worker per result
        for fut, value in distributed.as_completed(futures, with_results=True, raise_errors=False):
            where = index[fut.key]
            if fut.status == "finished":
                for i, o in zip(where, value, strict=True):
                    out[i] = o
            else:
                for i in where:
                    out[i] = Outcome(error=f"failed on the cluster ({_why(fut.status, value)})")
            fut.release()
            if on_done is not None:
                for _ in where:
                    on_done()
        return out

    def _workers(self) -> int:
        return max(1, len(self.client.scheduler_info().get("workers", {})))

    def close(self) -> None:
        """Close the client and the cluster started here; what goes wrong on the way out (a worker already gone,
        a heartbeat that finds the scheduler closed) is nobody's business any more."""
        with _quiet():
            for part in (getattr(self, "client", None), self._cluster):
                if part is not None:
                    try:
                        part.close()
                    except Exception:  # closing: every part is tried, none can be saved
                        pass


@contextmanager
def _quiet() -> Iterator[None]:
    """This process's ``distributed`` loggers at CRITICAL for the block (start-up and shut-down chatter)."""
    log = logging.getLogger("distributed")
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        log.setLevel(level)


def _cause(exc: BaseException) -> str:
    """One line: the exception and, where it wraps one (Nanny failed to start <- failed to start worker), its
    innermost cause."""
    inner = exc
    while inner.__cause__ is not None and inner.__cause__ is not inner:
        inner = inner.__cause__
    return failure(exc) if inner is exc else f"{failure(exc).rstrip('.')} — {failure(inner)}"


def batch_size(jobs: int, workers: int) -> int:
    """Jobs per task: about TASKS_PER_WORKER tasks per worker, at most BATCH_MAX jobs each."""
    return max(1, min(BATCH_MAX, jobs // (workers * TASKS_PER_WORKER)))


def batched(jobs: int, size: int) -> list[list[int]]:
    """Job indices ``0..jobs-1`` in consecutive batches of ``size`` (the last one shorter)."""
    return [list(range(i, min(i + size, jobs))) for i in range(0, jobs, size)]


def run_batch(fn: Callable[[Any], Any], jobs: list[Any]) -> list[Outcome[Any]]:
    """A task: ``fn`` over its jobs, one after the other, each failure an error of its own job."""
    return [call(fn, job) for job in jobs]


def _why(status: str, value: Any) -> str:
    """The exception of an erred task (as_completed gives (type, exception, traceback)), else its status."""
    if isinstance(value, tuple) and len(value) == 3 and isinstance(value[1], BaseException):
        return failure(value[1])
    return f"task {status}"

