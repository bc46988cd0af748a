"""Per-commit history on hand-built runs: grouping, ordering, dirty / no-commit points, baseline, steps."""

from __future__ import annotations

import math

import pytest

from stepscope.analyze.runs.history import (
    NO_COMMIT,
    Order,
    RunPoint,
    commit_points,
    lower_is_better,
    metric_history,
    pooled,
    tracked_metrics,
)
from stepscope.analyze.runs.regression import CheckVerdict, MetricVerdict, check_metric, check_regression, locate_step


def rp(run_id: str, commit: str | None, ct: float | None, start: float, value: float, *, dirty: bool = False,
       status: str = "completed", metric: str = "step_time_median_s") -> RunPoint:
    return RunPoint(run_id=run_id, name="b", status=status, start_s=start, commit=commit, branch="main",
                    dirty=dirty, commit_time_s=ct, subject=f"subject {commit}", group=None, metrics={metric: value})


def test_points_grouped_by_commit_and_ordered_by_commit_time() -> None:
    runs = [rp("r1", "bbb", 200, 10, 2.0), rp("r2", "aaa", 100, 20, 1.0), rp("r3", "aaa", 100, 30, 3.0),
            rp("r4", "aaa", 100, 40, 2.0), rp("r5", None, None, 5, 9.0), rp("r6", "aaa", 100, 50, 7.0, dirty=True),
            rp("r7", "bbb", 200, 60, 100.0, status="failed")]
    points, no_commit = commit_points(runs, "step_time_median_s")
    assert [p.key for p in points] == ["aaa", "aaa+dirty", "bbb"]
    a = points[0]
    assert a.values == (1.0, 3.0, 2.0) and a.median == 2.0 and a.run_ids == ("r2", "r3", "r4")
    # 3 repeats: the 95% t interval on logs (t(0.975, 2 df) = 4.303, from a printed table)
    logs = [math.log(v) for v in (1.0, 3.0, 2.0)]
    m = sum(logs) / 3
    se = math.sqrt(sum((x - m) ** 2 for x in logs) / 2 / 3)
    assert (a.ci_low, a.ci_high) == pytest.approx((math.exp(m - 4.303 * se), math.exp(m + 4.303 * se)), rel=1e-3)
    assert a.interval == "t95" and a.representative_run == "r4"
    assert points[2].values == (2.0,) and points[2].interval == "single"  # the failed run is left out
    two, _ = commit_points([*runs[:2], rp("r8", "bbb", 200, 70, 4.0)], "step_time_median_s")
    bbb = next(p for p in two if p.key == "bbb")
    assert (bbb.ci_low, bbb.ci_high, bbb.interval) == (2.0, 4.0, "min-max") and "min–max" in bbb.interval_label
    assert no_commit is not None and no_commit.key == NO_COMMIT and no_commit.values == (9.0,)
    by_date, _ = commit_points(runs, "step_time_median_s", order=Order.DATE)
    assert [p.key for p in by_date] == ["bbb", "aaa", "aaa+dirty"]


def test_relative_to_baseline_and_step() -> None:
    runs = [rp(f"r{i}", f"c{i:02d}", 1000 + i, i, 1.0 if i < 6 else 1.2) for i in range(12)]
    h = metric_history(runs, "step_time_median_s", baseline="c03")
    assert h.baseline == "c03"
    assert [p.relative for p in h.points] == pytest.approx([1.0] * 6 + [1.2] * 6)
    assert h.steps == ((5, 6, pytest.approx(0.2)),)
    step = locate_step(h, after="c00", upto="c11")
    assert step is not None and (step.last_good, step.first_bad) == ("c05", "c06")
    assert step.first_bad_run == "r6"
    assert locate_step(h, after="c07", upto="c11") is None  # the step is before the window


def test_default_baseline_is_first_clean_point() -> None:
    runs = [rp("d", "c0", 1, 1, 4.0, dirty=True), rp("a", "c1", 2, 2, 2.0), rp("b", "c2", 3, 3, 3.0)]
    h = metric_history(runs, "step_time_median_s")
    assert h.baseline == "c1" and [p.relative for p in h.points] == [2.0, 1.0, 1.5]


def test_directions_and_tracked_metrics() -> None:
    assert lower_is_better("step_time_median_s") and lower_is_better("region.fwd.p50_s")
    assert not lower_is_better("samples_per_s") and not lower_is_better("metric.accuracy")
    assert lower_is_better("metric.loss")
    r = RunPoint("x", "b", "completed", 0, "c", None, False, 0, None, None,
                 {"step_time_median_s": 1.0, "samples_per_s": 0.0, "region.a.share": 0.5, "region.a.p50_s": 0.1,
                  "region.tiny.share": 0.01, "region.tiny.p50_s": 0.001, "metric.loss": 0.3})
    assert tracked_metrics([r]) == ["step_time_median_s", "region.a.p50_s", "metric.loss"]


def test_pooled_repeats() -> None:
    p = pooled([rp("a", "c", 1, 1, 1.0), rp("b", "c", 1, 2, 5.0), rp("c", "d", 1, 3, 3.0)], "step_time_median_s")
    assert p is not None and p.median == 3.0 and len(p.values) == 3


def test_check_metric_rules() -> None:
    base, slow = [1.00, 1.01, 0.99], [1.10, 1.11, 1.09]
    c = check_metric("step_time_median_s", base, slow, threshold=0.05)
    assert c.verdict is MetricVerdict.REGRESSED and c.change == pytest.approx(0.1, abs=1e-3)
    assert check_metric("step_time_median_s", base, slow, threshold=0.2).verdict is MetricVerdict.NO_SIGNIFICANT_CHANGE
    assert check_metric("step_time_median_s", slow, base, threshold=0.05).verdict is MetricVerdict.IMPROVED
    # throughput: higher is better, so lower throughput is the regression
    t = check_metric("samples_per_s", [100, 101, 99], [90, 91, 89], threshold=0.05)
    assert t.verdict is MetricVerdict.REGRESSED and t.worse == pytest.approx(100 / 90, rel=1e-4)
    # overlapping noisy repeats: a 10% median shift that the data cannot show, nor a 5% regression: cannot tell
    noisy = check_metric("step_time_median_s", [1.0, 1.3, 0.8], [1.1, 0.9, 1.4], threshold=0.05)
    assert noisy.verdict is MetricVerdict.CANNOT_TELL and "MDE" in noisy.reason
    few = check_metric("step_time_median_s", [1.0], slow, threshold=0.05)
    assert few.verdict is MetricVerdict.CANNOT_TELL and "need 3" in few.reason
    # the printed numbers are the tested ones: geometric means of the per-run values
    assert c.baseline_median == pytest.approx((1.00 * 1.01 * 0.99) ** (1 / 3))
    assert c.confidence == 0.98 and c.mde is not None and c.mde > 0


def test_check_regression_overall() -> None:
    r = check_regression({"step_time_median_s": [1, 1.01, 0.99]}, {"step_time_median_s": [1.2, 1.21, 1.19]},
                         ["step_time_median_s"], threshold=0.05)
    assert r.verdict is CheckVerdict.REGRESSION and r.verdict.exit_code == 1
    # a metric that is not gated is reported, never a failure
    r = check_regression({"step_time_median_s": [1, 1.01, 0.99], "samples_per_s": [100, 101, 99]},
                         {"step_time_median_s": [1, 1.01, 0.99], "samples_per_s": [80, 81, 79]},
                         ["step_time_median_s", "samples_per_s"], threshold=0.05, gated=["step_time_median_s"])
    assert r.verdict is CheckVerdict.PASS and r.checks[1].verdict is MetricVerdict.REGRESSED
    assert not r.checks[1].gated
    # gradual creep: 3% against the window, 9% against the older anchor
    r = check_regression({"step_time_median_s": [1.06, 1.061, 1.059]}, {"step_time_median_s": [1.09, 1.091, 1.089]},
                         ["step_time_median_s"], threshold=0.05, creep={"step_time_median_s": [1.0, 1.001, 0.999]})
    assert r.verdict is CheckVerdict.REGRESSION
    assert [c.against for c in r.checks if c.verdict is MetricVerdict.REGRESSED] == ["creep"]
    r = check_regression({"step_time_median_s": [1]}, {"step_time_median_s": [1.2, 1.21, 1.2]},
                         ["step_time_median_s"], threshold=0.05)
    assert r.verdict is CheckVerdict.CANNOT_TELL and r.verdict.exit_code == 2 and "baseline has 1 run" in r.reason
    assert check_regression({}, {}, [], threshold=0.05).verdict is CheckVerdict.CANNOT_TELL
