"""What the diff needs from one side's profiled window, taken from the trace engine's results.

:func:`window_tables` adapts the trace engine's analysis (``stepscope.analyze.trace``) into
:class:`WindowTables`; the diff itself (``traces.py``) only sees these tables, so it is tested on
hand-built tables as well as on real traces.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True, slots=True)
class OpStat:
    """An operator (or a kernel: ``self_ns``/``total_ns`` None) over the whole window, one rank.

    ``calls``: count; ``self_ns``/``total_ns``: CPU self / total time (ns); ``device_ns``: GPU time of the
    kernels it launched (for a kernel: its own time; None without GPU work); ``component``: by the ordered
    component rules; ``module``: innermost module the time falls in most (None: unknown / outside)."""

    calls: int
    self_ns: float | None
    total_ns: float | None
    device_ns: float | None
    component: str
    module: str | None = None


@dataclass(frozen=True, slots=True)
class ModuleStat:
    """A module path over the window: CPU time (wall time of its calls) and GPU time of its kernels (ns)."""

    type: str | None
    calls: int
    cpu_ns: float
    gpu_ns: float


@dataclass(frozen=True, slots=True)
class WindowTables:
    """One rank's profiled window, reduced for the diff.

    ``steps``: ``ProfilerStep#N`` steps in the window (None: no annotations); ``step_times_ns``: their
    durations; ``outside_*_ns``: window time not inside any top-level module (the explicit other node:
    for CPU, step time outside modules; for GPU, kernel time launched outside modules).
    """

    rank: int
    world_size: int | None
    devices: tuple[str, ...]
    device_memory_bytes: float | None
    steps: int | None
    step_times_ns: np.ndarray
    has_gpu: bool
    gpu_util_pct: float | None
    operators: dict[str, OpStat] = field(default_factory=dict)
    kernels: dict[str, OpStat] = field(default_factory=dict)
    modules: dict[str, ModuleStat] = field(default_factory=dict)
    outside_cpu_ns: float = 0.0
    outside_gpu_ns: float = 0.0


def window_tables(traces: Any) -> WindowTables:
    """The window tables of one side: ``traces`` is a :class:`WindowTables` already, or the trace
    engine's analysis of one rank's trace."""
    if isinstance(traces, WindowTables):
        return traces
    from stepscope.analyze.diff.engine import from_engine

    return from_engine(traces)
