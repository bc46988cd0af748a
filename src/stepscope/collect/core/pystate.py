"""The step in progress (:class:`StepState`), :class:`Session`'s base class (:class:`SessionCore`) and a DataLoader
pass (:class:`PassState`): the state the step hooks read and write."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from stepscope.collect.core.options import Options


class StepState:
    """Accumulators of the step in progress (perf-counter ns). ``cpu0`` / ``pcpu0``: the stepping thread's and the
    process's CPU time (ns) where the step started, -1 when it started elsewhere than at a step boundary (its CPU
    time is then not measured)."""

    __slots__ = (
        "backward",
        "comm",
        "cpu0",
        "data_wait",
        "epoch",
        "fetched",
        "forward",
        "optimizer",
        "pcpu0",
        "samples",
        "start",
        "tokens",
    )

    def __init__(self, start: int | None, epoch: int, cpu0: int = -1, pcpu0: int = -1) -> None:
        self.start = start
        self.epoch = epoch
        self.cpu0 = cpu0
        self.pcpu0 = pcpu0
        self.data_wait: Any = 0
        self.forward = 0
        self.backward = 0
        self.optimizer = 0
        self.comm = 0
        self.fetched = False
        self.samples: float = 0.0
        self.tokens: float = 0.0


class PassState:
    """One pass of a DataLoader (one iterator) as the loader hooks count it (loader.py)."""

    __slots__ = ("batches", "epoch", "key", "token")

    def __init__(self, key: int, token: int) -> None:
        self.key = key
        """the loader's id"""
        self.token = token
        """the pass's number in this process (not id(): a peeked iterator's id is reused at once)"""
        self.batches = 0
        """batches it yielded so far"""
        self.epoch: int | None = None
        """its epoch, once confirmed (None: not yet)"""


class SessionCore:
    """The attributes of a session that the step hooks read."""

    step: Any
    active: bool
    disabled: bool
    api_fetch: bool
    step_source: str | None
    extras: list[Callable[[], object]]
    step_index: int
    epoch: int
    options: Options
    step_row: Callable[[Any], None]
