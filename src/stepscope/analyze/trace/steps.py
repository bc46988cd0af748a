"""Per-step times from ``ProfilerStep#N`` and the step-time breakdown of the TensorBoard plugin."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from stepscope.analyze.trace.gpuview import GpuView, KernelType
from stepscope.analyze.trace.intervals import merge_rows
from stepscope.analyze.trace.sets import kind_mask
from stepscope.model.events import EventKind, EventTable

Array = npt.NDArray[Any]
STEP_NAME = re.compile(r"^ProfilerStep\s*#\s*(\d+)$")
DATALOADER = re.compile(r"enumerate\(DataLoader\)|DataLoader|_MultiProcessingDataLoaderIter|dataloader", re.I)
CATEGORIES = ("kernel", "memcpy", "memset", "communication", "runtime", "dataloader", "cpu", "other")
"""Priority order: each instant of a step counts once, in the first category active at that instant."""


@dataclass(frozen=True, slots=True)
class StepTime:
    """One ProfilerStep: wall time on the host (the annotation's duration) and its breakdown.

    breakdown_ns maps each of CATEGORIES to ns; the values add up exactly to dur_ns. kernel: GPU kernels
    other than communication; memcpy/memset: GPU copies/sets; communication: communication kernels;
    runtime: CUDA/HIP runtime calls; dataloader: operators named like DataLoader iteration; cpu: other host
    operators, annotations and Python functions; other: nothing recorded.
    """

    step: int
    start_ns: int
    dur_ns: int
    breakdown_ns: dict[str, int]

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "start_ns": self.start_ns, "dur_ns": self.dur_ns, "breakdown_ns": self.breakdown_ns}


@dataclass(frozen=True, slots=True)
class StepSummary:
    """Steps in order; median/mean/min/max of step duration over all recorded steps (none excluded)."""

    steps: tuple[StepTime, ...]

    def stat(self, fn: Any) -> float | None:
        d = np.asarray([s.dur_ns for s in self.steps], dtype=np.float64)
        return float(fn(d)) if d.size else None

    def to_dict(self) -> dict[str, Any]:
        totals = {c: sum(s.breakdown_ns[c] for s in self.steps) for c in CATEGORIES}
        return {"count": len(self.steps), "median_ns": self.stat(np.median), "mean_ns": self.stat(np.mean),
                "min_ns": self.stat(np.min), "max_ns": self.stat(np.max), "breakdown_total_ns": totals,
                "steps": [s.to_dict() for s in self.steps]}


def profiler_steps(table: EventTable) -> Array:
    """Rows of ProfilerStep#N host annotations, sorted by start."""
    is_step = np.asarray([bool(STEP_NAME.match(n)) for n in table.names], dtype=bool)
    if not is_step.size:
        return np.empty(0, dtype=np.int64)
    host = table["kind"] != EventKind.GPU_USER_ANNOTATION
    return np.flatnonzero(is_step[table["name"]] & host)


def _category_intervals(table: EventTable, gpu: GpuView) -> list[tuple[Array, Array]]:
    kind = table["kind"]
    names_dl = np.asarray([bool(DATALOADER.search(n)) for n in table.names], dtype=bool)
    dl = names_dl[table["name"]] if names_dl.size else np.zeros(len(table), dtype=bool)
    ts, dur = table["ts_ns"], table["dur_ns"]
    is_step = np.zeros(len(table), dtype=bool)
    is_step[profiler_steps(table)] = True
    host = kind_mask(kind, (EventKind.CPU_OP, EventKind.USER_ANNOTATION, EventKind.PYTHON_FUNCTION)) & ~is_step
    gk = gpu.kind
    masks = [
        (gk == EventKind.KERNEL) & (gpu.ktype != KernelType.COMMUNICATION) & (gpu.ktype != KernelType.MEMORY),
        (gk == EventKind.MEMCPY) | ((gpu.ktype == KernelType.MEMORY) & (gk != EventKind.MEMSET)),
        gk == EventKind.MEMSET,
        gpu.ktype == KernelType.COMMUNICATION,
    ]
    out = [gpu.merged(m) for m in masks]
    for m in (kind == EventKind.RUNTIME, host & dl, host & ~dl):
        out.append(merge_rows(ts, dur, m))
    return out


def step_summary(table: EventTable, gpu: GpuView) -> StepSummary:
    rows = profiler_steps(table)
    if not rows.size:
        return StepSummary(())
    s0, e0 = table["ts_ns"][rows], _ends(table["ts_ns"], table["dur_ns"], rows)
    cats = _category_intervals(table, gpu)
    # every bound, sorted in place; a repeated value only adds segments of zero width (searchsorted puts each
    # value's start, end and changes at its first copy), so the sums are those over the distinct bounds
    bounds = np.concatenate([s0, e0] + [a for iv in cats for a in iv])
    bounds.sort()
    lo, hi = np.searchsorted(bounds, s0), np.searchsorted(bounds, e0)
    # categories active over each elementary segment [bounds[i], bounds[i + 1]) as a bit mask: each
    # category's merged intervals are disjoint and touching ones joined, so each bound is at most one start
    # or one end of a category: +2^c at its starts, -2^c at its ends, summed up, never carries; the segment
    # counts once, in its lowest category (the first in priority). Masks below 2^7: an int16 column, summed
    # in place.
    ncat = len(cats)
    assert ncat < 15
    active = np.zeros(bounds.size, dtype=np.int16)
    for c, iv in enumerate(cats):
        for sign, x in zip((1, -1), iv):
            active[np.searchsorted(bounds, x)] += sign << c  # distinct positions within one category
    del cats
    np.cumsum(active, out=active, dtype=np.int16)
    lowest = np.full(1 << ncat, len(CATEGORIES) - 1, dtype=np.int8)
    for c in range(ncat - 1, -1, -1):
        lowest[np.arange(lowest.size) & (1 << c) > 0] = c
    label = lowest[active[:-1]]
    del active
    per = np.zeros((rows.size, len(CATEGORIES)), dtype=np.int64)
    for c in range(ncat):
        seg = np.flatnonzero(label == c)
        width = bounds[seg + 1]
        width -= bounds[seg]
        acc = np.concatenate([[0], np.cumsum(width)])
        del width
        per[:, c] = acc[np.searchsorted(seg, hi)] - acc[np.searchsorted(seg, lo)]
        del seg, acc
    per[:, -1] = (e0 - s0) - per[:, :-1].sum(axis=1)
    number = _step_numbers(table.names)[table["name"][rows]]
    return StepSummary(tuple(StepTime(n, s, e - s, dict(zip(CATEGORIES, p)))
                             for n, s, e, p in zip(number.tolist(), s0.tolist(), e0.tolist(), per.tolist())))


def _ends(ts: Array, dur: Array, rows: Array) -> Array:
    """``(ts + dur)[rows]`` without an end column for the whole table."""
    end = dur[rows]
    end += ts[rows]
    return end


def _step_numbers(names: tuple[str, ...]) -> Array:
    """N of each ``ProfilerStep#N`` name (-1 for other names)."""
    return np.asarray([int(m.group(1)) if (m := STEP_NAME.match(n)) else -1 for n in names], dtype=np.int64)
