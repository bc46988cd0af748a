"""One store with two real observed runs for the notebook tests: ``prof`` (regions, logged metrics, a slow
dataset and a 2-step profiled window) and ``plain`` (no window)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import built_once, observe


def _observe_both(folder: Path) -> None:
    store = folder / "store"
    res = observe(store, "--steps", "16", "--sample-sleep", "0.003", "--instrument", "--compute", "2",
                  opts=("--profile-steps", "2"), name="prof")
    assert res.returncode == 0, res.stderr[-3000:]
    res = observe(store, "--steps", "6", "--instrument", name="plain")
    assert res.returncode == 0, res.stderr[-3000:]


@pytest.fixture(scope="session")
def nb_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built once per test session (shared by the xdist workers); the notebook tests only read it."""
    return built_once(tmp_path_factory, "notebook", _observe_both) / "store"
