"""The regressions page's statistic: each detected step checked on its runs as `stepscope check` does.

Series are built from RunPoints with lognormal per-run noise; the expected numbers come from how the
series were made (the injected ratio, the commit it starts at), not from the code under test."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from stepscope.analyze.runs.history import RunPoint, metric_history
from stepscope.analyze.runs.historysteps import StepKind, history_steps
from stepscope.analyze.runs.regression import MetricVerdict

NOISE = 0.02
"""Between-run standard deviation of log step time (2%)."""


def sha(i: int) -> str:
    return hashlib.sha1(f"c{i}".encode()).hexdigest()


def series(rng: np.random.Generator, commits: int, repeats: int, *, factor_from: int | None = None,
           factor: float = 1.0, metric: str = "step_time_median_s", base: float = 0.1,
           noise: float = NOISE) -> list[RunPoint]:
    """Runs of ``commits`` commits (one an hour), ``repeats`` each; from commit ``factor_from`` on the
    metric is multiplied by ``factor``."""
    out = []
    for c in range(commits):
        scale = factor if factor_from is not None and c >= factor_from else 1.0
        for r in range(repeats):
            v = base * scale * float(np.exp(rng.normal(0, noise)))
            out.append(RunPoint(run_id=f"r{c:03d}-{r}", name="n", status="completed", start_s=1e9 + c * 3600 + r,
                                commit=sha(c), branch="main", dirty=False, commit_time_s=1e9 + c * 3600,
                                subject=f"commit {c}", group=None, metrics={metric: v}))
    return out


def test_an_injected_20_percent_step_is_one_regression_at_its_commit() -> None:
    h = metric_history(series(np.random.default_rng(1), 20, 3, factor_from=10, factor=1.2), "step_time_median_s")
    (step,) = history_steps(h)
    assert step.kind is StepKind.REGRESSION and step.check.verdict is MetricVerdict.REGRESSED
    assert step.commit == sha(10) and h.points[step.last_good].commit == sha(9)
    assert step.last_good_run.startswith("r009-") and step.first_bad_run.startswith("r010-")
    change, low, high = step.change or (0.0, 0.0, 0.0)
    assert low < 0.20 < high and low > 0.10 and abs(change - 0.20) < 0.05
    # three commits a side, three runs each, as `check --window 3` pools them
    assert step.check.baseline_n == 9 and step.check.candidate_n == 9
    assert step.before_commits == tuple(sha(i) for i in (7, 8, 9))
    assert step.after_commits == tuple(sha(i) for i in (10, 11, 12))


def test_a_throughput_drop_is_a_regression_and_a_rise_an_improvement() -> None:
    down = metric_history(series(np.random.default_rng(2), 16, 3, factor_from=8, factor=1 / 1.2,
                                 metric="samples_per_s", base=500.0), "samples_per_s")
    (s,) = history_steps(down)
    assert s.kind is StepKind.REGRESSION and s.change is not None and s.change[2] < 0
    assert s.change[1] < 1 / 1.2 - 1 < s.change[2]
    up = metric_history(series(np.random.default_rng(3), 16, 3, factor_from=8, factor=1.2,
                               metric="samples_per_s", base=500.0), "samples_per_s")
    (s,) = history_steps(up)
    assert s.kind is StepKind.IMPROVEMENT and s.change is not None and s.change[1] > 0


def test_a_step_below_the_threshold_is_not_listed() -> None:
    h = metric_history(series(np.random.default_rng(4), 30, 5, factor_from=15, factor=1.03, noise=0.005),
                       "step_time_median_s")
    kinds = {s.kind for s in history_steps(h, threshold=0.05)}
    assert StepKind.REGRESSION not in kinds
    listed = history_steps(h, threshold=0.01)  # the same step is a regression once 3% is worth listing
    assert [s.commit for s in listed if s.kind is StepKind.REGRESSION] == [sha(15)]


def test_one_run_a_side_cannot_be_confirmed() -> None:
    h = metric_history(series(np.random.default_rng(5), 12, 1, factor_from=6, factor=1.3), "step_time_median_s")
    (s,) = history_steps(h, window=1)
    assert s.kind is StepKind.NOT_CONFIRMED and s.check.verdict is MetricVerdict.CANNOT_TELL
    assert "need 3" in s.check.reason
    (s,) = history_steps(h, window=3)  # one run a commit, three commits a side: enough
    assert s.kind is StepKind.REGRESSION


def test_aa_series_list_nothing() -> None:
    """300 histories of unchanged code (identical run distributions): no listed regression or improvement,
    however many steps the fit places on the noise."""
    rng = np.random.default_rng(6)
    listed = placed = 0
    for _ in range(300):
        h = metric_history(series(rng, 20, 3), "step_time_median_s")
        steps = history_steps(h)
        placed += len(steps)
        listed += sum(s.kind is not StepKind.NOT_CONFIRMED for s in steps)
    assert listed == 0, (listed, placed)


def test_window_must_be_positive() -> None:
    h = metric_history(series(np.random.default_rng(7), 6, 3), "step_time_median_s")
    with pytest.raises(ValueError, match="window"):
        history_steps(h, window=0)
