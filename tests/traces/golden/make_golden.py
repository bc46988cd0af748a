"""Produce the HTA golden figures for the fixture traces (run by hand, never by the tests).

How the goldens were made::

    python3 -m venv /tmp/hta-venv && /tmp/hta-venv/bin/pip install holistictraceanalysis   # HTA 0.5.0
    HTA_DISABLE_NS_ROUNDING=1 /tmp/hta-venv/bin/python tests/traces/golden/make_golden.py

The launch statistics (``launches``) were added later with ``holistictraceanalysis==0.5.0`` (pinned in
constraints.txt, extra ``golden``) installed into the project's virtualenv, pandas 3.1.1, NumPy 2.4.6; the
other figures came out unchanged.

Choices, each documented in docs/traces.md:

- ``include_last_profiler_step=True``: stepscope analyses every recorded event; HTA by default drops the
  last ProfilerStep (and the GPU work it launched) as possibly incomplete.
- ``HTA_DISABLE_NS_ROUNDING=1``: stepscope keeps nanosecond resolution; HTA by default rounds float
  timestamps to whole microseconds (start up, end down), which shortens every short kernel.
- One file per TraceAnalysis (rank taken from the file), so every fixture gets its own golden file.

Writes ``<folder>__<file stem>.json`` next to this script: temporal breakdown, idle-time breakdown per
stream, kernel-type breakdown (memory kernels included), per-kernel sums and counts, comm/comp overlap, and
launch statistics (``get_cuda_kernel_launch_stats``: rows, percentiles and the outlier counts HTA plots). All
times in microseconds as HTA reports them. A figure HTA fails to compute is stored as ``{"error": ...}``.
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


def _safe(fn: Any) -> Any:
    try:
        return fn()
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}".splitlines()[0][:300], "tb": traceback.format_exc()[-600:]}


def golden_for(path: Path) -> dict[str, Any]:
    import numpy as np
    from hta.trace_analysis import TraceAnalysis

    ta = TraceAnalysis(trace_files={0: str(path)}, include_last_profiler_step=True)
    trace = ta.t.get_trace(0)
    out: dict[str, Any] = {"file": f"{path.parent.name}/{path.name}", "hta_events": len(trace)}

    def temporal() -> Any:
        df = ta.get_temporal_breakdown(visualize=False)
        return {k: float(df[k].iloc[0]) for k in df.columns if k != "rank"}

    def idle() -> Any:
        df = ta.get_idle_time_breakdown(ranks=[0], visualize=False)[0]
        return [{"stream": int(r.stream), "idle_category": str(r.idle_category), "idle_time": float(r.idle_time)}
                for r in df.itertuples()]

    def kernels() -> Any:
        types, per_kernel = ta.get_gpu_kernel_breakdown(visualize=False, include_memory_kernels=True,
                                                       num_kernels=10**9, duration_ratio=1.0)
        by_type = {str(r.kernel_type): float(r.sum) for r in types.itertuples()}
        gk = trace[trace["stream"].ne(-1)]
        return {"by_type_us": by_type, "per_kernel_sum_us": {str(r[1]): float(r[2]) for r in
                per_kernel[["name", "sum (us)"]].itertuples()}, "gpu_events": len(gk)}

    def overlap() -> Any:
        df = ta.get_comm_comp_overlap(visualize=False)
        return float(df["comp_comm_overlap_pctg"].iloc[0])

    out["temporal"] = _safe(temporal)
    out["idle"] = _safe(idle)
    out["kernels"] = _safe(kernels)
    def launches() -> Any:
        df = ta.get_cuda_kernel_launch_stats(ranks=[0], visualize=False)[0]
        cpu, gpu, delay = (df[c].to_numpy(dtype=float) for c in ("cpu_duration", "gpu_duration", "launch_delay"))

        def q(a: Any, p: float) -> Any:
            return float(np.percentile(a, p)) if a.size else None

        # The figures HTA draws from this frame (its runtime_cutoff 50 µs, launch_delay_cutoff 100 µs):
        # short kernels = GPU duration < CPU duration, runtime outliers = CPU > 50, delay outliers = delay > 100.
        return {"rows": len(df), "correlations": int(df["correlation"].nunique()),
                "cpu_p50_us": q(cpu, 50), "cpu_p95_us": q(cpu, 95), "gpu_p50_us": q(gpu, 50), "gpu_p95_us": q(gpu, 95),
                "delay_p50_us": q(delay, 50), "delay_p95_us": q(delay, 95), "delay_sum_us": float(delay.sum()),
                "short_kernels": int((gpu < cpu).sum()), "runtime_outliers": int((cpu > 50).sum()),
                "delay_outliers": int((delay > 100).sum())}

    out["overlap_pct"] = _safe(overlap)
    out["launches"] = _safe(launches)
    return out


def main() -> int:
    files = sorted(FIXTURES.glob("*/*.json*")) if len(sys.argv) < 2 else [Path(p) for p in sys.argv[1:]]
    if len(sys.argv) < 2:
        files += handbuilt()
    for path in files:
        res = _safe(lambda p=path: golden_for(p))
        name = f"{path.parent.name}__{path.name.split('.')[0]}.json"
        (OUT / name).write_text(json.dumps(res, indent=1, sort_keys=True) + "\n")
        print(name, "error" if "error" in res else "ok")
    return 0


def handbuilt() -> list[Path]:
    """tests/traces/tracebuild.HANDBUILT written to a temporary folder as <name>/rank0.json."""
    import tempfile

    sys.path.insert(0, str(FIXTURES.parents[2]))
    from tests.traces.tracebuild import HANDBUILT, write

    tmp = Path(tempfile.mkdtemp(prefix="stepscope-golden-"))
    out = []
    for name, build in sorted(HANDBUILT.items()):
        (tmp / name).mkdir()
        out.append(write(tmp / name / "rank0.json", build(), distributedInfo={"rank": 0}))
    return out


if __name__ == "__main__":
    raise SystemExit(main())
