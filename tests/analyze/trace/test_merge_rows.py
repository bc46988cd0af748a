"""``merge_rows`` (a table's rows merged a block at a time) equals ``merge`` of the same intervals at once."""

from __future__ import annotations

import numpy as np
import pytest

from stepscope.analyze.trace.intervals import MERGE_BLOCK, merge, merge_rows


@pytest.mark.parametrize("sort", [True, False])
@pytest.mark.parametrize("density", [0.0, 0.3, 1.0])
def test_merge_rows_equals_merge(sort: bool, density: float) -> None:
    rng = np.random.default_rng(7)
    n = 2 * MERGE_BLOCK + 1234  # three blocks
    ts = rng.integers(0, 40 * n, n)
    if sort:
        ts.sort()
    dur = rng.integers(0, 200, n)
    dur[rng.random(n) < 0.01] = 50_000  # long ones that span block boundaries
    mask = rng.random(n) < density if density < 1.0 else np.ones(n, dtype=bool)
    if density == 0.3:  # a touching pair at a block boundary: joined, as merge joins them
        mask[MERGE_BLOCK - 1:MERGE_BLOCK + 1] = True
        ts[MERGE_BLOCK] = ts[MERGE_BLOCK - 1] + dur[MERGE_BLOCK - 1]
    got, want = merge_rows(ts, dur, mask), merge(ts[mask], ts[mask] + dur[mask])
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    assert got[0].dtype == np.int64 and got[1].dtype == np.int64
