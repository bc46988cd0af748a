"""Chrome-trace / Perfetto JSON of a run: open it in ui.perfetto.dev or chrome://tracing.

Layout: one process per rank (pid = rank, named ``rank R (host, pid P)``) with threads ``steps`` (one slice
per step, phases in args), ``regions`` (nested slices), ``communication``; system metrics and user metrics as
counter tracks of that process; the profiled window (Kineto trace) as a second process per rank
(pid = 100000 + rank, ``rank R profiled window``): the source trace's events as recorded (args and flow
events kept), its processes/threads as lanes, shifted onto the run's clock. A trace attached with
``stepscope import`` is exported the same way and named ``(imported)``, also for a rank the run did not record
(placed by its wall-clock times, else at the run's start). Steps that the profiler
profiled carry its own name too (``step 5 · ProfilerStep#4``). Timestamps are µs since the run's start (wall clock).

Size is bounded for long runs: at most ``MAX_SLICES`` step/region/comm slices and ``MAX_COUNTER_POINTS``
points per counter per rank (every k-th kept), and at most ``MAX_TRACE_EVENTS`` window events per rank
(the longest kept). What was thinned is stated in ``otherData.downsampling``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
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


def align_window(table: EventTable, rank: RankData | None, run_start_ns: int = 0) -> tuple[int, str]:
    """Offset (ns) that moves the trace's clock onto the run's wall clock, and how it was found.

    Matches the first ``ProfilerStep#k`` annotation to the start of the run's step ``k + offset`` (offset:
    the profiler_step_offset recorded with the window); else treats epoch-like trace times as wall clock;
    else puts the window at the start of its first recorded step (without the rank's records: the run's start).
    """
    if rank is None:
        if len(table) and table["ts_ns"].min() > 1e17:
            return 0, "trace timestamps are wall clock"
        return run_start_ns - (int(table["ts_ns"].min()) if len(table) else 0), \
            "the run has no records of this rank: window placed at the run's start"
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


def _rank_events(r: RankData, t0: int, thinned: dict[str, Any], prof_steps: Mapping[int, str]) -> list[dict[str, Any]]:
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
        args: dict[str, Any] = {f"{p}_ms": round(float(st[f"{p}_ns"][i]) / 1e6, 4)
                                for p in PHASES if np.isfinite(st[f"{p}_ns"][i])}
        if np.isfinite(st["samples"][i]):
            args["samples"] = float(st["samples"][i])
        index = int(st["index"][i])
        name = f"{'validation ' if st['phase'][i] == 1 else ''}step {index}"
        if index in prof_steps:  # the profiler numbers its steps its own way: show both names
            args["profiler_step"] = prof_steps[index]
            name += f" · {prof_steps[index]}"
        ev.append({"ph": "X", "pid": pid, "tid": TID_STEPS, "cat": "step", "name": name,
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


_FLOW_PHASES = frozenset({"s", "t", "f"})
_SLICE_PHASES = frozenset({"X", "i", "I", "b", "e", "n"})


def _window_events(table: EventTable, source: Sequence[Mapping[str, Any]], rank: int, r: RankData | None, t0: int,
                   thinned: dict[str, Any], clocks: dict[str, str], *, imported: bool) -> list[dict[str, Any]]:
    """The profiled window as its source trace holds it: every slice with its args (grid, block, registers,
    occupancy, correlation, External id, ...) and every flow event, moved onto the run's clock, with the
    source's processes and threads as lanes of one process per rank."""
    pid = WINDOW_PID + rank
    shift, how = align_window(table, r, t0)
    clocks[f"rank{rank}"] = how
    shift_us = (shift - t0) / 1e3
    slices = [e for e in source if e.get("ph") in _SLICE_PHASES]
    flows = [e for e in source if e.get("ph") in _FLOW_PHASES]
    if len(slices) > MAX_TRACE_EVENTS:
        durs = [d if isinstance(d := e.get("dur"), int | float) else 0 for e in slices]
        order = np.argsort(-np.asarray(durs, dtype=np.float64), kind="stable")[:MAX_TRACE_EVENTS]
        slices = [slices[i] for i in np.sort(order).tolist()]
    thinned[f"rank{rank}.window"] = {"total": len(table), "kept": len(slices), "rule": "longest events kept",
                                     "flows": len(flows)}
    names = _thread_names(source)
    ev: list[dict[str, Any]] = [
        {"ph": "M", "pid": pid, "name": "process_name",
         "args": {"name": f"rank {rank} profiled window{' (imported)' if imported else ''}"}},
        {"ph": "M", "pid": pid, "name": "process_sort_index", "args": {"sort_index": pid}}]
    lanes: dict[tuple[Any, Any], int] = {}
    for e in (*slices, *flows):
        lane = (e.get("pid"), e.get("tid"))
        if lane not in lanes:
            lanes[lane] = len(lanes) + 1
            ev.append(_meta(pid, names.get(lane) or f"{lane[0]} / {lane[1]}", lanes[lane]))
        out = {k: v for k, v in e.items() if k not in ("pid", "tid", "ts")}
        ts = e.get("ts")
        out.update(pid=pid, tid=lanes[lane], ts=round(float(ts) + shift_us, 3) if isinstance(ts, int | float) else ts)
        ev.append(out)
    return ev


def _thread_names(source: Sequence[Mapping[str, Any]]) -> dict[tuple[Any, Any], str]:
    """Lane labels from the source's own process/thread names ("python 1234 / thread 5", "GPU 0 / stream 7")."""
    procs: dict[Any, str] = {}
    threads: dict[tuple[Any, Any], str] = {}
    for e in source:
        if e.get("ph") != "M" or not isinstance(e.get("args"), dict):
            continue
        label = e["args"].get("name")
        if not isinstance(label, str):
            continue
        if e.get("name") == "process_name":
            procs[e.get("pid")] = label
        elif e.get("name") == "thread_name":
            threads[(e.get("pid"), e.get("tid"))] = label
    return {k: f"{procs.get(k[0], k[0])} / {v}" for k, v in threads.items()}


def profiler_steps(table: EventTable, r: RankData) -> dict[int, str]:
    """The profiler's own step names (``ProfilerStep#k``) by the stepscope step they profiled."""
    recs = r.extra.get("profile_window", [])
    offset = int(recs[0].get("profiler_step_offset", 0)) if recs else 0
    ann = table["name"][table["kind"] == EventKind.USER_ANNOTATION]
    out: dict[int, str] = {}
    for code in np.unique(ann).tolist():
        name = table.names[code]
        if name.startswith("ProfilerStep#") and name[13:].isdigit():
            out[int(name[13:]) + offset] = name
    return out


def perfetto_trace(data: RunData, windows: Mapping[int, EventTable] | None = None,
                   sources: Mapping[int, Sequence[Mapping[str, Any]]] | None = None) -> dict[str, Any]:
    """The trace document (a dict ready for JSON). `windows`: each rank's parsed profiled window (for clock
    alignment and step names); `sources`: the same window's raw events (read_raw_events), exported as they are."""
    t0 = int(data.run.start_ns)
    thinned: dict[str, Any] = {}
    clocks: dict[str, str] = {}
    events: list[dict[str, Any]] = []
    windows = windows or {}
    recorded = {r.stream.rank for r in data.ranks if any(rec.get("trace") for rec in r.extra.get("profile_window", []))}
    by_rank = {r.stream.rank: r for r in data.ranks}
    for r in data.ranks:
        window = windows.get(r.stream.rank)
        events += _rank_events(r, t0, thinned, profiler_steps(window, r) if window is not None else {})
    for rank, window in sorted(windows.items()):  # also ranks the run did not record (attached with import)
        events += _window_events(window, (sources or {}).get(rank, ()), rank, by_rank.get(rank), t0, thinned,
                                 clocks, imported=rank not in recorded)
    other = {"stepscope_schema": "stepscope.perfetto/1", "run_id": data.run.id, "run_name": data.run.name,
             "status": data.run.status.value, "time_origin": "run start, Unix epoch ns " + str(t0),
             "downsampling": thinned, "window_clock_alignment": clocks,
             "limits": {"max_slices": MAX_SLICES, "max_counter_points": MAX_COUNTER_POINTS,
                        "max_trace_events": MAX_TRACE_EVENTS}}
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": other}


def write_perfetto(data: RunData, out: Path, windows: Mapping[int, EventTable] | None = None) -> Path:
    """Write the trace as one JSON file (``.json.gz`` compresses it); each window's events are re-read from
    its source file so that args and flow events are exported as recorded."""
    from stepscope.traces.kineto import read_raw_events

    sources = {rank: read_raw_events(t.meta.path) for rank, t in (windows or {}).items()}
    doc = perfetto_trace(data, windows, sources)
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
