"""Step detection on hand-built series whose steps are known."""

from __future__ import annotations

import numpy as np
import pytest

from stepscope.analyze.stepdetect import detect_steps, noise_sigma, segment_costs


def test_clean_step_is_found_at_its_first_point() -> None:
    y = [10.0] * 8 + [11.0] * 7
    fit = detect_steps(y)
    assert [s.index for s in fit.steps] == [8]
    assert fit.steps[0].before == 10.0 and fit.steps[0].after == 11.0
    assert fit.steps[0].relative_change == pytest.approx(0.1)
    assert fit.segments == ((0, 8), (8, 15))


def test_one_noisy_commit_does_not_make_a_step() -> None:
    rng = np.random.default_rng(3)
    y = 1 + 0.01 * rng.standard_normal(20)
    y[9] = 1.4  # one wild commit in the middle
    assert detect_steps(y).steps == ()
    y[-1] = 1.4  # and at the very end: a single point cannot form a segment
    assert detect_steps(y).steps == ()


def test_step_in_noise_with_outliers() -> None:
    rng = np.random.default_rng(7)
    y = 5.0 + 0.05 * rng.standard_normal(30)
    y[17:] += 0.5
    y[5] += 2.0
    y[24] -= 1.5
    fit = detect_steps(y)
    assert [s.index for s in fit.steps] == [17]


def test_pure_noise_has_no_steps() -> None:
    rng = np.random.default_rng(11)
    false = sum(bool(detect_steps(1 + 0.02 * rng.standard_normal(n)).steps) for n in (20, 50, 100) for _ in range(10))
    assert false == 0


def test_two_steps_down_then_up() -> None:
    y = [3.0] * 6 + [2.0] * 6 + [4.0] * 6
    assert [(s.index, s.after) for s in detect_steps(y).steps] == [(6, 2.0), (12, 4.0)]


def test_segment_costs_match_brute_force() -> None:
    rng = np.random.default_rng(0)
    y = list(rng.standard_normal(9))
    costs, meds = segment_costs(y)
    for i in range(9):
        for j in range(i + 1, 10):
            seg = np.array(y[i:j])
            m = float(np.median(seg))
            assert meds[i][j - i - 1] == pytest.approx(m)
            assert costs[i][j - i - 1] == pytest.approx(float(np.abs(seg - m).sum()))


def test_short_and_empty_series() -> None:
    assert detect_steps([]).steps == ()
    fit = detect_steps([1.0, 2.0, 3.0])
    assert fit.steps == () and fit.levels == (2.0,)


def test_noise_sigma_robust_to_a_step() -> None:
    rng = np.random.default_rng(5)
    y = 0.1 * rng.standard_normal(200)
    y[100:] += 50
    assert noise_sigma(y) == pytest.approx(0.1, rel=0.25)
    assert noise_sigma([2.0] * 10) == pytest.approx(0.004)  # the floor: 0.2% of the level
