"""tune's coordinate-descent search on deterministic objectives: a real function of the settings with seeded
run-to-run noise stands in for the runs, so the optimum and the number of runs are known in advance."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pytest

from stepscope.analyze.runs.tune import Dimension, Measure, Outcome, search

INTER = Dimension("inter", ("0", "1", "2", "4"), "0")
INTRA = Dimension("intra", ("1", "2", "4"), "1")
INTER_INTRA_START = {"inter": "0", "intra": "1"}


def throughput(s: Mapping[str, str]) -> float:
    """Samples/s peaking at inter=2, intra=2 (a bowl in log space), 30% apart between neighbours."""
    a, b = INTER.values.index(s["inter"]), INTRA.values.index(s["intra"])
    return 1000.0 * math.exp(-0.3 * abs(a - 2) - 0.3 * abs(b - 1))


class Noisy:
    """The objective times seeded log-normal noise (``sigma`` per run); counts the calls."""

    def __init__(self, sigma: float, seed: int = 0, fail: set[tuple[str, str]] | None = None) -> None:
        self.rng, self.sigma, self.calls, self.fail = np.random.default_rng(seed), sigma, 0, fail or set()

    def __call__(self, s: Mapping[str, str], note: str) -> float | None:
        self.calls += 1
        if (s["inter"], s["intra"]) in self.fail:
            return None
        return throughput(s) * math.exp(self.sigma * float(self.rng.standard_normal()))


def flat(level: float, sigma: float, seed: int) -> Measure:
    """The same throughput at every setting, times seeded log-normal noise."""
    rng = np.random.default_rng(seed)
    return lambda s, n: level * math.exp(sigma * float(rng.standard_normal()))


def test_finds_the_optimum_in_fewer_runs_than_the_grid() -> None:
    grid = len(INTER.values) * len(INTRA.values)
    for seed in range(5):
        f = Noisy(0.02, seed)
        r = search([INTER, INTRA], f, budget=200, metric="samples_per_s")
        assert r.best == {"inter": "2", "intra": "2"}, (seed, r.comparisons)
        # each move is a verdict at 99% over the search (split over looks and candidates): 5 blocks decide a 30%
        # step at 2% noise; a sweep of 5 repeats runs 60 and decides nothing at that level
        assert r.runs == f.calls and r.runs < 5 * grid
        assert not r.budget_exhausted and not r.start_failed
        # start (0, 1) -> best (2, 2): throughput ratio exp(0.6 + 0.3)
        assert r.gain is not None and r.gain_low is not None and r.gain_high is not None
        assert r.gain_low < math.exp(0.9) < r.gain_high and r.gain == pytest.approx(math.exp(0.9), rel=0.05)
        moves = [c for c in r.comparisons if c.outcome is Outcome.BETTER]
        assert [c.candidate for c in moves] == [{"inter": "1", "intra": "1"}, {"inter": "2", "intra": "1"},
                                                {"inter": "2", "intra": "2"}]


def test_a_time_metric_moves_the_other_way() -> None:
    def step_time(s: Mapping[str, str], note: str) -> float:
        return 1.0 / throughput(s)

    r = search([INTER, INTRA], step_time, budget=100, metric="step_time_median_s", higher_is_better=False)
    assert r.best == {"inter": "2", "intra": "2"}
    assert r.gain == pytest.approx(math.exp(-0.9))  # noise-free: the interval is the point
    assert r.gain_low == pytest.approx(r.gain) and r.gain_high == pytest.approx(r.gain)


def test_flat_objective_stays_at_the_start_and_says_so() -> None:
    mid = Dimension("inter", ("0", "1", "2", "4"), "1")
    r = search([mid, INTRA], flat(500.0, 0.01, 0), budget=100)
    assert r.best == r.start == {"inter": "1", "intra": "1"} and r.gain is None
    assert {c.outcome for c in r.comparisons} <= {Outcome.NO_GAIN, Outcome.CANNOT_TELL}
    # each neighbour (inter 0 and 2, intra 2), and past a flat one the next (inter 4, intra 4), tried once
    tried = sorted(c.candidate["inter"] + c.candidate["intra"] for c in r.comparisons)
    assert set(tried) <= {"01", "21", "12", "41", "14"} and {"01", "21", "12"} <= set(tried)
    assert len(tried) == len(set(tried)) and r.runs <= 4 * 3 + 3 * 4 * 2


def test_a_plateau_is_crossed_once() -> None:
    """Workers 0 and 1 equally fast (a sleep-bound loader: one worker only moves the wait), 2 faster: the search
    passes the plateau; past a second plateau it stops."""
    workers = Dimension("num_workers", ("0", "1", "2", "4", "8"), "0")
    speed = {"0": 100.0, "1": 100.0, "2": 200.0, "4": 200.0, "8": 200.0}
    r = search([workers], lambda s, n: speed[s["num_workers"]], budget=100)
    assert r.best == {"num_workers": "2"} and r.gain == pytest.approx(2.0)
    assert [(c.candidate["num_workers"], c.outcome) for c in r.comparisons] == [
        ("1", Outcome.NO_GAIN), ("2", Outcome.BETTER), ("4", Outcome.NO_GAIN), ("8", Outcome.NO_GAIN)]


def test_budget_stops_before_a_block_that_would_exceed_it() -> None:
    f = Noisy(0.02)
    r = search([INTER, INTRA], f, budget=7)
    assert r.runs == f.calls <= 7 and r.budget_exhausted
    assert r.best == {"inter": "1", "intra": "1"}  # the one comparison that finished (3 blocks of 2 runs)


def test_a_failing_candidate_is_dropped_and_a_failing_start_stops() -> None:
    f = Noisy(0.02, fail={("1", "1")})
    r = search([INTER, INTRA], f, budget=60)
    assert r.comparisons[0].outcome is Outcome.FAILED and r.comparisons[0].candidate == {"inter": "1", "intra": "1"}
    # inter cannot pass the failing neighbour at intra=1; once intra moved, inter is tried again and moves
    assert r.best == {"inter": "2", "intra": "2"}
    assert r.comparisons[1].candidate == {"inter": "0", "intra": "2"} and r.comparisons[1].outcome is Outcome.BETTER
    g = Noisy(0.02, fail={("0", "1")})
    r = search([INTER, INTRA], g, budget=60)
    assert r.start_failed and r.runs == g.calls == 1 and r.best == r.start and not r.comparisons


def test_noisier_runs_take_more_pairs_and_never_move_on_a_draw() -> None:
    """A/A: two settings with the same throughput under 5% run-to-run noise: no search of 40 moves."""
    same = Dimension("x", ("a", "b"), "a")
    moved = 0
    for seed in range(40):
        r = search([same], flat(100.0, 0.05, seed), budget=50)
        moved += r.best != r.start
        assert r.comparisons[0].pairs >= 3
    assert moved == 0


def test_a_flat_objective_moves_in_at_most_one_search_in_100() -> None:
    """A/A over the whole search: every setting equally fast under a saturated host's 20% run spread (the
    threshold screens nothing). The level is split over the looks and the candidates of a first pass, so at most
    1% of searches accept a move; the control, each comparison at 95% on its own (the old rule), moves several
    times as often, so this test can fail."""
    n = 250
    moved = sum(search([INTER, INTRA], flat(100.0, 0.20, seed), budget=200).best != INTER_INTRA_START
                for seed in range(n))
    assert moved <= 4, moved  # 1% of 250 is 2.5; 4 leaves room for chance
    control = sum(search([INTER, INTRA], flat(100.0, 0.20, seed), budget=200, confidence=0.95, comparisons=1,
                         min_pairs=2, max_pairs=2).best != INTER_INTRA_START for seed in range(n))
    assert control >= moved + 5, (moved, control)


def test_bad_space_is_refused() -> None:
    with pytest.raises(ValueError, match="start"):
        Dimension("x", ("1", "2"), "3")
    with pytest.raises(ValueError, match="no dimension"):
        search([], lambda s, n: 1.0, budget=5)
    with pytest.raises(ValueError, match="min_pairs"):
        search([INTER], lambda s, n: 1.0, budget=5, min_pairs=1)

