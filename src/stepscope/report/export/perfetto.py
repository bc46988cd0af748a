"""Chrome-trace / Perfetto JSON of a run: open it in ui.perfetto.dev or chrome://tracing.

Layout: one process per rank (pid = rank, named ``rank R (host, pid P)``) with threads ``steps`` (one slice
per step, phases in args), ``regions`` (nested slices), ``communication``; system metrics and user metrics as
counter tracks of that process; the profiled window (Kineto trace) as a second process per rank
(pid = 100000 + rank, ``rank R profiled window``) with one thread per GPU stream and one per host thread,
shifted onto the run's clock. Timestamps are µs since the run's start (wall clock).

Size is bounded for long runs: at most ``MAX_SLICES`` step/region/comm slices and ``MAX_COUNTER_POINTS``
points per counter per rank (every k-th kept), and at most ``MAX_TRACE_EVENTS`` window events per rank
(the longest kept). What was thinned is stated in ``otherData.downsampling``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from stepscope.errors import UserError
from stepscope.model.events import EventKind, EventTable
from stepscope.model.tables import RankData, RunData

MAX_SLICES = 100_000
MAX_COUNTER_POINTS = 20_000
MAX_TRACE_EVENTS = 200_000
WINDOW_PID = 100_000
TID_STEPS, TID_REGIONS, TID_COMM = 1, 2, 3
PHASES = ("data_wait", "forward", "backward", "optimizer", "comm")


def _stride(n: int, limit: int) -> int:
    return max(1, -(-n // limit))


def _us(ns: Any) -> float:
    return round(float(ns) / 1e3, 3)


def _meta(pid: int, name: str, tid: int) -> dict[str, Any]:
    return {"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": name}}


def align_window(table: EventTable, rank: RankData) -> tuple[int, str]:
    """Offset (ns) that moves the trace's clock onto the run's wall clock, and how it was found.

    Matches the first ``ProfilerStep#k`` annotation to the start of the run's step ``k + offset`` (offset:
    the profiler_step_offset recorded with the window); else treats epoch-like trace times as wall clock;
    else puts the window at the start of its first recorded step.
    """
    ann = table.take(table["kind"] == EventKind.USER_ANNOTATION)
    recs = rank.extra.get("profile_window", [])
    offset = int(recs[0].get("profiler_step_offset", 0)) if recs else 0
    steps = rank.steps
    for code, ts in zip(ann["name"].tolist(), ann["ts_ns"].tolist(), strict=True):
        name = ann.names[code]
        if name.startswith("ProfilerStep#") and name[13:].isdigit():
            idx = np.flatnonzero(steps["index"] == int(name[13:]) + offset)
            if len(idx):
                return int(steps["start_ns"][idx[0]]) - int(ts), "ProfilerStep annotation matched to the step"
            break
    if len(table) and table["ts_ns"].min() > 1e17:
        return 0, "trace timestamps are wall clock"
    first = int(recs[0].get("first_step", 0)) if recs else 0
    idx = np.flatnonzero(steps["index"] == first)
    start = int(steps["start_ns"][idx[0]]) if len(idx) else int(rank.stream.start_ns)
    return start - (int(table["ts_ns"].min()) if len(table) else 0), "window placed at its first step (approximate)"


def _comm_args(tab: Any, i: int) -> dict[str, Any]:
    """Step, payload bytes, peer and sequence number of one communication call (those recorded)."""
    args: dict[str, Any] = {"step": int(tab["step"][i]), "seq": int(tab["seq"][i])}
    if np.isfinite(tab["bytes"][i]):
        args["bytes"] = float(tab["bytes"][i])
    if tab["peer"][i] >= 0:
        args["peer"] = int(tab["peer"][i])
    return args


def _rank_events(r: RankData, t0: int, thinned: dict[str, Any]) -> list[dict[str, Any]]:
    pid = r.stream.rank
    ev: list[dict[str, Any]] = [
        {"ph": "M", "pid": pid, "name": "process_name",
         "args": {"name": f"rank {pid} ({r.stream.host}, pid {r.stream.pid})"}},
        {"ph": "M", "pid": pid, "name": "process_sort_index", "args": {"sort_index": pid}},
        _meta(pid, "steps", TID_STEPS), _meta(pid, "regions", TID_REGIONS), _meta(pid, "communication", TID_COMM)]
    st = r.steps
    k = _stride(len(st), MAX_SLICES)
    thinned[f"rank{pid}.steps"] = {"total": len(st), "kept": len(range(0, len(st), k)), "every": k}
    for i in range(0, len(st), k):
        args = {f"{p}_ms": round(float(st[f"{p}_ns"][i]) / 1e6, 4) for p in PHASES if np.isfinite(st[f"{p}_ns"][i])}
        if np.isfinite(st["samples"][i]):
            args["samples"] = float(st["samples"][i])
        ev.append({"ph": "X", "pid": pid, "tid": TID_STEPS, "cat": "step",
                   "name": f"{'validation ' if st['phase'][i] == 1 else ''}step {int(st['index'][i])}",
                   "ts": _us(st["start_ns"][i] - t0), "dur": _us(st["end_ns"][i] - st["start_ns"][i]), "args": args})
    for label, tab, tid, key in (("regions", r.regions, TID_REGIONS, "path"), ("comm", r.comm, TID_COMM, "op")):
        k = _stride(len(tab), MAX_SLICES)
        thinned[f"rank{pid}.{label}"] = {"total": len(tab), "kept": len(range(0, len(tab), k)), "every": k}
        names = tab.column_strings()
        for i in range(0, len(tab), k):
            name = names[i].rsplit("/", 1)[-1] if key == "path" else names[i]
            ev.append({"ph": "X", "pid": pid, "tid": tid, "cat": label, "name": name,
                       "ts": _us(tab["start_ns"][i] - t0), "dur": _us(tab["duration_ns"][i]),
                       "args": {"path": names[i]} if key == "path" else _comm_args(tab, i)})
    smp = r.samples
    k = _stride(len(smp), MAX_COUNTER_POINTS)
    thinned[f"rank{pid}.samples"] = {"total": len(smp), "kept": len(range(0, len(smp), k)), "every": k}
    for name, col in sorted(smp.columns.items()):
        for i in range(0, len(smp), k):
            if np.isfinite(col[i]):
                ev.append({"ph": "C", "pid": pid, "name": name, "ts": _us(smp.t_ns[i] - t0),
                           "args": {"value": float(col[i])}})
    mt = r.metrics
    k = _stride(len(mt), MAX_COUNTER_POINTS)
    thinned[f"rank{pid}.metrics"] = {"total": len(mt), "kept": len(range(0, len(mt), k)), "every": k}
    names = mt.column_strings()
    for i in range(0, len(mt), k):
        if np.isfinite(mt["value"][i]):
            ev.append({"ph": "C", "pid": pid, "name": f"metric {names[i]}", "ts": _us(mt["t_ns"][i] - t0),
                       "args": {"value": float(mt["value"][i])}})
    return ev


def _window_events(table: EventTable, r: RankData, t0: int, thinned: dict[str, Any],
                   clocks: dict[str, str]) -> list[dict[str, Any]]:
    rank = r.stream.rank
    pid = WINDOW_PID + rank
    shift, how = align_window(table, r)
    clocks[f"rank{rank}"] = how
    keep = np.arange(len(table))
    if len(table) > MAX_TRACE_EVENTS:
        keep = np.sort(np.argsort(-table["dur_ns"], kind="stable")[:MAX_TRACE_EVENTS])
    thinned[f"rank{rank}.window"] = {"total": len(table), "kept": len(keep), "rule": "longest events kept"}
    ev: list[dict[str, Any]] = [
        {"ph": "M", "pid": pid, "name": "process_name", "args": {"name": f"rank {rank} profiled window"}},
        {"ph": "M", "pid": pid, "name": "process_sort_index", "args": {"sort_index": pid}}]
    kinds, streams, tids = table["kind"], table["stream"], table["tid"]
    lanes: dict[tuple[str, int], int] = {}
    for i in keep.tolist():
        gpu = kinds[i] in (EventKind.KERNEL, EventKind.MEMCPY, EventKind.MEMSET, EventKind.GPU_USER_ANNOTATION)
        lane = ("stream", int(streams[i])) if gpu else ("thread", int(tids[i]))
        if lane not in lanes:
            lanes[lane] = len(lanes) + 1
            label = f"GPU stream {lane[1]}" if gpu else f"host thread {lane[1]}"
            ev.append(_meta(pid, label, lanes[lane]))
        ev.append({"ph": "X", "pid": pid, "tid": lanes[lane], "cat": EventKind(int(kinds[i])).name.lower(),
                   "name": table.names[table["name"][i]], "ts": _us(table["ts_ns"][i] + shift - t0),
                   "dur": _us(table["dur_ns"][i])})
    return ev


def perfetto_trace(data: RunData, windows: Mapping[int, EventTable] | None = None) -> dict[str, Any]:
    """The trace document (a dict ready for JSON)."""
    t0 = int(data.run.start_ns)
    thinned: dict[str, Any] = {}
    clocks: dict[str, str] = {}
    events: list[dict[str, Any]] = []
    for r in data.ranks:
        events += _rank_events(r, t0, thinned)
        if windows and r.stream.rank in windows:
            events += _window_events(windows[r.stream.rank], r, t0, thinned, clocks)
    other = {"stepscope_schema": "stepscope.perfetto/1", "run_id": data.run.id, "run_name": data.run.name,
             "status": data.run.status.value, "time_origin": "run start, Unix epoch ns " + str(t0),
             "downsampling": thinned, "window_clock_alignment": clocks,
             "limits": {"max_slices": MAX_SLICES, "max_counter_points": MAX_COUNTER_POINTS,
                        "max_trace_events": MAX_TRACE_EVENTS}}
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": other}


def write_perfetto(data: RunData, out: Path, windows: Mapping[int, EventTable] | None = None) -> Path:
    """Write the trace as one JSON file (``.json.gz`` compresses it)."""
    doc = perfetto_trace(data, windows)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        raw = json.dumps(doc, separators=(",", ":")).encode()
        if out.name.endswith(".gz"):
            import gzip

            out.write_bytes(gzip.compress(raw, compresslevel=6))
        else:
            out.write_bytes(raw)
    except OSError as e:
        raise UserError(f"cannot write {out}: {e.strerror or e} — choose another -o FILE") from None
    return out
