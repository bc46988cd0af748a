"""Launch statistics of one rank: each GPU work item paired with the runtime call that launched it.

Definitions (HolisticTraceAnalysis' documented ones, see docs/traces.md for where its code differs):

- An item (kernel, memcpy, memset) is paired with the runtime call that has its correlation id.
- launch = the call's CPU duration, counted once per call.
- delay = item start − call end, clipped at 0 (an item that starts while its call is still running was not
  kept waiting).
- A call that launched more than one item (``cudaGraphLaunch`` / ``hipGraphLaunch``: one call, a whole graph
  of kernels) is one launch. Each of its items gets its own delay from the call's end; for "launch-bound"
  the call's duration is shared out over its items (a graph launch of 20 kernels costs each kernel 1/20 of
  the call, not the whole call).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from stepscope.analyze.trace.gpuview import GpuView
from stepscope.analyze.trace.sets import unique_inverse
from stepscope.model.events import EventKind, EventTable

Array = npt.NDArray[Any]

LONG_LAUNCH_NS = 50_000
"""HTA's ``runtime_cutoff`` (50 µs): a launch call longer than this is a runtime outlier."""
LONG_DELAY_NS = 100_000
"""HTA's ``launch_delay_cutoff`` (100 µs): an item that waited longer than this after its call ended."""
HTA_LAUNCH_CALLS = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cudaMemcpyAsync", "cudaMemsetAsync",
                    "runFunction - job_prep_and_submit_for_execution")
"""The only calls HTA 0.5's ``get_cuda_kernel_launch_stats`` pairs (memory calls included, its default; the
last is MTIA's kernel launch). ROCm calls, ``cuLaunchKernel`` and graph launches are not among them."""
GRAPH_LAUNCH = re.compile(r"GraphLaunch", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class LaunchStats:
    """GPU work items paired with their launching runtime call by correlation id (trace timings, ns).

    items: GPU work items (kernels, memcpy, memset) considered; matched: those paired with a call.
    launches: distinct launching calls (a graph launch counts once); graph_launches: calls that launched
    more than one item or are named ``*GraphLaunch``; graph_items: the items those launched.
    launch_total_ns: summed CPU duration of the launching calls (host time spent launching).
    launch_p50/p95_ns: CPU duration of the launching calls, one value per call.
    gpu_p50/p95_ns: duration of the matched items. delay_p50/p95_ns: item start − call end, clipped at 0,
    one value per matched item. short_items: items shorter than their share of the call (the call's
    duration divided by the items it launched): launch-bound work; short_item_gpu_pct: their share of the
    summed duration of all items. kernels: the items that are kernels (not memcpy / memset); short_kernels:
    those among short_items (the advisor's launch-bound kernels); kernel_p50_ns: their median duration.
    long_launches: calls longer than launch_threshold_ns; long_delays: items
    whose delay exceeds delay_threshold_ns (HTA's 50 µs and 100 µs cut-offs). p50/p95 are NumPy's linear
    percentiles; None when nothing was matched.
    """

    items: int
    matched: int
    launches: int
    graph_launches: int
    graph_items: int
    launch_total_ns: int
    launch_p50_ns: float | None
    launch_p95_ns: float | None
    gpu_p50_ns: float | None
    gpu_p95_ns: float | None
    delay_p50_ns: float | None
    delay_p95_ns: float | None
    short_items: int
    short_item_gpu_pct: float | None
    kernels: int
    short_kernels: int
    kernel_p50_ns: float | None
    long_launches: int
    long_delays: int
    launch_threshold_ns: int = LONG_LAUNCH_NS
    delay_threshold_ns: int = LONG_DELAY_NS

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}


def _q(a: Array, q: float) -> float | None:
    return percentile(a, q) if a.size else None


def percentile(a: Array, q: float) -> float:
    """``float(np.percentile(a, q))`` (linear method) of a non-empty 1-d array of integers, figure for figure:
    the same virtual index, neighbours and interpolation as NumPy's, done on two values of a sorted copy.
    (NumPy's own call imports numpy.ma on first use, through ``np.unique``: a worker's first rank would keep
    that module's memory for good.)"""
    s = np.sort(a)
    vi = (s.size - 1) * np.true_divide(q, 100)
    lo = int(np.floor(vi))
    if vi >= s.size - 1:
        lo = -1
    below, above = s[lo], s[lo + 1 if lo >= 0 else -1]
    gamma = float(vi - lo)
    diff = above - below
    if gamma >= 0.5:
        return float(above - diff * (1 - gamma))
    return float(below + diff * gamma)


def launch_calls(table: EventTable, names: Collection[str] | None = None) -> Array:
    """Rows of runtime calls with a correlation id (only those named in ``names`` when given), sorted by id."""
    sel = (table["kind"] == EventKind.RUNTIME) & (table["correlation"] >= 0)
    if names is not None:
        wanted = np.asarray([n in names for n in table.names], dtype=bool)
        sel &= wanted[table["name"]] if wanted.size else np.zeros(len(table), dtype=bool)
    rows = np.flatnonzero(sel)
    return rows[np.argsort(table["correlation"][rows], kind="stable")]


def pair_calls(table: EventTable, items: Array, calls: Array) -> Array:
    """For each item row, the row of its launching call (``calls`` sorted by correlation id), -1 where none."""
    out = np.full(items.size, -1, dtype=np.int64)
    if not calls.size or not items.size:
        return out
    corr = table["correlation"][calls]
    want = table["correlation"][items]
    i = np.clip(np.searchsorted(corr, want), 0, corr.size - 1)
    hit = (corr[i] == want) & (want >= 0)
    out[hit] = calls[i[hit]]
    return out


def launch_stats(table: EventTable, gpu: GpuView, *, calls: Collection[str] | None = None) -> LaunchStats | None:
    """Launch statistics of the GPU work in ``gpu``; None without GPU work.

    calls: restrict the pairing to runtime calls of these names (``HTA_LAUNCH_CALLS`` reproduces HTA's
    selection); by default every runtime call that launched GPU work counts (``cudaLaunchKernelExC``,
    ``cuLaunchKernel``, ``hipLaunchKernel``, graph launches, ...).
    """
    items = gpu.rows
    if not items.size:
        return None
    call = pair_calls(table, items, launch_calls(table, calls))
    hit = call >= 0
    if calls is not None:  # HTA's figures: only the items its named calls launched
        items, call, hit = items[hit], call[hit], hit[hit]
    m_items, m_call = items[hit], call[hit]
    uniq, inverse, per_call = unique_inverse(m_call)
    call_dur = table["dur_ns"][uniq]
    graph = per_call > 1
    if uniq.size:
        named = np.asarray([bool(GRAPH_LAUNCH.search(n)) for n in table.names], dtype=bool)
        graph |= named[table["name"][uniq]]
    item_dur = table["dur_ns"][m_items]
    call_end = table["ts_ns"][m_call] + table["dur_ns"][m_call]
    delay = np.maximum(table["ts_ns"][m_items] - call_end, 0)
    share = call_dur[inverse] / per_call[inverse] if m_items.size else np.zeros(0)
    short = item_dur < share
    kernel = table["kind"][items] == EventKind.KERNEL
    kernel_dur = table["dur_ns"][items[kernel]]
    total = float(table["dur_ns"][items].sum())
    return LaunchStats(
        items=int(items.size), matched=int(m_items.size), launches=int(uniq.size),
        graph_launches=int(graph.sum()), graph_items=int(per_call[graph].sum()),
        launch_total_ns=int(call_dur.sum()), launch_p50_ns=_q(call_dur, 50), launch_p95_ns=_q(call_dur, 95),
        gpu_p50_ns=_q(item_dur, 50), gpu_p95_ns=_q(item_dur, 95),
        delay_p50_ns=_q(delay, 50), delay_p95_ns=_q(delay, 95),
        short_items=int(short.sum()),
        short_item_gpu_pct=100.0 * float(item_dur[short].sum()) / total if total else None,
        kernels=int(kernel.sum()), short_kernels=int((short & (table["kind"][m_items] == EventKind.KERNEL)).sum()),
        kernel_p50_ns=_q(kernel_dur, 50),
        long_launches=int((call_dur > LONG_LAUNCH_NS).sum()), long_delays=int((delay > LONG_DELAY_NS).sum()),
    )


__all__ = ["HTA_LAUNCH_CALLS", "LONG_DELAY_NS", "LONG_LAUNCH_NS", "LaunchStats", "launch_calls", "launch_stats",
           "pair_calls"]
