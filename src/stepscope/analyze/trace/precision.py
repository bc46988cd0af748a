"""Numeric precision of the matrix-multiply kernels of one rank (GEMM and convolution components)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from stepscope.analyze.trace.gpuview import GpuView
from stepscope.model.events import EventKind, EventTable

MATMUL_COMPONENTS = ("gemm", "convolution")
LOW_PRECISION = re.compile(r"fp16|bf16|f16|half|h884|h1688|h16816|s16816|hgemm|e4m3|e5m2|int8|i8i8", re.IGNORECASE)
"""Kernel names that run in 16-bit or lower. ``s1688`` (TF32) and ``sgemm`` count as fp32."""


@dataclass(frozen=True, slots=True)
class GemmPrecision:
    """Summed GPU durations (ns) of the kernels of the ``gemm`` and ``convolution`` components (component
    rules, `stepscope trace rules`): gemm_ns all of them, low_precision_ns those whose name says 16-bit or
    lower (LOW_PRECISION), fp32_ns the rest (fp32 and TF32)."""

    gemm_ns: int
    low_precision_ns: int
    fp32_ns: int

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}


def gemm_precision(table: EventTable, gpu: GpuView) -> GemmPrecision:
    mm = np.zeros(len(gpu), dtype=bool)
    for c in MATMUL_COMPONENTS:
        mm |= gpu.component_mask(c)
    mm &= gpu.kind == EventKind.KERNEL
    low_name = np.asarray([bool(LOW_PRECISION.search(n)) for n in table.names], dtype=bool)
    low = mm & (low_name[gpu.name] if low_name.size and len(gpu) else np.zeros(len(gpu), dtype=bool))
    dur = table["dur_ns"][gpu.rows]
    total, lo = int(dur[mm].sum()), int(dur[low].sum())
    return GemmPrecision(total, lo, total - lo)
