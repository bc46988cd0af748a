"""One run's records (RunData): steps, regions, system samples, memory, FLOPs, host profile,
measurement quality, the run summary, the live view, data-pipeline benchmarks.

Its entry points (``_ENTRY_POINTS``) can be imported from the package itself; each is loaded on first use,
so the package's modules never import one another through it."""

from __future__ import annotations

import importlib
from typing import Any

_ENTRY_POINTS = {
    "summarize_run": "summary",
    "RunSummary": "summary",
    "index_metrics": "summary",
    "step_stats": "steps",
    "warmup_steps": "steps",
    "region_stats": "regions",
    "metric_stats": "system",
    "memory_ops": "memory",
    "flops_summary": "flops",
    "host_profile": "hostprof",
    "measurement_quality": "quality",
    "Quality": "quality",
    "live_state": "live",
    "data_bench": "databench",
}
__all__ = sorted(_ENTRY_POINTS)


def __getattr__(name: str) -> Any:
    if name in _ENTRY_POINTS:
        return getattr(importlib.import_module(f"{__name__}.{_ENTRY_POINTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
