"""Jobs on a Dask cluster (the optional ``stepscope[dask]`` extra): an existing scheduler, or a LocalCluster.

Each job is one task; only its (small) value travels back to this process. The scheduler reruns a task
whose worker died on another worker (up to its ``allowed-failures``, 3 by default); a task that still
fails (``KilledWorker``) or raises comes back as an error naming it, so nothing goes silently missing.
Workers must be able to import stepscope (install it in the workers' environment).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from stepscope.errors import UserError
from stepscope.executor.base import OnDone, Outcome, failure

CONNECT_TIMEOUT_S = 10.0
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
            self._cluster = distributed.LocalCluster(
                n_workers=local_workers, threads_per_worker=1, processes=True, dashboard_address=None,
                silence_logs=logging.ERROR)
            self.client: Any = distributed.Client(self._cluster)
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
        futures = self.client.map(fn, list(jobs), pure=False, retries=RETRIES)
        index = {f.key: i for i, f in enumerate(futures)}
        out: list[Outcome[Any]] = [Outcome(error="not run")] * len(jobs)
        # with_results: the client fetches each value in the background as its task finishes, instead of one
        # blocking round trip to a worker per result
        for fut, value in distributed.as_completed(futures, with_results=True, raise_errors=False):
            i = index[fut.key]
            if fut.status == "finished":
                out[i] = Outcome(value=value)
            else:
                out[i] = Outcome(error=f"failed on the cluster ({_why(fut.status, value)})")
            fut.release()
            if on_done:
                on_done()
        return out

    def close(self) -> None:
        self.client.close()
        if self._cluster is not None:
            self._cluster.close()


def _why(status: str, value: Any) -> str:
    """The exception of an erred task (as_completed gives (type, exception, traceback)), else its status."""
    if isinstance(value, tuple) and len(value) == 3 and isinstance(value[1], BaseException):
        return failure(value[1])
    return f"task {status}"

