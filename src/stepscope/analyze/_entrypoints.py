"""Lazy package exports: a group of analyze/ names its entry points; each is imported on first use, so the
group's own modules never import one another through the package."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, entry_points: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` resolving ``name`` to ``package.<entry_points[name]>.name``."""

    def __getattr__(name: str) -> Any:
        if name in entry_points:
            return getattr(importlib.import_module(f"{package}.{entry_points[name]}"), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
