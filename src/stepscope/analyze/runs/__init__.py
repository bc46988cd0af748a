"""Many runs: history across commits, the CI gate's regression verdict, step detection, sweeps,
scaling.

Its entry points (``_ENTRY_POINTS``) can be imported from the package itself; each is loaded on first use,
so the package's modules never import one another through it."""

from __future__ import annotations

from stepscope.analyze._entrypoints import lazy_exports

_ENTRY_POINTS = {
    "metric_history": "history",
    "RunPoint": "history",
    "history_steps": "historysteps",
    "check_regression": "regression",
    "check_metric": "regression",
    "analyze_scaling": "scaling",
    "analyze_sweep": "sweep",
    "detect_steps": "stepdetect",
}
__all__ = sorted(_ENTRY_POINTS)

__getattr__ = lazy_exports(__name__, _ENTRY_POINTS)
