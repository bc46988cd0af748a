"""Typed records every layer may import. No I/O here, and no import of torch."""

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
