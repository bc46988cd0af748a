"""What `stepscope trace analyze` loads before it prints (issue 41, item 8): the trace engine, NumPy, orjson and
rich, none of the heavy or unrelated layers. A test on what loads (read from ``python -X importtime``), not on
timing; the CPU time itself is measured in benchmarks/RESULTS.md ("trace analyze start-up")."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import TRACES

NOT_LOADED = (
    "pandas", "pyarrow", "matplotlib", "torch", "scipy", "dask", "distributed",
    "stepscope.report.html.page", "stepscope.report.html.charts", "stepscope.report.html.tables",
    "stepscope.report.html.run_report", "stepscope.report.dashboard", "stepscope.analyze.diff", "stepscope.analyze.run",
    "stepscope.analyze.advisor", "stepscope.app", "stepscope.store", "stepscope.collect", "stepscope.report.terminal",
    "stepscope.cli.views",
    "multiprocessing", "concurrent.futures.process", "stepscope.analyze.trace.critical_path",
    "stepscope.analyze.trace.critical_path_graph", "stepscope.analyze.trace.critical_path_ranks", "stepscope.model.run",
    "ctypes.util",
)
"""Packages that `trace analyze` of one file has no use for (the run store and its analyses, the diff engine,
the HTML renderers (the terminal's short kernel names come from report/html/names.py alone), the dashboard,
dataframes, plotting, the frameworks), the process pool (one file is analysed in this process) and the critical
path (asked for by --critical-path), the run records (model.run), ctypes.util (whose find_library runs
ldconfig in a child process)."""


@pytest.fixture(scope="module")
def trace_10k(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first 10,000 events of the v100 fixture: a small trace whose analysis costs less than its start-up."""
    doc = json.loads(gzip.decompress((TRACES / "v100_1rank" / "rank0.json.gz").read_bytes()))
    doc["traceEvents"] = doc["traceEvents"][:10_000]
    path = tmp_path_factory.mktemp("startup") / "rank0.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def _loaded(*args: str) -> set[str]:
    res = subprocess.run([sys.executable, "-X", "importtime", "-m", "stepscope", *args], capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "rank" in res.stdout  # it did analyse and print
    return {m.group(1) for m in re.finditer(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)", res.stderr, re.M)}


@pytest.mark.parametrize("extra", [(), ("--json",)])
def test_trace_analyze_loads_nothing_heavy(trace_10k: Path, extra: tuple[str, ...]) -> None:
    loaded = _loaded("trace", "analyze", *extra, str(trace_10k))
    assert "numpy" in loaded and "stepscope.analyze.trace.analysis" in loaded  # the reading is right
    heavy = sorted(m for m in loaded if any(m == p or m.startswith(p + ".") for p in NOT_LOADED))
    assert heavy == []
