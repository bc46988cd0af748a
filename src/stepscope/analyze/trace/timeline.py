"""The profiled window of one rank as timeline rows, decimated per pixel column for a report's canvas.

Rows: each CPU thread's host events by nesting depth (lanes 0 .. ``MAX_DEPTH - 1``, the last one holding every
deeper event too, drawn over their ancestors there: the leaf operators a critical path runs through), then each
GPU stream's work (kernels, memcpy, memset). Every event gets a *style*: its component for GPU work (the
component rules), its kind for host events.

Decimation (:func:`level`): the window is cut into ``columns`` equal columns. An event at least one column
wide is kept as itself (exact start and duration); the events narrower than a column are merged per (row,
column) into a *run*: the column's busy share (summed durations over the column width, capped at 1), its
dominant style (most time) and how many events it holds; consecutive columns of a row with the same style
and busy tenth form one run. So a level holds at most about ``columns`` items per row whatever the event
count, and at its own column width it draws exactly what the events would paint.

Pure functions over the columnar arrays; nothing here turns events into Python objects.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from stepscope.analyze.trace.nesting import parents
from stepscope.model.events import GPU_WORK_KINDS, EventKind, EventTable
from stepscope.traces.components import ComponentRules

Array = npt.NDArray[Any]

MAX_DEPTH = 4
"""Host nesting lanes drawn per thread; the last holds every deeper event as well."""
MAX_THREADS = 16
"""Threads drawn, the busiest first (others named in ``hidden_threads``)."""
HOST_KINDS = (EventKind.CPU_OP, EventKind.USER_ANNOTATION, EventKind.RUNTIME, EventKind.PYTHON_FUNCTION,
              EventKind.OTHER)
HOST_STYLES = ("cpu operator", "annotation", "runtime call", "python", "other host")
"""Host styles in the order of HOST_KINDS; their codes follow the components'."""


@dataclass(frozen=True, slots=True)
class Row:
    """One drawn row: ``kind`` "cpu" (a thread's nesting lane) or "gpu" (a stream)."""

    label: str
    kind: str
    pid: int
    tid: int
    lane: int


@dataclass(frozen=True, slots=True)
class Events:
    """The drawn events of a rank, sorted by (row, start): parallel arrays."""

    row: Array
    ts: Array
    end: Array
    style: Array
    name: Array
    """Code into the table's names."""
    event: Array
    """Row index into the EventTable (to match the critical path's event indices)."""


@dataclass(frozen=True, slots=True)
class Level:
    """One decimation level. ``columns`` 0: every event exact. Per-row slices: ``exact_at[r]:exact_at[r+1]``
    of the exact arrays, ``runs_at[r]:runs_at[r+1]`` of the run arrays; times in ns from the window start."""

    columns: int
    exact_at: Array
    exact_ts: Array
    exact_dur: Array
    exact_style: Array
    exact_name: Array
    exact_event: Array
    runs_at: Array
    run_col: Array
    run_len: Array
    run_style: Array
    run_busy: Array
    """Busy tenths 1-10 (share of the run's columns covered by its events)."""
    run_count: Array


@dataclass(frozen=True, slots=True)
class TimelineRows:
    """What a timeline draws of one rank: rows, styles, the window and the events."""

    rank: int
    rows: tuple[Row, ...]
    styles: tuple[str, ...]
    """Style names: the components, then HOST_STYLES."""
    components: int
    """How many leading styles are components (GPU work)."""
    start_ns: int
    end_ns: int
    events: Events
    hidden_threads: int

    @property
    def window_ns(self) -> int:
        return self.end_ns - self.start_ns


def _depths(parent: Array, cap: int) -> Array:
    """Nesting depth of each event, capped at ``cap`` (``cap`` + 1 passes of depth[parent] + 1)."""
    depth = np.zeros(parent.size, dtype=np.int64)
    has = parent >= 0
    p = parent[has]
    for _ in range(cap):
        nxt = depth.copy()
        nxt[has] = np.minimum(depth[p] + 1, cap)
        if np.array_equal(nxt, depth):
            break
        depth = nxt
    return depth


def timeline_rows(table: EventTable, rules: ComponentRules | None = None, *, max_depth: int = MAX_DEPTH,
                  max_threads: int = MAX_THREADS) -> TimelineRows:
    """The rows and styled events of one rank's table (see the module docstring)."""
    rules = rules or ComponentRules.defaults()
    kind, stream = table["kind"], table["stream"]
    ts, dur = table["ts_ns"], table["dur_ns"]
    name_comp, comps = rules.codes(table.names)
    n_comp = len(comps)

    gpu = np.flatnonzero(np.isin(kind, np.asarray(GPU_WORK_KINDS, dtype=np.int8)))
    # host events of a real thread: the profiler's own span ("PyTorch Profiler (0)", pid "Spans") has none
    host = np.flatnonzero(np.isin(kind, np.asarray(HOST_KINDS, dtype=np.int8)) & (stream < 0)
                          & ((table["pid"] != -1) | (table["tid"] != -1)))
    rows: list[Row] = []
    parts: list[tuple[Array, Array]] = []  # (event rows, row number of each)

    hidden = 0
    if host.size:
        pid, tid, h_ts = table["pid"][host], table["tid"][host], ts[host]
        h_end = h_ts + dur[host]
        depth = _depths(parents(pid, tid, h_ts, h_end, leaf=kind[host] == EventKind.RUNTIME), max_depth - 1)
        keys, thread = np.unique(np.stack([pid, tid], axis=1), axis=0, return_inverse=True)
        thread = thread.reshape(-1)
        busy = np.bincount(thread, weights=np.where(depth == 0, dur[host], 0).astype(np.float64),
                           minlength=len(keys))
        keep = np.sort(np.argsort(-busy, kind="stable")[:max_threads])  # busiest, shown in (pid, tid) order
        hidden = len(keys) - keep.size
        lanes = np.zeros((len(keys), max_depth), dtype=bool)
        lanes[thread, depth] = True
        row_of = np.full((len(keys), max_depth), -1, dtype=np.int64)
        for t in keep.tolist():
            p, th = int(keys[t, 0]), int(keys[t, 1])
            for d in np.flatnonzero(lanes[t]).tolist():
                row_of[t, d] = len(rows)
                label = f"thread {th}" + (f" (pid {p})" if p >= 0 else "") if d == 0 else \
                    f"depth {d}" + ("+" if d == max_depth - 1 else "")
                rows.append(Row(label, "cpu", p, th, d))
        r = row_of[thread, depth]
        parts.append((host[r >= 0], r[r >= 0]))
    if gpu.size:
        dev, st = table["device"][gpu], stream[gpu]
        keys, lane = np.unique(np.stack([dev, st], axis=1), axis=0, return_inverse=True)
        base = len(rows)
        for d, s in keys.tolist():
            rows.append(Row((f"GPU {d} " if d >= 0 else "") + f"stream {s}", "gpu", int(d), int(s), 0))
        parts.append((gpu, base + lane.reshape(-1)))

    ev = np.concatenate([p[0] for p in parts]) if parts else np.empty(0, dtype=np.int64)
    row = np.concatenate([p[1] for p in parts]) if parts else np.empty(0, dtype=np.int64)
    e_ts = ts[ev]
    order = np.lexsort((e_ts, row))
    ev, row, e_ts = ev[order], row[order], e_ts[order]
    e_end = e_ts + dur[ev]
    k = kind[ev]
    host_code = np.full(len(EventKind), len(HOST_STYLES) - 1, dtype=np.int64)
    for i, hk in enumerate(HOST_KINDS):
        host_code[hk] = i
    on_gpu = np.isin(k, np.asarray(GPU_WORK_KINDS, dtype=np.int8))
    names = table["name"][ev]
    style = np.where(on_gpu, name_comp[names] if len(table.names) else 0, n_comp + host_code[k])
    start = int(e_ts.min()) if ev.size else 0
    end = int(e_end.max()) if ev.size else 0
    return TimelineRows(rank=table.meta.rank, rows=tuple(rows), styles=(*comps, *HOST_STYLES), components=n_comp,
                        start_ns=start, end_ns=end,
                        events=Events(row=row, ts=e_ts, end=e_end, style=style.astype(np.int64), name=names, event=ev),
                        hidden_threads=hidden)


def level(tl: TimelineRows, columns: int) -> Level:
    """The timeline decimated to ``columns`` columns over the window (0: every event exact)."""
    e, n_rows = tl.events, len(tl.rows)
    ts, end = e.ts - tl.start_ns, e.end - tl.start_ns
    dur = end - ts
    width = tl.window_ns / columns if columns else 0.0
    exact = dur >= width if columns else np.ones(ts.size, dtype=bool)
    small = ~exact

    def at(rows: Array) -> Array:
        return np.searchsorted(rows, np.arange(n_rows + 1), side="left")

    x_rows = e.row[exact]
    if not small.any() or not columns:
        empty = np.empty(0, dtype=np.int64)
        return Level(columns, at(x_rows), ts[exact], dur[exact], e.style[exact], e.name[exact], e.event[exact],
                     np.zeros(n_rows + 1, dtype=np.int64), empty, empty, empty, empty, empty)
    s_rows, s_ts, s_dur, s_style = e.row[small], ts[small], dur[small], e.style[small]
    col = np.minimum(((s_ts + s_dur / 2) / width).astype(np.int64), columns - 1)  # placed at its middle
    n_styles = len(tl.styles)
    cell = s_rows * columns + col
    # dominant style per cell: the (cell, style) pair with the most time
    pair, inv = np.unique(cell * n_styles + s_style, return_inverse=True)
    pair_dur = np.bincount(inv.reshape(-1), weights=s_dur.astype(np.float64))
    pair_cell = pair // n_styles
    order = np.lexsort((-pair_dur, pair_cell))
    first = np.ones(order.size, dtype=bool)
    first[1:] = pair_cell[order][1:] != pair_cell[order][:-1]
    cells = pair_cell[order][first]
    dominant = (pair[order][first] % n_styles).astype(np.int64)
    idx = np.searchsorted(cells, cell)
    busy_ns = np.bincount(idx, weights=s_dur.astype(np.float64), minlength=cells.size)
    count = np.bincount(idx, minlength=cells.size)
    tenths = np.clip(np.ceil(np.minimum(busy_ns / width, 1.0) * 10), 1, 10).astype(np.int64)
    c_row, c_col = cells // columns, cells % columns
    # consecutive columns of a row with the same style and tenths: one run
    new = np.ones(cells.size, dtype=bool)
    new[1:] = (c_row[1:] != c_row[:-1]) | (c_col[1:] != c_col[:-1] + 1) | (dominant[1:] != dominant[:-1]) \
        | (tenths[1:] != tenths[:-1])
    starts = np.flatnonzero(new)
    lens = np.diff(np.append(starts, cells.size))
    run_count = np.add.reduceat(count, starts) if starts.size else count[:0]
    run_rows = c_row[starts]
    return Level(columns, at(x_rows), ts[exact], dur[exact], e.style[exact], e.name[exact], e.event[exact],
                 at(run_rows), c_col[starts], c_col[starts + lens - 1] - c_col[starts] + 1, dominant[starts],
                 tenths[starts], run_count)


def items(lv: Level) -> int:
    """Exact events plus runs: what a level costs to embed and draw."""
    return int(lv.exact_ts.size + lv.run_col.size)


def critical_items(tl: TimelineRows, events: Sequence[int]) -> tuple[Array, Array, Array]:
    """(row, start from the window start, duration) of the drawn events among ``events`` (EventTable row
    indices, e.g. a critical path's), in drawing order."""
    want = np.zeros(int(tl.events.event.max()) + 1 if tl.events.event.size else 0, dtype=bool)
    idx = np.asarray([i for i in events if 0 <= i < want.size], dtype=np.int64)
    want[idx] = True
    on = want[tl.events.event] if want.size else np.zeros(0, dtype=bool)
    e = tl.events
    return e.row[on], e.ts[on] - tl.start_ns, e.end[on] - e.ts[on]


def merge_close(row: Array, start: Array, dur: Array, gap: float) -> tuple[Array, Array, Array]:
    """Items of the same row (in row, start order) whose gap is under ``gap`` ns joined into one (0: none)."""
    if not row.size or gap <= 0:
        return row, start, dur
    end = start + dur
    new = np.ones(row.size, dtype=bool)
    new[1:] = (row[1:] != row[:-1]) | (start[1:] - end[:-1] >= gap)
    first = np.flatnonzero(new)
    last_end = np.maximum.reduceat(end, first)
    return row[first], start[first], last_end - start[first]
