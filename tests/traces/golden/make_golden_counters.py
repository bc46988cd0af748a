"""Produce HTA's counter figures for the fixture traces (run by hand, never by the tests).

How the goldens were made::

    python3 -m venv /tmp/hta-venv && /tmp/hta-venv/bin/pip install holistictraceanalysis==0.5.0
    HTA_DISABLE_NS_ROUNDING=1 /tmp/hta-venv/bin/python tests/traces/golden/make_golden_counters.py

The same choices as ``make_golden.py`` (``include_last_profiler_step=True``, no rounding of ns timestamps, one
TraceAnalysis per file). Writes ``<folder>__<file stem>__counters.json`` next to this script:

- ``queue_series``: per stream, HTA's ``get_queue_length_time_series`` rows as ``[ts_us, queue_length]`` in its
  row order (ts absolute, µs, as the trace writes it);
- ``queue_summary``: per stream, HTA's ``get_queue_length_summary`` (pandas ``describe`` of those rows);
- ``blocked``: per stream and threshold (HTA's default 1024, and 2 and 4 so that fixtures exercise it),
  ``get_time_spent_blocked_on_full_queue`` given that stream's series alone (HTA keeps one stream per rank when
  given several);
- ``membw_series`` / ``membw_summary``: per copy kind (``Memcpy HtoD``, ``Memset``, ...), HTA's
  ``get_memory_bw_time_series`` rows ``[ts_us, GB/s]`` and ``get_memory_bw_summary``;
- ``annotations``: ``get_gpu_user_annotation_breakdown`` (every name, none folded into "other"), µs.

A figure HTA fails to compute is stored as ``{"error": ...}``.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any

os.environ.setdefault("HTA_DISABLE_NS_ROUNDING", "1")

FIXTURES = Path(__file__).resolve().parents[3] / "tests" / "data" / "traces"
OUT = Path(__file__).resolve().parent
THRESHOLDS = (1024, 4, 2)


def _safe(fn: Any) -> Any:
    try:
        return fn()
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}".splitlines()[0][:300], "tb": traceback.format_exc()[-600:]}


def _describe(row: Any) -> dict[str, float]:
    return {str(k[-1]): float(v) for k, v in row.items()}


def golden_for(path: Path) -> dict[str, Any]:
    from hta.trace_analysis import TraceAnalysis

    ta = TraceAnalysis(trace_files={0: str(path.resolve())}, include_last_profiler_step=True)
    min_ts = float(ta.t.min_ts)
    out: dict[str, Any] = {"file": f"{path.parent.name}/{path.name}", "trace_duration_us":
                           float(ta.t.get_trace_duration(0))}

    def queue_series() -> Any:
        series = ta.get_queue_length_time_series(ranks=[0])
        if 0 not in series:
            return {}
        df = series[0]
        return {str(int(s)): [[float(t) + min_ts, int(q)] for t, q in zip(g["ts"], g["queue_length"])]
                for s, g in df.groupby("stream", sort=True)}

    def queue_summary() -> Any:
        df = ta.get_queue_length_summary(ranks=[0])
        if df is None:
            return {}
        return {str(int(idx[1])): _describe(row) for idx, row in df.iterrows()}

    def blocked() -> Any:
        series = ta.get_queue_length_time_series(ranks=[0])
        if 0 not in series:
            return {}
        df = series[0]
        res: dict[str, Any] = {}
        for s in sorted(df["stream"].unique()):
            one = {0: df[df["stream"] == s].copy()}
            for limit in THRESHOLDS:
                got = ta.get_time_spent_blocked_on_full_queue(one, max_queue_length=limit)
                rows = got.to_dict("records") if got is not None else []
                res[f"{int(s)}@{limit}"] = ([float(rows[0]["duration_at_max_queue_length"]),
                                             float(rows[0]["relative_duration_at_max_queue_length"])]
                                            if rows else None)
        return res

    def membw_series() -> Any:
        series = ta.get_memory_bw_time_series(ranks=[0])
        if 0 not in series:
            return {}
        df = series[0]
        return {str(n): [[float(t) + min_ts, float(v)] for t, v in zip(g["ts"], g["memory_bw_gbps"])]
                for n, g in df.groupby("name", sort=True)}

    def membw_summary() -> Any:
        df = ta.get_memory_bw_summary(ranks=[0])
        if df is None:
            return {}
        return {str(idx[1]): _describe(row) for idx, row in df.iterrows()}

    def annotations() -> Any:
        df = ta.get_gpu_user_annotation_breakdown(visualize=False, num_kernels=10**9, duration_ratio=1.0)
        if df is None:
            return None
        return {str(r["name"]): {k: float(r[k]) for k in ("sum (us)", "max (us)", "min (us)", "mean (us)")}
                for r in df.to_dict("records")}

    for key, fn in (("queue_series", queue_series), ("queue_summary", queue_summary), ("blocked", blocked),
                    ("membw_series", membw_series), ("membw_summary", membw_summary),
                    ("annotations", annotations)):
        out[key] = _safe(fn)
    return out


def main() -> int:
    files = sorted(FIXTURES.glob("*/*.json*")) if len(sys.argv) < 2 else [Path(p) for p in sys.argv[1:]]
    for path in files:
        res = _safe(lambda p=path: golden_for(p))
        name = f"{path.parent.name}__{path.name.split('.')[0]}__counters.json"
        (OUT / name).write_text(json.dumps(res, sort_keys=True, separators=(",", ":")) + "\n")
        print(name, "error" if "error" in res else "ok", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
