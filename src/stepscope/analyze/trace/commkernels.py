"""The communication kernels of one rank: how many, and their median payload where PyTorch recorded it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from stepscope.analyze.trace.comm import DTYPE_BYTES
from stepscope.analyze.trace.gpuview import GpuView, KernelType
from stepscope.model.events import EventTable


@dataclass(frozen=True, slots=True)
class CommKernels:
    """kernels: GPU work items of the ``communication`` component (component rules). bytes_median: median
    payload (``In msg nelems`` × dtype size) over those that carry PyTorch's collective args; None when none
    does (older traces)."""

    kernels: int
    bytes_median: float | None

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}


def comm_kernels(table: EventTable, gpu: GpuView) -> CommKernels:
    rows = gpu.rows[gpu.ktype == KernelType.COMMUNICATION]
    codes = table["coll"][rows]
    sizes = []
    for c in codes[codes >= 0].tolist():
        a = table.colls[c]
        size = DTYPE_BYTES.get(a.dtype or "")
        if a.in_nelems is not None and size:
            sizes.append(a.in_nelems * size)
    return CommKernels(int(rows.size), float(np.median(sizes)) if sizes else None)
