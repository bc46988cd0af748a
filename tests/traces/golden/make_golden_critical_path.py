"""Produce HTA's critical path of each fixture trace as golden files (run by hand, never by the tests).

How the goldens were made::

    python3 -m venv /tmp/hta-venv && /tmp/hta-venv/bin/pip install holistictraceanalysis==0.5.0
    /tmp/hta-venv/bin/python tests/traces/golden/make_golden_critical_path.py

(HTA 0.5.0, pandas 2.3.3 -- its critical path fails under pandas 3 --, NumPy 2.4.6, networkx 3.6.1.) Choices,
the same as ``make_golden.py``'s and
documented in docs/traces.md:

- ``HTA_DISABLE_NS_ROUNDING=1`` and ``include_last_profiler_step=True``: every recorded event, ns resolution.
- ``critical_path_analysis(t, rank, annotation="", instance_id=None)``: the whole trace as the window (the
  empty annotation matches every name, so HTA's window is the first start to the last end), as stepscope's
  default; one file per trace. ``step0``: the same for HTA's own default window, the first ``ProfilerStep``
  (``annotation="ProfilerStep", instance_id=0``), with the span of the events HTA kept (``window_us``).

Writes ``<folder>__<file stem>__critical_path.json`` next to this script: the path's length (sum of its edge
weights, µs), the breakdown by HTA's ``bound_by`` (µs), the time on the path per attributed event name (top
20), the edges per type (count, µs), the distinct events on the path per name, and the path's first and last
ten nodes (start or end of which event: its name, start, duration and stream/thread), and every sync edge
(``sync_edges``: Stream / Context / Event Sync and Stream Wait Event). An analysis HTA fails
to compute is stored as ``{"error": ...}``.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import time
import traceback
from collections import defaultdict
from pathlib import Path
from typing import Any

os.environ.setdefault("HTA_DISABLE_NS_ROUNDING", "1")

FIXTURES = Path(__file__).resolve().parents[3] / "tests" / "data" / "traces"
OUT = Path(__file__).resolve().parent


def golden_for(path: Path) -> dict[str, Any]:
    from hta.trace_analysis import TraceAnalysis

    ta = TraceAnalysis(trace_files={0: str(path)}, include_last_profiler_step=True)
    out = _path_golden(ta, "", None)
    # the first ProfilerStep (HTA's default window): its bounds, length and breakdown
    try:
        step = _path_golden(ta, "ProfilerStep", 0)
        step = {k: step[k] for k in ("length_us", "breakdown_us", "window_us", "graph_nodes", "error") if k in step}
    except Exception as exc:
        step = {"error": f"{type(exc).__name__}: {exc}".splitlines()[0][:300]}
    out["step0"] = step
    return out


def _path_golden(ta: Any, annotation: str, instance: int | None) -> dict[str, Any]:
    from hta.analyzers.critical_path_analysis import bound_by

    t0 = time.process_time()
    got = ta.critical_path_analysis(rank=0, annotation=annotation, instance_id=instance)
    cpu_s = time.process_time() - t0
    if got is None:
        return {"error": "HTA returned None (no annotation matched)"}
    graph, ok = got
    if not ok:
        return {"error": "HTA's longest-path search failed (the graph has a cycle)"}
    df = graph.trace_df
    base = float(ta.t.min_ts)  # HTA shifts every timestamp by the trace's first; the goldens keep the trace's clock
    window = [float(df.ts.min()) + base, float((df.ts + df.dur).max()) + base]
    sym = ta.t.symbol_table.get_sym_table()
    nodes = graph.critical_path_nodes
    breakdown: dict[str, float] = defaultdict(float)
    by_event: dict[str, float] = defaultdict(float)
    steps = []
    for u, v in itertools.pairwise(nodes):
        e = graph.edges[u, v]["object"]
        w = float(graph.edges[u, v]["weight"])
        ev = graph.get_event_attribution_for_edge(e)
        name = sym[int(df.name.loc[ev])] if ev is not None and ev >= 0 else ""
        row = {"type": str(e.type.value), "s_name": name,
               "stream": int(df.stream.loc[ev]) if ev is not None and ev >= 0 else -1}
        kind = bound_by(row)
        if kind:
            breakdown[kind] += w
        if ev is not None and ev >= 0:
            by_event[name] += w
        steps.append({"type": str(e.type.value).removeprefix("critical_path_"), "weight_us": w})
    path = []
    for n in nodes:
        node = graph.node_list[n]
        ev = int(node.ev_idx)
        path.append({"event": sym[int(df.name.loc[ev])], "ts_us": float(df.ts.loc[ev]) + base,
                     "dur_us": float(df.dur.loc[ev]), "stream": int(df.stream.loc[ev]), "tid": int(df.tid.loc[ev]),
                     "is_start": bool(node.is_start)})
    return {"length_us": sum(s["weight_us"] for s in steps), "window_us": window,
            "breakdown_us": dict(sorted(breakdown.items())),
            "by_event_us": dict(sorted(by_event.items(), key=lambda kv: -kv[1])[:20]),
            "path_nodes": len(path), "path_events_by_name": _counts(path), "first_nodes": path[:10],
            "last_nodes": path[-10:], "edge_types_us": _by_type(steps), "graph_nodes": len(graph.node_list),
            "graph_edges": graph.number_of_edges(), "hta_cpu_s": round(cpu_s, 2),
            "sync_edges": _sync_edges(graph, sym, base)}


def _sync_edges(graph: Any, sym: Any, base: float) -> list[list[Any]]:
    """Every sync edge of the graph (GPU -> host: Stream / Context / Event Sync; GPU -> GPU: Stream Wait Event) as
    [source event, its start (µs), source is start, destination event, its start, destination is start], sorted;
    names cut to 80 characters (a start time tells events apart)."""
    df = graph.trace_df
    out = []
    for u, v, obj in graph.edges(data="object"):
        if str(obj.type.value) != "critical_path_sync_dependency":
            continue
        a, b = graph.node_list[u], graph.node_list[v]
        out.append([sym[int(df.name.loc[a.ev_idx])][:80], float(df.ts.loc[a.ev_idx]) + base, bool(a.is_start),
                    sym[int(df.name.loc[b.ev_idx])][:80], float(df.ts.loc[b.ev_idx]) + base, bool(b.is_start)])
    return sorted(out)


def _counts(path: list[dict[str, Any]]) -> dict[str, int]:
    """Distinct events on the path per name (an event's start and end count once)."""
    seen = {(p["event"], p["ts_us"], p["tid"]) for p in path}
    out: dict[str, int] = defaultdict(int)
    for name, _, _ in seen:
        out[name] += 1
    return dict(sorted(out.items()))


def _by_type(steps: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = defaultdict(lambda: [0, 0.0])
    for s in steps:
        out[s["type"]][0] += 1
        out[s["type"]][1] += s["weight_us"]
    return dict(sorted(out.items()))


def _safe(path: Path) -> dict[str, Any]:
    try:
        out = golden_for(path)
    except Exception as exc:
        out = {"error": f"{type(exc).__name__}: {exc}".splitlines()[0][:300], "tb": traceback.format_exc()[-600:]}
    out["file"] = f"{path.parent.name}/{path.name}"
    return out


def main() -> int:
    files = sorted(FIXTURES.glob("*/*.json*")) if len(sys.argv) < 2 else [Path(p).resolve() for p in sys.argv[1:]]
    for path in files:
        res = _safe(path)
        name = f"{path.parent.name}__{path.name.split('.')[0]}__critical_path.json"
        (OUT / name).write_text(json.dumps(res, indent=1, sort_keys=True) + "\n")
        print(name, "error: " + res["error"] if "error" in res else f"ok {res['length_us']:.1f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
