"""The launch statistics' percentile equals NumPy's linear ``np.percentile`` bit for bit, without importing
numpy.ma (which NumPy's call does, through ``np.unique``)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from stepscope.analyze.trace.launches import percentile


def test_percentile_equals_numpy_linear() -> None:
    rng = np.random.default_rng(3)
    for trial in range(3000):
        n = int(rng.integers(1, 40)) if trial % 10 else int(rng.integers(1, 5000))
        hi = [10, 1_000, 10**9, 10**15][trial % 4]
        a = rng.integers(-hi // 10, hi, n)
        for q in (50, 95, 0, 100, 25, 75, 99.9):
            want = float(np.percentile(a, q))
            got = percentile(a, q)
            assert got == want, (a.tolist(), q, got, want)


def test_percentile_does_not_import_numpy_ma() -> None:
    code = ("import sys, numpy as np\nfrom stepscope.analyze.trace.launches import percentile\n"
            "percentile(np.arange(7), 95)\nprint('numpy.ma' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
