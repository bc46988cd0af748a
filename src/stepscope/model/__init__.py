"""Typed records every layer may import. No I/O here, and no import of torch.

The names below load their module when first used (PEP 562): a trace's event table (``model.events``) does not
need the run records, and `stepscope trace analyze` starts faster without them."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from stepscope.model.run import (
        GitInfo,
        GpuInfo,
        HostInfo,
        RankStream,
        Run,
        RunStatus,
        SoftwareInfo,
    )
    from stepscope.model.tables import (
        CommTable,
        MetricTable,
        RankData,
        RegionTable,
        RunData,
        SampleTable,
        StepTable,
    )

_HOME = dict.fromkeys(("GitInfo", "GpuInfo", "HostInfo", "RankStream", "Run", "RunStatus", "SoftwareInfo"), "run")
_HOME.update(dict.fromkeys(("CommTable", "MetricTable", "RankData", "RegionTable", "RunData", "SampleTable",
                            "StepTable"), "tables"))


def __getattr__(name: str) -> Any:
    if name in _HOME:
        return getattr(importlib.import_module(f"stepscope.model.{_HOME[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "CommTable",
    "GitInfo",
    "GpuInfo",
    "HostInfo",
    "MetricTable",
    "RankData",
    "RankStream",
    "RegionTable",
    "Run",
    "RunData",
    "RunStatus",
    "SampleTable",
    "SoftwareInfo",
    "StepTable",
]
