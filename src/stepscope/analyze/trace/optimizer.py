"""The optimizer step of one rank: PyTorch's ``Optimizer.step#<Class>.step`` annotations and the GPU work
launched inside them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from stepscope.analyze.trace.gpuview import GpuView
from stepscope.analyze.trace.intervals import length, merge, unique_sorted
from stepscope.analyze.trace.launches import launch_calls, pair_calls
from stepscope.model.events import EventKind, EventTable

OPTIMIZER_STEP = re.compile(r"^Optimizer\.step#")
FUSED_OPTIMIZER = re.compile(r"multi_tensor_apply|fused|foreach", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class OptimizerStats:
    """steps: ``Optimizer.step#`` host annotations. dur_ns: the union of their intervals. launches: distinct
    runtime calls that launched GPU work (as in LaunchStats) and started inside one of them. fused: an
    annotation's name says multi_tensor_apply / fused / foreach."""

    steps: int
    dur_ns: int
    launches: int
    fused: bool

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}


def optimizer_stats(table: EventTable, gpu: GpuView) -> OptimizerStats:
    named = np.asarray([bool(OPTIMIZER_STEP.search(n)) for n in table.names], dtype=bool)
    if not named.size or not len(table):
        return OptimizerStats(0, 0, 0, False)
    opt = named[table["name"]] & (table["kind"] == EventKind.USER_ANNOTATION)
    starts = table["ts_ns"][opt]
    starts, ends = merge(starts, starts + table["dur_ns"][opt])
    calls = unique_sorted(pair_calls(table, gpu.rows, launch_calls(table)))
    calls = calls[calls >= 0]
    cts = table["ts_ns"][calls]
    i = np.searchsorted(starts, cts, side="right") - 1
    inside = (i >= 0) & (cts < ends[np.maximum(i, 0)]) if starts.size else np.zeros(0, dtype=bool)
    fused = any(FUSED_OPTIMIZER.search(table.names[c]) for c in unique_sorted(table["name"][opt]).tolist())
    return OptimizerStats(int(opt.sum()), int(length(starts, ends)), int(inside.sum()), fused)
