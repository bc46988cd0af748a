"""Sweep analysis on hand-made run results: means over repeats, heat map, lines, best, failed points."""

from __future__ import annotations

import math

import pytest

from stepscope.analyze.runs.sweep import SweepRun, analyze_sweep, higher_is_better


def _runs() -> list[SweepRun]:
    tp = {("0", "16"): [100, 110], ("0", "32"): [150, 150], ("2", "16"): [300, 320], ("2", "32"): [400, 380],
          ("4", "16"): [310, 290]}
    out = [SweepRun(f"{w}-{b}-{i}", {"workers": w, "batch": b}, "completed", {"samples_per_s": v,
                                                                               "step_time_median_s": 1 / v})
           for (w, b), vals in tp.items() for i, v in enumerate(vals)]
    out.append(SweepRun("4-32-0", {"workers": "4", "batch": "32"}, "failed", {"samples_per_s": None}))
    return out


GRID = {"workers": ["0", "2", "4"], "batch": ["16", "32"]}


def test_points_heatmap_best_and_failed() -> None:
    s = analyze_sweep(_runs(), GRID)
    p = {tuple(x.values.values()): x for x in s.points}
    assert p[("0", "16")].mean == pytest.approx(105)
    assert p[("0", "16")].std == pytest.approx(10 / math.sqrt(2))
    assert (p[("4", "32")].runs, p[("4", "32")].failed, p[("4", "32")].mean) == (0, 1, None)
    assert p[("4", "32")].failed_runs == ("4-32-0",)
    assert s.failed == ("4-32-0",)
    assert s.best is not None and s.best.values == {"workers": "2", "batch": "32"}
    assert s.heatmap is not None
    assert s.heatmap.row_values == ("0", "2", "4") and s.heatmap.col_values == ("16", "32")
    assert s.heatmap.cells == ((105.0, 150.0), (310.0, 390.0), (300.0, None))
    assert [ln.group_value for ln in s.lines] == ["16", "32"]
    assert s.lines[1].mean == (150.0, 390.0, None)
    assert s.to_dict()["schema"] == "stepscope.sweep/1"


def test_lower_is_better_for_times_and_heatmap_axes() -> None:
    s = analyze_sweep(_runs(), GRID, metric="step_time_median_s", heat=("batch", "workers"))
    assert not s.higher_is_better
    assert s.best is not None and s.best.values == {"workers": "2", "batch": "32"}
    assert s.heatmap is not None and s.heatmap.row_param == "batch"
    assert higher_is_better("tokens_per_s") and not higher_is_better("data_wait_share")


def test_three_parameters_heatmap_takes_best_over_the_rest() -> None:
    runs = [SweepRun(f"r{i}", {"a": a, "b": b, "c": c}, "completed", {"samples_per_s": float(i)})
            for i, (a, b, c) in enumerate([(a, b, c) for a in "12" for b in "xy" for c in "pq"])]
    s = analyze_sweep(runs, {"a": ["1", "2"], "b": ["x", "y"], "c": ["p", "q"]})
    # cell (a, b) = max over c: runs are numbered a-major, so c=q (odd) wins
    assert s.heatmap is not None and s.heatmap.cells == ((1.0, 3.0), (5.0, 7.0))
