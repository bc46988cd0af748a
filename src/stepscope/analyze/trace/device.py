"""The GPU a trace ran on (its first ``deviceProperties`` entry) and whether it has tensor cores."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from stepscope.model.events import EventTable

AMD_GPU = re.compile(r"AMD|Instinct|MI\d", re.IGNORECASE)
AMD_MATRIX_CORES = re.compile(r"MI[123]\d\d")
"""AMD Instinct MI100 and later have matrix cores (AMD's tensor cores)."""


@dataclass(frozen=True, slots=True)
class DeviceSummary:
    """name and compute_capability as the trace records them (None: not recorded). tensor_cores: an NVIDIA
    GPU of compute capability >= 7.0 (Volta and later) or an AMD Instinct MI100 or later; None: unknown."""

    name: str | None
    compute_capability: str | None
    tensor_cores: bool | None

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}


def device_summary(table: EventTable) -> DeviceSummary | None:
    """The first device of the trace; None when the trace records none."""
    devices = table.meta.devices
    if not devices:
        return None
    d = devices[0]
    return DeviceSummary(d.name, d.compute_capability, tensor_cores(d.compute_capability, d.name))


def tensor_cores(cc: str | None, name: str | None) -> bool | None:
    if name and AMD_GPU.search(name):
        return bool(AMD_MATRIX_CORES.search(name))
    if cc is None:
        return None
    try:
        return float(cc) >= 7.0
    except ValueError:
        return None
