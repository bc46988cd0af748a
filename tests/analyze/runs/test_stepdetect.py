"""Step detection: hand-built series whose steps are known, and asv's public step-detection cases
(airspeed-velocity/asv test/test_step_detect.py) re-derived for this module's API."""

from __future__ import annotations

import random

import numpy as np
import pytest

from stepscope.analyze.runs.stepdetect import (
    PottsFit,
    StepFit,
    detect_steps,
    fit_potts,
    level_change,
    noise_sigma,
    regressions,
    segment_cost,
    weighted_median,
    window_costs,
)


def ends(fit: StepFit | PottsFit) -> list[int]:
    return [e for _, e in fit.segments]


# ------------------------------------------------------------------------------------ hand-built series


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


def test_single_commit_spikes_never_make_steps() -> None:
    rng = np.random.default_rng(21)
    with_steps = 0
    for _ in range(50):
        y = 1 + 0.01 * rng.standard_normal(40)
        at = rng.choice(np.arange(1, 39, 3), size=3, replace=False) + rng.integers(0, 2, size=3)  # never adjacent
        y[at] *= 1 + rng.choice([-1, 1], size=3) * rng.uniform(0.1, 0.5, size=3)  # 10-50% one-commit spikes
        with_steps += bool(detect_steps(y).steps)
    assert with_steps == 0


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


def test_noise_estimate_and_correlation_are_reported() -> None:
    rng = np.random.default_rng(9)
    white = 1 + 0.02 * rng.standard_normal(200)
    fit = detect_steps(white)
    assert fit.sigma == pytest.approx(0.02, rel=0.2) and abs(fit.rho) < 0.2
    e = np.zeros(300)
    for i in range(1, 300):
        e[i] = 0.8 * e[i - 1] + 0.01 * rng.standard_normal()
    fit = detect_steps(1 + e)
    assert fit.steps == () and 0.6 < fit.rho < 0.95
    assert fit.noise_sd == pytest.approx(0.01 / np.sqrt(1 - 0.64), rel=0.3)


def test_repeat_noise_is_a_floor_not_a_replacement() -> None:
    rng = np.random.default_rng(13)
    y = 1 + 0.01 * rng.standard_normal(30)
    y[15:] += 0.05
    assert [s.index for s in detect_steps(y).steps] == [15]
    # repeats claiming each point is known to 5%: a 5% step is then within the noise
    assert detect_steps(y, sigma=0.05).steps == ()
    assert detect_steps(y, sigma=0.05).sigma >= 0.05
    # repeats claiming 0.1%: the series' own residuals (1%) still set the noise, no false steps appear
    fit = detect_steps(y, sigma=0.001)
    assert [s.index for s in fit.steps] == [15] and fit.sigma == pytest.approx(0.01, rel=0.3)
    # per-point sigma: the same as weights 1 / sigma plus the floor
    ps = np.full(30, 0.002)
    ps[3] = ps[4] = 1.0  # two commits measured badly weigh almost nothing
    y2 = y.copy()
    y2[3:5] += 0.3
    assert [s.index for s in detect_steps(y2).steps] == [3, 5, 15]  # unweighted: a two-commit excursion
    assert [s.index for s in detect_steps(y2, point_sigma=ps).steps] == [15]


def test_level_change_sees_gradual_creep_against_the_baseline() -> None:
    rng = np.random.default_rng(17)
    stepped = 0
    for _ in range(20):
        y = 1 + 0.01 * rng.standard_normal(30)
        y[10:] *= 1.04
        y[20:] *= 1.04
        fit = detect_steps(y)
        # no single step clears a 7% threshold, but the end level against the first five commits does
        assert all((s.relative_change or 0) < 0.07 for s in fit.steps)
        lc = level_change(y, fit, baseline=(0, 5))
        assert lc.relative_change is not None and lc.relative_change > 0.06
        assert lc.z_independent > 3
        if fit.steps:  # the steps were told from wandering noise: the correlated-noise z agrees
            stepped += 1
            assert lc.z > 5 and abs(fit.rho) < 0.5
            # the regression walk names where the creep began (or the step that alone clears 5%)
            assert regressions(fit, threshold=0.05)[0].index in (10, 20)
        else:  # read as wandering noise: the correlated-noise z is honest about that
            assert fit.rho > 0.5 and lc.z < lc.z_independent
    assert stepped >= 8  # 4% steps (4 noise sd) held 10 commits each: about half are told from AR(1) noise


def test_level_change_sees_a_drift_the_steps_do_not_show() -> None:
    rng = np.random.default_rng(19)
    y = 1 + 0.003 * np.arange(40) + 0.01 * rng.standard_normal(40)
    fit = detect_steps(y)
    lc = level_change(y, fit, baseline=(0, 5))
    assert lc.relative_change == pytest.approx(0.003 * 35, abs=0.03)
    # the drift is read as strongly correlated noise, so its standard error is honest about that
    assert fit.rho > 0.5 and lc.z > 1
    flat = 1 + 0.01 * rng.standard_normal(40)
    lc0 = level_change(flat, detect_steps(flat), baseline=(0, 5))
    assert abs(lc0.z) < 3


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="3 weights for 4 points"):
        detect_steps([1.0, 2.0, 3.0, 4.0], weights=[1, 1, 1])
    with pytest.raises(ValueError, match="min_size"):
        detect_steps([1.0] * 5, min_size=0)
    with pytest.raises(ValueError, match="not both"):
        detect_steps([1.0] * 5, weights=[1] * 5, point_sigma=[1] * 5)
    with pytest.raises(ValueError, match="1-D"):
        detect_steps(np.ones((3, 3)))


def test_to_dict_carries_the_noise_model() -> None:
    d = detect_steps([1.0] * 6 + [2.0] * 6).to_dict()
    assert d["segments"] == [[0, 6], [6, 12]] and {"sigma", "gamma", "rho", "noise_sd"} <= set(d)


# ------------------------------------------------------------------------------- asv's cases, re-derived


def staircase_100(rng: np.random.Generator) -> np.ndarray:
    t = np.arange(100)
    y0 = 0.4 * (t >= 5) + 0.9 * (t >= 10) - 0.2 * (t >= 20) + 0.2 * (t >= 50) + 1.1 * (t >= 70)
    return y0 + 0.05 * rng.random(100)


def staircase_3000() -> np.ndarray:
    t = np.arange(3000)
    return (0.4 * (t >= 10) + 0.9 * (t >= 30) - 0.2 * (t >= 200) + 0.2 * (t >= 600) + 1.1 * (t >= 2500)
            - 0.5 * (t >= 2990))


def test_asv_easy_case() -> None:
    y = [1, 1, 1, 2, 2, 2, 3, 3, 3]
    fit = fit_potts(y, gamma=0.1)
    assert ends(fit) == [3, 6, 9] and fit.levels == (1, 2, 3)
    fit = fit_potts(y, gamma=8.0)
    assert ends(fit) == [9] and fit.levels == (2,)
    assert ends(detect_steps(y, min_size=1)) == [3, 6, 9]


def test_asv_100_point_case_exact_and_approximate() -> None:
    y = staircase_100(np.random.default_rng(1234))
    exact = fit_potts(y, gamma=0.1)
    approx = fit_potts(y, gamma=0.1, max_size=8)
    assert exact.exact and not approx.exact
    assert ends(exact) == ends(approx) == [5, 10, 20, 50, 70, 100]
    assert ends(detect_steps(y)) == [5, 10, 20, 50, 70, 100]


def test_asv_3000_point_case() -> None:
    rng = np.random.default_rng(1234)
    y0 = staircase_3000()
    # a small amount of noise does not disturb the steps
    assert ends(detect_steps(y0 + 0.05 * rng.standard_normal(3000))) == [10, 30, 200, 600, 2500, 2990, 3000]
    # large noise hides them all
    assert ends(detect_steps(y0 + 5.0 * rng.standard_normal(3000))) == [3000]


def test_asv_10000_point_case() -> None:
    # weakly noisy data followed by 7,000 noisier points keeps the former's steps (and adds the drop at 3000)
    rng = np.random.default_rng(1234)
    y = np.concatenate([staircase_3000() + 0.025 * rng.random(3000), 0.025 * rng.standard_normal(7000)])
    assert ends(detect_steps(y)) == [10, 30, 200, 600, 2500, 2990, 3000, 10000]


def test_asv_autocorrelated_case() -> None:
    j = np.arange(1000)
    y = 0.2 * np.cos(j / 100.0) + 1.0 * (j >= 500)
    assert ends(detect_steps(y)) == [500, 1000]


def test_asv_zero_variance_case() -> None:
    fit = detect_steps([1.0] * 1000)
    assert ends(fit) == [1000] and fit.levels == (1.0,)


def test_asv_weighted_and_missing_case() -> None:
    y = staircase_100(np.random.default_rng(1234))
    w = np.ones(100)
    y[15] = y[16] = 2.0  # two wild commits in the 1.3 segment
    assert ends(fit_potts(y, gamma=0.1, weights=w)) == [5, 10, 15, 17, 20, 50, 70, 100]
    assert [s.index for s in detect_steps(y, weights=w, min_size=1).steps] == [5, 10, 15, 17, 20, 50, 70]
    # weighted down (as a commit with wide repeats is), they no longer pay for a segment
    w[15] = w[16] = 0.1
    assert ends(fit_potts(y, gamma=0.1, weights=w)) == [5, 10, 20, 50, 70, 100]
    assert [s.index for s in detect_steps(y, weights=w, min_size=1).steps] == [5, 10, 20, 50, 70]
    # a missing weight (None or NaN) is the median weight
    wl: list[float | None] = [float(v) for v in w]
    wl[23] = None
    wl[40] = float("nan")
    assert [s.index for s in detect_steps(y, weights=wl, min_size=1).steps] == [5, 10, 20, 50, 70]
    # a missing value is refused, naming where (the caller drops it and maps the error to one line)
    y[35] = float("nan")
    with pytest.raises(ValueError, match="position 35"):
        detect_steps(y, weights=w)


def test_asv_zero_weight_case() -> None:
    t = np.arange(50)
    y = 1.0 * (t > 25)
    w = np.where((t >= 20) & (t < 30), 0.0, 1.0)
    # zero-weight points carry no information: the step lies somewhere among them
    fit = detect_steps(y, weights=w)
    assert len(fit.steps) == 1 and 20 <= fit.steps[0].index <= 30
    # a tiny weight is enough to place it
    w = np.where(w == 0, 1e-6, 1.0)
    assert detect_steps(y, weights=w).segments == ((0, 26), (26, 50))


def test_asv_regression_thresholds() -> None:
    def fit_of(levels: list[float]) -> StepFit:
        return detect_steps([v for v in levels for _ in range(5)])

    fit = fit_of([1.0, 1.1, 2.0])
    assert [(r.index, r.before, r.after) for r in regressions(fit, threshold=0.05)] == [(5, 1.0, 1.1), (10, 1.1, 2.0)]
    assert [(r.index, r.before, r.after) for r in regressions(fit, threshold=0.2)] == [(10, 1.1, 2.0)]
    assert [(r.index, r.before, r.after) for r in regressions(fit, threshold=0.8)] == [(10, 1.1, 2.0)]
    assert regressions(fit, threshold=1.1) == ()  # 2.0 vs the best 1.0 is +100%
    # a later partial recovery: the latest level is within the threshold of the best
    assert regressions(fit_of([1.0, 1.3, 1.1]), threshold=0.2) == ()
    r = regressions(fit_of([1.0, 1.3, 1.1]), threshold=0.05)
    assert [(x.index, x.after) for x in r] == [(5, 1.1)] and r[0].relative_change == pytest.approx(0.1)
    # higher is better (throughput): a drop is the regression
    assert [x.index for x in regressions(fit_of([2.0, 1.0]), lower_is_better=False)] == [5]
    assert regressions(fit_of([1.0, 2.0]), lower_is_better=False) == ()


def test_asv_min_size_case() -> None:
    y = np.ones(50)
    y[25] = 1000.0
    assert detect_steps(y).segments == ((0, 50),)  # a single outlier is not a segment
    y[26] = 1000.0
    assert detect_steps(y).segments == ((0, 25), (25, 27), (27, 50))
    fit3 = detect_steps(y, min_size=3)  # a 3-point segment may hold the two outliers and one ordinary point
    assert all(b - a >= 3 for a, b in fit3.segments) and len(fit3.segments) == 3
    fit = fit_potts([1, 1, 5, 1, 1, 1], gamma=0.1, min_size=2)
    assert all(b - a >= 2 for a, b in fit.segments)


def naive_cost(y: list[float], w: list[float]) -> float:
    """Smallest sum w |y - c| by trying every data point as c (the cost is piecewise linear in c)."""
    return min(sum(wi * abs(yi - c) for yi, wi in zip(y, w)) for c in y)


def test_asv_l1_distance_case() -> None:
    random.seed(1)
    datasets = [([1, 1, 10, 3, 5, 1, -16, -3, 4, 9], [1.0] * 10),
                ([random.gauss(0, 1) for _ in range(50)], [1.0] * 50),
                ([1, 2, 3, 4], [1.0, 2.0, 1.0, 2.0]),
                ([random.gauss(0, 1) for _ in range(30)], [random.uniform(0.1, 3) for _ in range(30)])]
    for y, w in datasets:
        yf = [float(v) for v in y]
        cost, med = window_costs(np.array(yf), np.array(w), len(yf))
        for i in range(len(yf)):
            for j in range(i + 1, len(yf) + 1):
                d_ref = naive_cost(yf[i:j], w[i:j])
                m, d = segment_cost(yf, w, i, j)
                assert d == pytest.approx(d_ref, abs=1e-10), (i, j)
                assert cost[j, j - i - 1] == pytest.approx(d_ref, abs=1e-10), (i, j)
                # the median minimises the cost (the midpoint when two points tie)
                assert float(np.sum(np.array(w[i:j]) * np.abs(np.array(yf[i:j]) - m))) == pytest.approx(d_ref)
                assert med[j, j - i - 1] == pytest.approx(m)
                if all(v == w[0] for v in w):
                    assert m == pytest.approx(float(np.median(yf[i:j])))
    assert weighted_median([1, 2, 3, 4], [1, 2, 1, 2]) == 2.5  # cumulative weight reaches half at 2 exactly


# ------------------------------------------------------------------------------------ solver correctness


def test_approximate_solver_matches_the_exact_one() -> None:
    rng = np.random.default_rng(31)
    worse = []
    for _ in range(30):
        n = int(rng.integers(60, 250))
        y = np.cumsum(rng.standard_normal(n) * (rng.random(n) < 0.05)) + 0.3 * rng.standard_normal(n)
        g = float(rng.uniform(0.3, 3))
        exact = fit_potts(y, gamma=g, min_size=2)
        approx = fit_potts(y, gamma=g, min_size=2, max_size=16)
        assert approx.objective >= exact.objective - 1e-9
        worse.append(approx.objective / exact.objective - 1)
    # a local search: most fits are the exact optimum, the rest within a few percent of its objective
    assert np.median(worse) < 1e-12 and max(worse) < 0.05


def test_exact_solver_against_brute_force() -> None:
    import itertools

    rng = np.random.default_rng(4)
    for _ in range(20):
        y = list(np.round(rng.standard_normal(9) * 2, 1))
        g = float(rng.uniform(0.2, 4))
        best = np.inf
        for k in range(0, 8):
            for cuts in itertools.combinations(range(1, 9), k):
                b = [0, *cuts, 9]
                if any(b[i + 1] - b[i] < 2 for i in range(len(b) - 1)):
                    continue
                best = min(best, sum(segment_cost(y, None, b[i], b[i + 1])[1] for i in range(len(b) - 1))
                           + g * (len(b) - 1))
        assert fit_potts(y, gamma=g, min_size=2).objective == pytest.approx(best)


def test_scale_free() -> None:
    rng = np.random.default_rng(3)
    y = 1 + 0.01 * rng.standard_normal(60)
    y[20:] += 0.04
    y[40:] -= 0.06
    fit = detect_steps(y)
    assert [s.index for s in fit.steps] == [20, 40]
    for k in (1e-3, 1e6):
        other = detect_steps(y * k)
        assert other.segments == fit.segments and other.sigma == pytest.approx(fit.sigma * k)
