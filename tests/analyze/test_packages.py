"""analyze/ is grouped by what an analysis takes in; each group's package exports its entry points."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

ANALYZE = Path(__file__).resolve().parents[2] / "src" / "stepscope" / "analyze"


@pytest.mark.parametrize("group", ["run", "ranks", "runs"])
def test_every_entry_point_resolves_to_its_module(group: str) -> None:
    pkg = importlib.import_module(f"stepscope.analyze.{group}")
    assert pkg.__all__
    for name in pkg.__all__:
        obj = getattr(pkg, name)
        assert obj.__module__ == f"stepscope.analyze.{group}.{pkg._ENTRY_POINTS[name]}", name


def test_only_shared_helpers_stay_at_the_top_of_analyze() -> None:
    top = {p.stem for p in ANALYZE.glob("*.py")} - {"__init__"}
    shared = {"stats", "_entrypoints"}
    assert top == shared, f"put {sorted(top - shared)} into run/, ranks/, runs/ (or trace/, diff/, advisor/)"
