"""Build small Kineto traces by hand, with known answers."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "data" / "traces"


def fixture_files() -> list[Path]:
    return sorted(FIXTURES.glob("*/*.json*")) if FIXTURES.is_dir() else []


def ev(cat: str, name: str, ts: float, dur: float, *, pid: int = 1, tid: int = 1, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def kernel(name: str, ts: float, dur: float, corr: int, *, stream: int = 7, **args: Any) -> dict[str, Any]:
    return ev("kernel", name, ts, dur, pid=0, tid=stream, stream=stream, device=0, correlation=corr, **args)


def launch(ts: float, dur: float, corr: int, ext: int = -1) -> dict[str, Any]:
    return ev("cuda_runtime", "cudaLaunchKernel", ts, dur, correlation=corr, **{"External id": ext})


def write(path: Path, events: list[dict[str, Any]], gz: bool = False, **top: Any) -> Path:
    data = json.dumps({"schemaVersion": 1, **top, "traceEvents": events}).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def tiny_trace() -> list[dict[str, Any]]:
    """Known answers (µs): GPU work on stream 7: K1 [100,110) gemm, K2 [112,120) nccl, K3 [150,160) gemm,
    memcpy HtoD [160,170) 1000 bytes. Comm [112,120) overlaps compute never. Launches: K1 at 95, K2 at 100,
    K3 at 140 (after K2 ended at 120: host wait 30), memcpy at 141 (gap 0).
    Idle on stream 7: gap 110->112 (2 µs, launched at 100 < 110: kernel wait), 120->150 (30 µs, host wait).
    ProfilerStep#3 [90, 200): cpu op aten::mm [94, 143) launching everything.
    """
    return [
        ev("user_annotation", "ProfilerStep#3", 90, 110),
        ev("cpu_op", "aten::mm", 94, 49, **{"External id": 11, "Input Dims": [[2, 3], [3, 4]]}),
        launch(95, 3, 1, 11), launch(100, 3, 2, 11), launch(140, 1, 3, 11),
        ev("cuda_runtime", "cudaMemcpyAsync", 141, 1, correlation=4, **{"External id": 11}),
        kernel("ampere_sgemm_128x64_tn", 100, 10, 1, **{"External id": 11, "blocks per SM": 0.5,
                                                        "est. achieved occupancy %": 40}),
        kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 112, 8, 2, **{"External id": 11}),
        kernel("ampere_sgemm_128x64_tn", 150, 10, 3, **{"External id": 11, "blocks per SM": 2.0,
                                                        "est. achieved occupancy %": 60}),
        ev("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", 160, 10, pid=0, tid=7, stream=7, device=0,
           correlation=4, bytes=1000, **{"External id": 11}),
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}},
    ]


PROFILER_SPAN = {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler",
                 "ts": 0, "dur": 300, "args": {}}
"""The span Kineto writes around every trace (HTA's parser expects one)."""


def graph_trace() -> list[dict[str, Any]]:
    """Hand-derived (µs). cudaGraphLaunch [100, 130) launches G1 [140, 150), G2 [150, 155), G3 [155, 157);
    a plain cudaLaunchKernel [200, 205) launches K [206, 208). ProfilerStep#1 [90, 290)."""
    return [
        PROFILER_SPAN, ev("user_annotation", "ProfilerStep#1", 90, 200),
        ev("cuda_runtime", "cudaGraphLaunch", 100, 30, correlation=1),
        kernel("graph_gemm", 140, 10, 1), kernel("graph_relu", 150, 5, 1), kernel("graph_add", 155, 2, 1),
        launch(200, 5, 2), kernel("plain_add", 206, 2, 2),
    ]


def mtia_trace(category: str = "mtia_ccp_events") -> list[dict[str, Any]]:
    """MTIA-style (µs): the runtime call "runFunction - job_prep_and_submit_for_execution" (cat mtia_runtime)
    launches device work (cat ``category``, device 0, stream 3). Calls [10, 14) and [20, 22); work A
    [15, 25), B [25, 40) (a dma copy), and C [40, 45) launched by a call outside the trace."""
    name = "runFunction - job_prep_and_submit_for_execution"
    dev = {"device": 0, "stream": 3}
    return [
        PROFILER_SPAN, ev("user_annotation", "ProfilerStep#1", 0, 50),
        ev("mtia_runtime", name, 10, 4, correlation=1),
        ev("mtia_runtime", name, 20, 2, correlation=2),
        ev(category, "fused_mlp", 15, 10, pid=0, tid=3, correlation=1, **dev),
        ev(category, "dma_copy", 25, 15, pid=0, tid=3, correlation=2, **dev),
        ev(category, "fused_mlp", 40, 5, pid=0, tid=3, correlation=99, **dev),
    ]


HANDBUILT = {"handbuilt_graph": graph_trace, "handbuilt_mtia": mtia_trace}
"""Hand-built traces whose HTA figures are goldens too (tests/traces/golden/<name>__rank0.json)."""
