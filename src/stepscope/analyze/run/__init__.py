"""One run's records (RunData): steps, regions, system samples, memory, FLOPs, host profile,
measurement quality, the run summary, the live view, data-pipeline benchmarks.

Its entry points (``_ENTRY_POINTS``) can be imported from the package itself; each is loaded on first use,
so the package's modules never import one another through it."""

from __future__ import annotations

from stepscope.analyze._entrypoints import lazy_exports

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

__getattr__ = lazy_exports(__name__, _ENTRY_POINTS)
