"""The code base stays ruff clean (rules and line length from pyproject.toml). mypy runs in `make lint` only."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PATHS = ("src", "tests", "benchmarks", "examples")


def _ruff() -> str | None:
    """The ruff next to this interpreter (the venv's), else the one on PATH."""
    beside = Path(sys.executable).parent / "ruff"
    return str(beside) if beside.is_file() else shutil.which("ruff")


def test_ruff_reports_nothing() -> None:
    ruff = _ruff()
    if ruff is None:
        pytest.skip("ruff is not installed (pip install -e '.[dev]')")
    proc = subprocess.run([ruff, "check", "--no-cache", "--output-format", "concise", *PATHS], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"ruff check {' '.join(PATHS)} found problems:\n{proc.stdout}{proc.stderr}"
