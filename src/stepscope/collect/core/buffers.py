"""In-memory columnar buffers of one rank's records, swapped out whole at each flush."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from itertools import repeat, starmap
from typing import Any

STEP_COLS = ("index", "start_ns", "end_ns", "samples", "tokens", "data_wait_ns", "forward_ns", "backward_ns",
             "optimizer_ns", "comm_ns", "device_ns", "mem_allocated_peak_bytes", "mem_reserved_peak_bytes",
             "epoch", "phase", "thread_cpu_ns", "process_cpu_ns")
StepRow = tuple[int, int, int, float, float, float, float, float, float, float, int, int, float, float]
"""A step as the hot path appends it: (index, perf start ns, perf end ns, samples, tokens, data_wait_ns,
forward_ns, backward_ns, optimizer_ns, comm_ns, epoch, phase, thread_cpu_ns, process_cpu_ns); the device and
memory columns are filled from ``step_device`` records at read time and are None here."""
REGION_COLS = ("path", "step", "start_ns", "duration_ns", "depth")
METRIC_COLS = ("name", "step", "t_ns", "value")
COMM_COLS = ("op", "step", "start_ns", "duration_ns", "bytes", "peer", "group_size", "seq", "tag")


class Buffers:
    """Lists per column per record kind. Appends are plain list appends (the GIL keeps them whole);
    ``drain`` swaps every list under a lock so a flush never sees half a row.

    Steps and regions, the records written on the training thread's hot path, take no lock: ``region_rows``
    and ``step_rows`` are deques (appends and pops are atomic, so a flush takes whole rows only and leaves rows
    appended meanwhile for the next one). Rows hold raw perf-counter times, and ``drain`` turns them into
    columns, converting times to wall clock with ``wall_offset_ns`` (the session clock's fixed perf -> epoch
    offset). ``add_step(row)`` appends a step row."""

    def __init__(self, wall_offset_ns: int = 0) -> None:
        self.lock = threading.Lock()
        self.wall_offset_ns = wall_offset_ns
        self.region_rows: deque[tuple[str, int, int, int, int]] = deque()
        """(path, step, perf start ns, perf end ns, depth)"""
        self.step_rows: deque[StepRow] = deque()
        self.add_step: Callable[[StepRow], None] = self.step_rows.append
        self._reset()

    def _reset(self) -> None:
        self.metrics: dict[str, list[Any]] = {c: [] for c in METRIC_COLS}
        self.comm: dict[str, list[Any]] = {c: [] for c in COMM_COLS}
        self.samples: list[dict[str, Any]] = []
        self.other: list[dict[str, Any]] = []

    def add_region(self, path: str, step: int, t0_perf: int, t1_perf: int, depth: int) -> None:
        self.region_rows.append((path, step, t0_perf, t1_perf, depth))

    def add_metric(self, name: str, step: int, t_ns: int, value: float) -> None:
        m = self.metrics
        with self.lock:
            m["name"].append(name)
            m["step"].append(step)
            m["t_ns"].append(t_ns)
            m["value"].append(value)

    def add_comm(self, row: dict[str, Any]) -> None:
        with self.lock:
            for c in COMM_COLS:
                self.comm[c].append(row.get(c))

    def add_sample(self, sample: dict[str, Any]) -> None:
        with self.lock:
            self.samples.append(sample)

    def add_other(self, record: dict[str, Any]) -> None:
        with self.lock:
            self.other.append(record)

    def drain(self) -> list[dict[str, Any]]:
        """Everything buffered so far as record lines, leaving the buffers empty."""
        with self.lock:
            metrics, comm = self.metrics, self.comm
            samples, other = self.samples, self.other
            self._reset()
        off = self.wall_offset_ns
        steps = _step_cols(_columns(_take(self.step_rows), 14), off)
        regions = _region_cols(_take(self.region_rows), off)
        out: list[dict[str, Any]] = []
        for kind, cols in (("steps", steps), ("regions", regions), ("metrics", metrics), ("comm", comm)):
            if next(iter(cols.values())):
                out.append({"kind": kind, "cols": cols})
        if samples:
            names: list[str] = []
            for s in samples:
                names.extend(k for k in s if k not in names)
            out.append({"kind": "samples", "cols": {n: [s.get(n) for s in samples] for n in names}})
        out.extend(other)
        return out


def _take(q: deque[Any]) -> list[Any]:
    """The rows in ``q`` now, removed from it; rows appended meanwhile wait for the next drain. The loop runs
    in C (``starmap``): no Python call per row on the flush thread."""
    return list(starmap(q.popleft, repeat((), len(q))))


def _columns(rows: list[Any], width: int) -> list[tuple[Any, ...]]:
    """Rows of ``width`` fields turned into ``width`` column tuples (in C, no Python code per row; the record
    encoder writes a tuple as it writes a list, so the columns are not copied into lists)."""
    return list(zip(*rows)) if rows else [() for _ in range(width)]


def _region_cols(rows: list[tuple[str, int, int, int, int]], off: int) -> dict[str, Sequence[Any]]:
    path, step, start, end, depth = _columns(rows, 5)
    return {"path": path, "step": step, "start_ns": [t + off for t in start],
            "duration_ns": [b - a for a, b in zip(start, end, strict=True)], "depth": depth}


def _step_cols(cols: list[tuple[Any, ...]], off: int) -> dict[str, Sequence[Any]]:
    index, start, end, samples, tokens, wait, fwd, bwd, opt, comm, epoch, phase, cpu, pcpu = cols
    none = (None,) * len(index)
    return {"index": index, "start_ns": [t + off for t in start], "end_ns": [t + off for t in end],
            "samples": samples, "tokens": tokens, "data_wait_ns": wait, "forward_ns": fwd, "backward_ns": bwd,
            "optimizer_ns": opt, "comm_ns": comm, "device_ns": none, "mem_allocated_peak_bytes": none,
            "mem_reserved_peak_bytes": none, "epoch": epoch, "phase": phase, "thread_cpu_ns": cpu,
            "process_cpu_ns": pcpu}
