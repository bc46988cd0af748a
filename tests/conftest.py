"""Shared fixtures: real stores in tmp_path, real observed runs, the fixture traces."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = Path(__file__).resolve().parent / "scripts"
EXAMPLES = ROOT / "examples"
TRACES = ROOT / "tests" / "data" / "traces"
"""Real Kineto traces kept in the repository (HTA test data, MIT; see its README and LICENSE)."""
PY = sys.executable


def stepscope_cmd(*args: str) -> list[str]:
    return [PY, "-m", "stepscope", *args]


class Result:
    def __init__(self, proc: subprocess.CompletedProcess[str]) -> None:
        self.rc = proc.returncode
        self.out = proc.stdout
        self.err = proc.stderr

    def __repr__(self) -> str:
        return f"Result(rc={self.rc}, out={self.out[-2000:]!r}, err={self.err[-2000:]!r})"


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A store folder path (created by the first run)."""
    return tmp_path / "store"


@pytest.fixture
def cli(store: Path, tmp_path: Path) -> Callable[..., Result]:
    """Run `python -m stepscope ARGS` in a subprocess against the test's store; returns rc/out/err."""

    def run(*args: str, env: dict[str, str] | None = None, timeout: float = 120, cwd: Path | None = None,
            with_store: bool = True) -> Result:
        full_env = {**os.environ, "STEPSCOPE_HOME": str(store), **(env or {})}
        full_env.pop("STEPSCOPE_DB", None)
        proc = subprocess.run(stepscope_cmd(*args), capture_output=True, text=True, timeout=timeout,
                              cwd=cwd or tmp_path, env=full_env)
        return Result(proc)

    return run


@pytest.fixture
def observed(cli: Callable[..., Result]) -> Callable[..., Result]:
    """`stepscope run --quiet --sample-interval 0.2 -- python SCRIPT ARGS` for a script in tests/scripts."""

    def run(script: str, *args: str, opts: tuple[str, ...] = (), env: dict[str, str] | None = None) -> Result:
        path = SCRIPTS / script if not os.path.isabs(script) else Path(script)
        return cli("run", "--quiet", "--sample-interval", "0.2", *opts, "--", PY, str(path), *args, env=env)

    return run


@pytest.fixture(autouse=True)
def no_hooks_left_behind() -> object:
    """Every in-process session must remove the hooks it installed."""
    yield
    from stepscope.collect import hooks

    assert hooks.installed() == 0, "a test left stepscope hooks installed"


def load(store: Path, ref: str = "latest"):  # type: ignore[no-untyped-def]
    from stepscope.store import open_store

    st = open_store(store)
    try:
        return st.load(ref)
    finally:
        st.close()
