"""Which executor a command uses: ``--dask ADDRESS | local:N``, else the local pool (``--workers``)."""

from __future__ import annotations

import re

from stepscope.errors import UserError
from stepscope.executor.base import Executor
from stepscope.executor.dask import CONNECT_TIMEOUT_S
from stepscope.executor.local import LocalExecutor

_LOCAL = re.compile(r"^local:(\d+)$")
_ADDRESS = re.compile(r"^(?:[a-z][a-z0-9+]*://)?[^\s:/]+:\d+/?$|^[a-z][a-z0-9+]*://\S+$")


def executor_for(*, dask: str | None = None, workers: int | None = None,
                 timeout_s: float = CONNECT_TIMEOUT_S) -> Executor:
    """The executor for ``--dask`` (a scheduler address, or ``local:N`` for a LocalCluster of N processes);
    without it the local pool of ``workers`` processes (None: half the CPUs).

    Raises:
        UserError: a malformed --dask value, --workers below 1 or given with --dask, or a scheduler that does
            not answer.
    """
    if workers is not None and workers < 1:
        raise UserError(f"--workers {workers}: must be 1 or more")
    if dask is None:
        return LocalExecutor(workers)
    if workers is not None:
        raise UserError(f"--workers {workers} sizes the local pool; with --dask {dask} the cluster's workers run "
                        "the ranks — drop one of the two")
    from stepscope.executor.dask import DaskExecutor

    m = _LOCAL.match(dask)
    if m:
        n = int(m.group(1))
        if n < 1:
            raise UserError(f"--dask {dask}: needs 1 or more workers (local:N)")
        return DaskExecutor(local_workers=n)
    if not _ADDRESS.match(dask):
        raise UserError(f"--dask {dask!r}: expected a scheduler address (tcp://host:8786, host:8786) or local:N")
    return DaskExecutor(dask, timeout_s=timeout_s)
