"""Where per-rank work runs: this process, a local process pool (the default) or a Dask cluster.

:mod:`.base` is the interface, :mod:`.local` and :mod:`.dask` the two implementations, :mod:`.spec`
picks one from the command line, and :mod:`.traceset` reads and analyses a trace set with any of them
(file reading and pools live here, above ``analyze/``, whose functions stay pure).
"""

from stepscope.executor.base import Executor, Outcome
from stepscope.executor.local import LocalExecutor
from stepscope.executor.spec import executor_for

__all__ = ["Executor", "LocalExecutor", "Outcome", "executor_for"]
