"""The executor interface: run one function over many jobs somewhere, and say what came back.

One interface, several places to run (:mod:`.local`: this process or a process pool; :mod:`.dask`: a
Dask cluster), so a trace set is analysed by the same code path wherever it runs. A job that raised or
whose worker was lost comes back as an :class:`Outcome` with ``error`` set: never silently missing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

J = TypeVar("J")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


@dataclass(frozen=True, slots=True)
class Outcome(Generic[R_co]):
    """What came back for one job: its value, or one line saying why there is none."""

    value: R_co | None = None
    error: str | None = None


OnDone = Callable[[], None]
"""Called in the caller's process once per job finished (for a progress bar), in completion order."""


class Executor(Protocol):
    """Runs ``fn`` over ``jobs`` and returns one :class:`Outcome` per job, in job order.

    ``fn`` and the jobs must be picklable (a top-level function, or a ``functools.partial`` of one), and
    the values small: they travel back to the caller.
    """

    @property
    def description(self) -> str:
        """Where the jobs run, for messages (``"4 local processes"``, ``"Dask tcp://h:8786 (8 workers)"``)."""
        ...

    def map(self, fn: Callable[[Any], Any], jobs: Sequence[Any], *,
            on_done: OnDone | None = None) -> list[Outcome[Any]]: ...

    def close(self) -> None: ...


def failure(exc: BaseException) -> str:
    """One line for a job that raised."""
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def call(fn: Callable[[Any], Any], job: Any) -> Outcome[Any]:
    """``fn(job)`` as an Outcome: its value, or the one-line error of the exception it raised."""
    try:
        return Outcome(value=fn(job))
    except Exception as exc:  # a bug or an unexpected input in one job must not stop the others
        return Outcome(error=failure(exc))
