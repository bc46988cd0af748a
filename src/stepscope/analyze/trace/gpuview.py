"""The GPU work of one rank (kernels, memcpy, memset) with components and HTA kernel types."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any

import numpy as np
import numpy.typing as npt

from stepscope.analyze.trace.intervals import merge
from stepscope.analyze.trace.sets import kind_mask, member
from stepscope.model.events import GPU_WORK_KINDS, EventKind, EventTable
from stepscope.traces.components import ComponentRules

Array = npt.NDArray[Any]


class KernelType(IntEnum):
    """HTA's kernel types: communication by component, memory for memcpy/memset, the rest compute."""

    COMPUTATION = 0
    COMMUNICATION = 1
    MEMORY = 2


@dataclass(frozen=True, slots=True)
class GpuView:
    """Columns of the GPU-work rows of a table (sorted by start). ``rows``: their row indices."""

    rows: Array
    ts: Array
    end: Array
    stream: Array
    kind: Array
    name: Array
    component: Array
    components: tuple[str, ...]
    ktype: Array

    def __len__(self) -> int:
        return int(self.rows.size)

    def merged(self, mask: Array | None = None) -> tuple[Array, Array]:
        if mask is None:
            return merge(self.ts, self.end)
        return merge(self.ts[mask], self.end[mask])

    def component_mask(self, name: str) -> Array:
        if name not in self.components:
            return np.zeros(len(self), dtype=bool)
        result: Array = self.component == self.components.index(name)
        return result


def gpu_view(table: EventTable, rules: ComponentRules | None = None, *, launched_only: bool = False) -> GpuView:
    """GPU work rows: kernels, memcpy and memset (cuda_sync and GPU annotations excluded).

    launched_only: drop work whose correlation id names a runtime call the trace does not hold (HTA's filter;
    work with no correlation id at all is kept, as HTA keeps it); by default all GPU work recorded on the
    device counts, launched from a traced thread or not.
    """
    rules = rules or ComponentRules.defaults()
    kind = table["kind"]
    work = kind_mask(kind, GPU_WORK_KINDS)
    if launched_only:
        launched = table["correlation"][(kind == EventKind.RUNTIME) & (table["correlation"] >= 0)]
        corr = table["correlation"]
        work &= (corr < 0) | member(corr, launched)
    rows = np.flatnonzero(work)
    name = table["name"][rows]
    name_comp, comps = rules.codes(table.names)
    comp = name_comp[name] if rows.size else np.empty(0, dtype=np.int32)
    k = kind[rows]
    ktype = np.full(rows.size, KernelType.COMPUTATION, dtype=np.int8)
    for c in ("memcpy", "memset"):
        ktype[comp == comps.index(c)] = KernelType.MEMORY
    ktype[(k == EventKind.MEMCPY) | (k == EventKind.MEMSET)] = KernelType.MEMORY
    ktype[comp == comps.index("communication")] = KernelType.COMMUNICATION
    ts = table["ts_ns"][rows]
    return GpuView(rows=rows, ts=ts, end=ts + table["dur_ns"][rows], stream=table["stream"][rows], kind=k,
                   name=name, component=comp, components=comps, ktype=ktype)
