"""Many runs: history across commits, the CI gate's regression verdict, step detection, sweeps,
scaling.

Its entry points (``_ENTRY_POINTS``) can be imported from the package itself; each is loaded on first use,
so the package's modules never import one another through it."""

from __future__ import annotations

import importlib
from typing import Any

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


def __getattr__(name: str) -> Any:
    if name in _ENTRY_POINTS:
        return getattr(importlib.import_module(f"{__name__}.{_ENTRY_POINTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
