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
