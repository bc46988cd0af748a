"""A worker's analyses never import numpy.ma (NumPy's ``np.percentile`` and flag-less ``np.unique`` do, on first
use): its first rank would keep that module's memory for good, about 0.08x a 107,732-event table
(tests/executor/test_rank_peak.py). The series' quartiles and distinct values stay NumPy's, figure for figure."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from stepscope.analyze.trace.stepseries import describe, distinct

ROOT = Path(__file__).resolve().parents[3]
TRACES = sorted((ROOT / "tests" / "data" / "traces").glob("*/*.json.gz"))

CHILD = """
import sys
from stepscope.analyze.trace.analysis import analyze_trace
from stepscope.traces.kineto import read_trace
for path in sys.argv[1:]:
    table = read_trace(path)
    analyze_trace(table, with_critical_path=True)
    analyze_trace(table, critical_path_step=0)
    if "numpy.ma" in sys.modules:
        print("numpy.ma imported by", path)
        break
else:
    print("numpy.ma not imported")
"""


def _memory_trace(tmp_path: Path) -> Path:
    """A real CPU profile with allocation records and a user annotation (memory timeline, annotations)."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, record_function

    model = torch.nn.Linear(32, 32)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        for _ in range(3):
            with record_function("train_step"):
                model(torch.randn(16, 32)).relu().sum().backward()
    path = tmp_path / "mem.json"
    prof.export_chrome_trace(str(path))
    return path


def test_analyses_do_not_import_numpy_ma(tmp_path: Path) -> None:
    assert len(TRACES) >= 8
    paths = [str(p) for p in TRACES] + [str(_memory_trace(tmp_path))]
    out = subprocess.run([sys.executable, "-c", CHILD, *paths], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "numpy.ma not imported"


def test_describe_equals_numpy() -> None:
    """Quartiles equal ``np.percentile`` (linear) bit for bit; mean, std, min and max as NumPy computes them."""
    rng = np.random.default_rng(5)
    for trial in range(2000):
        n = int(rng.integers(1, 40)) if trial % 10 else int(rng.integers(1, 5000))
        a = (rng.integers(-50, 2000, n) if trial % 2 else rng.exponential(300.0, n))
        v = a.astype(np.float64)
        got = describe(a)
        q = np.percentile(v, [25, 50, 75])
        want = {"count": float(n), "mean": float(v.mean()), "std": float(v.std(ddof=1)) if n > 1 else float("nan"),
                "min": float(v.min()), "p25": float(q[0]), "p50": float(q[1]), "p75": float(q[2]),
                "max": float(v.max())}
        assert got.keys() == want.keys()
        for k, w in want.items():
            assert got[k] == w or (np.isnan(got[k]) and np.isnan(w)), (k, a.tolist(), got[k], w)
    empty = describe(np.zeros(0))
    assert empty["count"] == 0 and all(np.isnan(empty[k]) for k in ("mean", "std", "min", "p25", "p50", "max"))
    nan = describe(np.array([1.0, np.nan, 3.0]))
    assert all(np.isnan(nan[k]) for k in ("p25", "p50", "p75"))


def test_distinct_equals_numpy_unique() -> None:
    rng = np.random.default_rng(6)
    for trial in range(500):
        a = rng.integers(-5, [3, 50, 10**12][trial % 3], int(rng.integers(0, 300)))
        np.testing.assert_array_equal(distinct(a), np.unique(a))
        assert distinct(a).dtype == np.unique(a).dtype
