"""Change-point (step) detection over an ordered series of per-commit values.

**Model.** ``y_i = mu_i + e_i``: a piecewise-constant level ``mu`` (each segment at least ``min_size``
points) plus noise ``e`` that may be autocorrelated, ``e_i = rho * e_(i-1) + a_i``, with independent
innovations ``a_i`` whose scale at point ``i`` is ``b / w_i`` (``w``: relative weights, e.g. from each
commit's repeats). The innovations are taken as Laplace (heavy-tailed), so the fit is an L1 fit: one wild
commit moves a segment's median by little and never pays for a segment of its own.

**Fit.** For a penalty ``gamma`` per segment, the segmentation minimising
``sum_i w_i |y_i - median(segment of i)| + gamma * segments`` (the weighted L1 "Potts" problem) is found
by dynamic programming: exactly up to EXACT_MAX_POINTS points; above that, exactly over segments of at
most ``window`` points, then adjacent segments are merged while that lowers the objective and every
boundary is moved to its best place within a window (the approximation asv uses; O(n * window) work
per penalty plus O(n log n) per merge sweep).

**Choosing the number of steps.** The penalties that change the answer are enumerated (the "CROPS"
path: each new penalty is where two known solutions cost the same), and among those solutions the one
minimising the information criterion

    IC = m * ln(S / sum(w) + floor) + penalty_factor * ln(m) * (segments - 1)

is kept, where ``S = min over rho of sum_i w_i |e_i - rho * e_(i-1)|`` is the innovation size left by the
fit with the best noise correlation ``rho`` for that fit (a weighted median: exact), ``m`` the number of
points. This is a Schwarz (BIC-like) criterion for Laplace AR(1) noise of unknown scale. Because ``rho``
is fitted with each candidate, slowly wandering noise (AR(1), load that changes over hours, a smooth
drift) is explained as correlated noise rather than as a staircase of steps, while a real step leaves
white residuals once it is fitted and wins clearly. ``floor`` is the smallest innovation scale
believed: the per-point noise known from repeats (``sigma`` / ``point_sigma``) when given, else
NOISE_FLOOR_REL of the series' median magnitude (so noiseless data does not turn every last-digit
wiggle into a step).

**Noise.** It is estimated from the series' own residuals (the innovation scale of the chosen fit, and
its lag-1 correlation ``rho``); repeats enter as per-point weights (``weights`` or ``point_sigma``: a
commit measured more precisely counts more) and as the floor above. Repeats alone would understate
the noise: runs of one commit share the machine's state, and level shifts between commits
(placement, neighbours, frequency) show only in the series.

**What it can and cannot say.** A reported step is a level change that the data explain better than
correlated noise does, at the Schwarz penalty; it is evidence, not proof (the false-step rate measured
by simulation is in docs/ci.md). No step does not mean no change: a change below a few noise scales,
a step held by fewer than ``min_size`` commits (so a step at the very last commit is reported only once
``min_size`` commits show it), and a slow drift (absorbed as correlated noise, by design) are not
reported as steps. Slow creep is measured instead by :func:`level_change`, which compares the level at
the end of the series against a baseline window with a standard error that accounts for the fitted
autocorrelation.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float64]

PENALTY_FACTOR = 2.5
"""The information criterion's price of one more segment, in units of ln(points) (Schwarz's BIC charges
1 per extra parameter pair on this scale; a step has two, location and level, and the rest is margin
for the approximate search and the correlated-noise model). Chosen by simulation: with it, AR(1) noise
with rho = 0.8 gives false steps in at most 5% of series of 30 and 100 points, white noise in fewer, and a
5% step at 1% noise is found in at least 90% of 30-point series (tests/analyze/test_stepdetect_seen.py)."""

NOISE_FLOOR_REL = 0.002
"""Smallest innovation scale believed, as a fraction of the series' median magnitude, when no repeat-based
noise is given: noiseless data does not turn every 0.01% wiggle into a step."""

EXACT_MAX_POINTS = 256
"""Series up to this length are fitted exactly (quadratic work); longer ones with the windowed approximation."""

WINDOW = 32
"""Longest segment the approximate solver's first pass considers (merging then joins segments)."""

RHO_LIMITS = (-0.5, 1.0)
"""The noise correlation is fitted within these bounds (1: a random walk, as a smooth drift looks; the
reported ``noise_sd`` then uses 0.99)."""

MAX_PATH_FITS = 40
"""At most this many penalties are solved while enumerating the solution path."""


@dataclass(frozen=True, slots=True)
class Step:
    """One detected change of level.

    index: position (in the input series) of the first point after the step.
    before / after: weighted medians of the fitted segments on either side (the input's unit).
    relative_change: after / before - 1 (None when ``before`` is 0).
    """

    index: int
    before: float
    after: float
    relative_change: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class StepFit:
    """The fitted piecewise-constant series.

    segments: (start, end) index pairs, end exclusive, covering the series in order.
    levels: the (weighted) median of each segment.
    steps: the level changes between consecutive segments.
    sigma: the noise scale of the points: the innovation scale of the fit as a Gaussian-equivalent standard
        deviation (1.2533 x mean absolute innovation), never below the repeat-based floor (the input's unit).
    gamma: the penalty per segment (L1 cost units) at which this segmentation is the Potts optimum.
    rho: the lag-1 correlation of the noise around the fitted levels (0: independent commits).
    noise_sd: the marginal standard deviation of the noise around the levels, sigma / sqrt(1 - rho^2).
    n_candidates: how many segmentations of the penalty path the criterion compared.
    """

    segments: tuple[tuple[int, int], ...]
    levels: tuple[float, ...]
    steps: tuple[Step, ...]
    sigma: float
    gamma: float
    rho: float = 0.0
    noise_sd: float = 0.0
    n_candidates: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {"segments": [list(s) for s in self.segments], "levels": list(self.levels),
                "steps": [s.to_dict() for s in self.steps], "sigma": self.sigma, "gamma": self.gamma,
                "rho": self.rho, "noise_sd": self.noise_sd, "n_candidates": self.n_candidates}


@dataclass(frozen=True, slots=True)
class PottsFit:
    """The weighted-L1 Potts optimum for one penalty.

    segments: (start, end) pairs, end exclusive, covering the series. levels: weighted median of each.
    costs: sum of w_i |y_i - level| of each segment. gamma: the penalty per segment. exact: whether the
    dynamic programme was unrestricted (else: windowed, merged and refined).
    """

    segments: tuple[tuple[int, int], ...]
    levels: tuple[float, ...]
    costs: tuple[float, ...]
    gamma: float
    exact: bool

    @property
    def cost(self) -> float:
        """Total L1 cost (without the penalty)."""
        return float(sum(self.costs))

    @property
    def objective(self) -> float:
        """Total L1 cost plus gamma per segment: what the fit minimises."""
        return self.cost + self.gamma * len(self.segments)


@dataclass(frozen=True, slots=True)
class Regression:
    """A step towards worse that the latest level still shows (see :func:`regressions`).

    index: first point after the step. before: the level just before it. after: the best level from the
    step to the end (a later partial recovery counts). relative_change: after / before - 1 in the
    metric's own direction (positive = worse), None when ``before`` is 0.
    """

    index: int
    before: float
    after: float
    relative_change: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class LevelChange:
    """The level at the end of a series against a baseline window (see :func:`level_change`).

    baseline_level: weighted median of the baseline window. end_level: weighted median of the last
    ``end_points`` points, all inside the fit's last segment. relative_change: end / baseline - 1 (None
    when the baseline is 0). standard_error: of end - baseline under the fit's noise (scale and
    autocorrelation), the input's unit. z: (end - baseline) / standard_error (0 when both are 0).
    standard_error_independent / z_independent: the same if commits were independent, with the fit's
    innovation scale ``sigma`` per point (what repeats of stable commits would show). A creep the series
    cannot tell from slowly wandering noise has a large z_independent and a small z: only repeats (a run-level
    test of the newest commits against the baseline's) can decide between the two.
    baseline_points / end_points: the window sizes used.
    """

    baseline_level: float
    end_level: float
    relative_change: float | None
    standard_error: float
    z: float
    baseline_points: int
    end_points: int
    standard_error_independent: float = 0.0
    z_independent: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# --------------------------------------------------------------------------------------------------- input


def _series(y: Sequence[float] | Array) -> Array:
    a = np.asarray(y, dtype="float64")
    if a.ndim != 1:
        raise ValueError(f"step detection needs a 1-D series, got shape {a.shape}")
    bad = np.flatnonzero(~np.isfinite(a))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"step detection: value at position {i} is {a[i]} (drop missing points first; "
                         f"{bad.size} non-finite value{'s' if bad.size > 1 else ''} in all)")
    return a


def normalized_weights(weights: Sequence[float | None] | Array | None, n: int) -> Array:
    """Relative weights scaled to median 1: missing (None / NaN) ones become the median weight; zero or
    negative ones a negligible 1e-9 (the point takes its segment's level but does not move it)."""
    if weights is None:
        return np.ones(n)
    w = np.array([math.nan if v is None else float(v) for v in weights], dtype="float64")
    if w.size != n:
        raise ValueError(f"step detection: {w.size} weights for {n} points")
    if np.isinf(w).any():
        raise ValueError(f"step detection: weight at position {int(np.flatnonzero(np.isinf(w))[0])} is infinite")
    valid = w[np.isfinite(w) & (w > 0)]
    med = float(np.median(valid)) if valid.size else 1.0
    w = np.where(np.isfinite(w), w, med) / med
    return np.where(w > 0, w, 1e-9)


# ---------------------------------------------------------------------------------------- L1 segment costs


def weighted_median(values: Sequence[float] | Array, weights: Sequence[float] | Array | None = None) -> float:
    """The weighted median: the smallest value whose cumulative weight reaches half the total; when it
    reaches exactly half, the midpoint between it and the next value (so unit weights give the ordinary
    median, even counts included). Any point between those two minimises sum w |y - m| alike."""
    v = np.asarray(values, dtype="float64")
    if weights is None:
        return float(np.median(v))
    w = np.asarray(weights, dtype="float64")
    order = np.argsort(v, kind="stable")
    vs, cw = v[order], np.cumsum(w[order])
    half = cw[-1] / 2
    k = int(np.searchsorted(cw, half * (1 - 1e-12)))
    if k + 1 < vs.size and abs(cw[k] - half) <= 1e-12 * cw[-1]:
        return float((vs[k] + vs[k + 1]) / 2)
    return float(vs[k])


def segment_cost(y: Sequence[float] | Array, weights: Sequence[float] | Array | None, start: int,
                 stop: int) -> tuple[float, float]:
    """(weighted median, sum of w |y - median|) of ``y[start:stop]``."""
    seg = np.asarray(y, dtype="float64")[start:stop]
    w = None if weights is None else np.asarray(weights, dtype="float64")[start:stop]
    m = weighted_median(seg, w)
    d = np.abs(seg - m)
    return m, float(d.sum() if w is None else (w * d).sum())


def window_costs(y: Array, w: Array | None, max_len: int) -> tuple[Array, Array]:
    """Costs and medians of every segment of at most ``max_len`` points, indexed by where it ends:
    ``cost[t, L - 1]`` is the L1 cost of ``y[t - L:t]`` (inf when ``L > t``), ``med`` alike.

    Vectorised over start positions, one length at a time: O(n * max_len^2) element work."""
    n = y.size
    max_len = min(max_len, n)
    cost = np.full((n + 1, max_len), np.inf)
    med = np.full((n + 1, max_len), np.nan)
    unit = w is None or bool(np.all(w == w[0]))
    # windows of max_len points starting at every position (padded at the end); a length-L window is a prefix
    sw = np.lib.stride_tricks.sliding_window_view
    yp = sw(np.concatenate([y, np.zeros(max_len - 1)]), max_len)
    wp = None if unit else sw(np.concatenate([w, np.ones(max_len - 1)]), max_len)
    scale = 1.0 if w is None else float(w[0])
    for L in range(1, max_len + 1):
        yw = yp[:n - L + 1, :L]
        if wp is None:
            ys = np.sort(yw, axis=1)
            h = L // 2
            m = (ys[:, (L - 1) // 2] + ys[:, L // 2]) / 2
            c = (ys[:, L - h:].sum(axis=1) - ys[:, :h].sum(axis=1)) * scale
        else:
            ww = wp[:n - L + 1, :L]
            order = np.argsort(yw, axis=1, kind="stable")
            ys = np.take_along_axis(yw, order, axis=1)
            cw = np.cumsum(np.take_along_axis(ww, order, axis=1), axis=1)
            half = cw[:, -1] / 2
            k = (cw < (half * (1 - 1e-12))[:, None]).sum(axis=1)
            rows = np.arange(yw.shape[0])
            kn = np.minimum(k + 1, L - 1)
            tie = (k + 1 < L) & (np.abs(cw[rows, k] - half) <= 1e-12 * cw[:, -1])
            m = np.where(tie, (ys[rows, k] + ys[rows, kn]) / 2, ys[rows, k])
            c = (ww * np.abs(yw - m[:, None])).sum(axis=1)
        cost[L:, L - 1] = c
        med[L:, L - 1] = m
    return cost, med


class _RangeCost:
    """Memoised (median, cost) of arbitrary ranges, for the local search; short ranges come from the table
    of :func:`window_costs`."""

    def __init__(self, y: Array, w: Array | None, cost: Array, med: Array) -> None:
        self.y, self.w, self.cost, self.med = y, w, cost, med
        self.max_len = cost.shape[1]
        self.memo: dict[tuple[int, int], tuple[float, float]] = {}

    def __call__(self, a: int, b: int) -> tuple[float, float]:
        if b - a <= self.max_len:
            return float(self.med[b, b - a - 1]), float(self.cost[b, b - a - 1])
        key = (a, b)
        got = self.memo.get(key)
        if got is None:
            got = segment_cost(self.y, self.w, a, b)
            if len(self.memo) > 200_000:
                self.memo.clear()
            self.memo[key] = got
        return got


# ------------------------------------------------------------------------------------------- Potts solver


def _dp(cost_by_start: Array, n: int, gamma: float, min_size: int) -> list[int]:
    """Segment ends (exclusive) of the optimal partition into segments of min_size..max_len points, where
    ``cost_by_start[t, j]`` is the cost of the segment ``[t - max_len + j, t)`` (inf where it starts before 0)."""
    max_len = cost_by_start.shape[1]
    span = max_len - min_size + 1
    best = np.full(n + 1 + max_len, np.inf)  # best[t + max_len]: optimum of the first t points
    best[max_len] = 0.0
    prev = np.zeros(n + 1, dtype=np.int64)
    for t in range(min_size, n + 1):
        cand = best[t:t + span] + cost_by_start[t, :span]
        k = int(cand.argmin())
        best[t + max_len] = cand[k] + gamma
        prev[t] = t - max_len + k
    if not np.isfinite(best[n + max_len]):  # cannot happen when max_len >= 2 * min_size
        return [n]
    ends = []
    t = n
    while t > 0:
        ends.append(t)
        t = int(prev[t])
    return ends[::-1]


def _merge(ends: list[int], gamma: float, rc: _RangeCost) -> tuple[list[int], bool]:
    """Merge adjacent segments while that lowers the objective, the most profitable merge first."""
    segs = list(zip([0, *ends[:-1]], ends))
    nxt = [*range(1, len(segs)), -1]
    prv = [-1, *range(len(segs) - 1)]
    alive = [True] * len(segs)
    version = [0] * len(segs)

    def gain(i: int) -> float:
        a, b = segs[i]
        c = segs[nxt[i]][1]
        return rc(a, c)[1] - rc(a, b)[1] - rc(b, c)[1] - gamma

    heap = [(gain(i), i, 0) for i in range(len(segs) - 1)]
    heapq.heapify(heap)
    merged = False
    while heap:
        g, i, ver = heapq.heappop(heap)
        if not alive[i] or ver != version[i] or nxt[i] == -1:
            continue
        if g >= 0:
            break
        j = nxt[i]
        segs[i] = (segs[i][0], segs[j][1])
        alive[j] = False
        nxt[i] = nxt[j]
        if nxt[j] != -1:
            prv[nxt[j]] = i
        version[i] += 1
        merged = True
        if nxt[i] != -1:
            heapq.heappush(heap, (gain(i), i, version[i]))
        if prv[i] != -1:
            p = prv[i]
            version[p] += 1
            heapq.heappush(heap, (gain(p), p, version[p]))
    return [segs[i][1] for i in range(len(segs)) if alive[i]], merged


def _growing_costs(values: Array, start_len: int) -> Array:
    """L1 cost around the median of ``values[:k]`` for k = start_len .. len(values): a sorted list with the
    lower half's sum kept up to date, O(k) per added value (a memmove), no re-sorting."""
    srt = sorted(values[:start_len].tolist())
    total = float(sum(srt))
    h = len(srt) // 2
    low = float(sum(srt[:h]))
    out = np.empty(values.size - start_len + 1)

    def cost() -> float:
        n = len(srt)
        mid = srt[n // 2] if n % 2 else 0.0
        return (total - low - mid) - low

    out[0] = cost()
    for j, x in enumerate(values[start_len:].tolist(), start=1):
        n = len(srt)
        h = n // 2
        i = bisect_right(srt, x)
        if n % 2 == 0:  # the lower half keeps h values
            if i < h:
                low += x - srt[h - 1]
        else:  # the lower half grows to h + 1 values
            low += x if i <= h else srt[h]
        srt.insert(i, x)
        total += x
        out[j] = cost()
    return out


def _best_split(rc: _RangeCost, a: int, c: int, lo: int, hi: int, positions: Sequence[int] | None = None
                ) -> tuple[int, float]:
    """The split point p (in [lo, hi], or among ``positions`` there) minimising cost(a, p) + cost(p, c)."""
    if positions is not None:
        positions = [p for p in positions if lo <= p <= hi]
        if not positions:
            return -1, math.inf
        lo, hi = min(positions), max(positions)
    if hi < lo:
        return -1, math.inf
    if rc.w is None and c - a > rc.max_len and hi - lo > 4 and (positions is None or len(positions) > 8):
        left = _growing_costs(rc.y[a:hi], lo - a)  # cost(a, p), p = lo..hi
        right = _growing_costs(rc.y[lo:c][::-1].copy(), c - hi)[::-1]  # cost(p, c), p = lo..hi
        tot = left + right
        idx = np.arange(hi - lo + 1) if positions is None else np.asarray(positions) - lo
        k = int(idx[int(np.argmin(tot[idx]))])
        return lo + k, float(tot[k])
    best_p, best_v = -1, math.inf
    for p in (range(lo, hi + 1) if positions is None else positions):
        v = rc(a, p)[1] + rc(p, c)[1]
        if best_p == -1 or v < best_v - 1e-12 * max(1.0, abs(best_v)):
            best_p, best_v = p, v
    return best_p, best_v


def _local_search(ends: list[int], gamma: float, rc: _RangeCost, min_size: int, window: int,
                  candidates: Sequence[int]) -> list[int]:
    """Improve a segmentation by local moves until none lowers the objective: merge two segments; move a
    boundary within ``window`` points; split a segment at one of ``candidates`` (the boundaries of the
    windowed solution); replace three segments by two. Neighbourhoods already found optimal are skipped."""
    cand = sorted(set(candidates))
    done_pairs: set[tuple[int, int, int]] = set()
    done_segs: set[tuple[int, int]] = set()
    done_triples: set[tuple[int, int, int, int]] = set()
    for _ in range(50):
        ends, changed = _merge(ends, gamma, rc)
        # move each boundary to its best place near where it is
        start = 0
        for k in range(len(ends) - 1):
            b, c = ends[k], ends[k + 1]
            if (start, b, c) not in done_pairs:
                p, v = _best_split(rc, start, c, max(start + min_size, b - window), min(c - min_size, b + window))
                if p != -1 and p != b and v < rc(start, b)[1] + rc(b, c)[1] - 1e-12 * max(1.0, v):
                    ends[k] = p
                    changed = True
                done_pairs.add((start, ends[k], c))
            start = ends[k]
        # split a segment where the windowed solution had a boundary, when that pays for the penalty
        out: list[int] = []
        start = 0
        for c in ends:
            lo_i, hi_i = bisect_left(cand, start + min_size), bisect_right(cand, c - min_size)
            if hi_i > lo_i and (start, c) not in done_segs:
                p, v = _best_split(rc, start, c, start + min_size, c - min_size, cand[lo_i:hi_i])
                if p != -1 and v + gamma < rc(start, c)[1] - 1e-12 * max(1.0, v):
                    out.append(p)
                    changed = True
                else:
                    done_segs.add((start, c))
            out.append(c)
            start = c
        ends = out
        # three segments into two (a short segment between two others is shared out)
        k, start = 0, 0
        while k + 2 < len(ends):
            b, c, d = ends[k], ends[k + 1], ends[k + 2]
            if c - b <= window and (start, b, c, d) not in done_triples:
                now = rc(start, b)[1] + rc(b, c)[1] + rc(c, d)[1] + gamma
                p, v = _best_split(rc, start, d, max(start + min_size, b - window), min(d - min_size, c + window))
                if p != -1 and v < now - 1e-12 * max(1.0, now):
                    ends[k:k + 2] = [p]
                    changed = True
                else:
                    done_triples.add((start, b, c, d))
            start = ends[k]
            k += 1
        if not changed:
            break
    return ends


class _Solver:
    """Solves the weighted-L1 Potts problem for any penalty on one series (segment costs computed once)."""

    def __init__(self, y: Array, w: Array | None, min_size: int, max_size: int | None) -> None:
        self.y, self.w, self.n, self.min_size = y, w, y.size, min_size
        self.exact = max_size is None or max_size >= y.size
        self.window = y.size if self.exact else max(int(max_size or WINDOW), 2 * min_size)
        self.cost, self.med = window_costs(y, w, self.window)
        self.rc = _RangeCost(y, w, self.cost, self.med)
        self.cost_by_start = np.ascontiguousarray(self.cost[:, ::-1])

    def solve(self, gamma: float) -> PottsFit:
        ends = _dp(self.cost_by_start, self.n, gamma, self.min_size)
        if not self.exact:
            ends = _local_search(ends, gamma, self.rc, self.min_size, self.window, ends[:-1])
        segs, levels, costs = [], [], []
        start = 0
        for e in ends:
            L = e - start
            if self.window >= L:
                m, c = float(self.med[e, L - 1]), float(self.cost[e, L - 1])
            else:
                m, c = self.rc(start, e)
            segs.append((start, e))
            levels.append(m)
            costs.append(c)
            start = e
        return PottsFit(tuple(segs), tuple(levels), tuple(costs), float(gamma), self.exact)


def fit_potts(y: Sequence[float] | Array, *, gamma: float, weights: Sequence[float | None] | Array | None = None,
              min_size: int = 1, max_size: int | None = None) -> PottsFit:
    """The piecewise-constant fit minimising ``sum w |y - level| + gamma * segments``.

    Exact (dynamic programming over all segmentations, O(n^2)) when ``max_size`` is None; otherwise the
    windowed approximation (segments of at most ``max_size`` points, then merged and refined).
    """
    a = _series(y)
    if a.size == 0:
        return PottsFit((), (), (), float(gamma), True)
    if min_size < 1:
        raise ValueError(f"step detection: min_size must be at least 1, got {min_size}")
    w = None if weights is None else normalized_weights(weights, a.size)
    if a.size < 2 * min_size:
        m, c = segment_cost(a, w, 0, a.size)
        return PottsFit(((0, a.size),), (m,), (c,), float(gamma), True)
    return _Solver(a, w, min_size, max_size).solve(gamma)


# ------------------------------------------------------------------------------------- choosing the steps


def _innovations(y: Array, w: Array, fit: PottsFit) -> tuple[float, float]:
    """(S, rho): the smallest sum_i w_i |e_i - rho e_(i-1)| over rho in RHO_LIMITS, e the residuals around
    the fit's levels (first point: w_0 |e_0|). The minimiser is a weighted median of e_i / e_(i-1)."""
    lv = np.empty(y.size)
    for (a, b), m in zip(fit.segments, fit.levels):
        lv[a:b] = m
    e = y - lv
    prev, cur, wc = e[:-1], e[1:], w[1:]
    nz = prev != 0
    if nz.any():
        rho = weighted_median(cur[nz] / prev[nz], wc[nz] * np.abs(prev[nz]))
        rho = min(max(rho, RHO_LIMITS[0]), RHO_LIMITS[1])
    else:
        rho = 0.0
    s = float(w[0] * abs(e[0]) + (wc * np.abs(cur - rho * prev)).sum())
    return s, float(rho)


def _path(solver: _Solver, g_lo: float, g_hi: float) -> list[PottsFit]:
    """Solutions along the penalty path between g_lo and g_hi (CROPS: the next penalty tried is where the
    two neighbouring solutions' objectives are equal), at most MAX_PATH_FITS solves."""
    fits = {}
    lo, hi = solver.solve(g_lo), solver.solve(g_hi)
    fits[len(lo.segments)] = lo
    fits.setdefault(len(hi.segments), hi)
    todo = [(lo, hi)]
    solves = 2
    while todo and solves < MAX_PATH_FITS:
        a, b = todo.pop()
        ka, kb = len(a.segments), len(b.segments)
        if ka <= kb + 1:
            continue
        g = (b.cost - a.cost) / (ka - kb)
        if not (a.gamma < g < b.gamma):
            continue
        mid = solver.solve(g)
        solves += 1
        km = len(mid.segments)
        if km in (ka, kb):
            continue
        if km not in fits or mid.cost < fits[km].cost:
            fits[km] = mid
        if kb < km < ka:
            todo.append((a, mid))
            todo.append((mid, b))
    return [fits[k] for k in sorted(fits)]


def noise_sigma(y: Sequence[float] | Array) -> float:
    """Robust scale of independent noise from successive differences: 1.4826 * median |y[i+1] - y[i]| / sqrt(2),
    floored at NOISE_FLOOR_REL * median |y| (a few steps barely move it; autocorrelated noise makes it low)."""
    a = np.asarray(y, dtype="float64")
    floor = NOISE_FLOOR_REL * float(np.median(np.abs(a))) if a.size else 0.0
    if a.size < 2:
        return max(floor, 1e-300)
    sigma = 1.4826 * float(np.median(np.abs(np.diff(a)))) / math.sqrt(2)
    return max(sigma, floor, 1e-300)


def detect_steps(y: Sequence[float] | Array, *, min_size: int = 2, penalty_factor: float = PENALTY_FACTOR,
                 sigma: float | None = None, weights: Sequence[float | None] | Array | None = None,
                 point_sigma: Sequence[float] | Array | None = None, max_size: int | None = None) -> StepFit:
    """Fit ``y`` (ordered, e.g. per-commit medians) and return its steps (see the module docstring).

    Args:
        y: the series; NaN or infinite values are refused with a ValueError naming the first position
            (drop missing points first).
        min_size: fewest points a segment may hold (2: one noisy point never makes a step).
        penalty_factor: the price of a segment in the information criterion (see PENALTY_FACTOR).
        sigma: noise standard deviation of one point known from repeats (e.g. the spread of a commit's
            median); a floor under the noise estimated from the series, never a replacement for it.
        weights: relative weight of each point (e.g. 1 / its interval width); None / NaN = median weight.
        point_sigma: each point's standard deviation from its repeats: weights 1 / point_sigma and, unless
            ``sigma`` is given, their median as the floor. Exclusive with ``weights``.
        max_size: the approximate solver's window (default: exact up to EXACT_MAX_POINTS points, else WINDOW).
    """
    a = _series(y)
    n = a.size
    if min_size < 1:
        raise ValueError(f"step detection: min_size must be at least 1, got {min_size}")
    if weights is not None and point_sigma is not None:
        raise ValueError("step detection: give weights or point_sigma, not both")
    floor_sd = None if sigma is None else float(sigma)
    if point_sigma is not None:
        ps = np.asarray(point_sigma, dtype="float64")
        if ps.size != n:
            raise ValueError(f"step detection: {ps.size} point_sigma values for {n} points")
        ok = np.isfinite(ps) & (ps > 0)
        weights = np.where(ok, 1.0 / np.where(ok, ps, 1.0), np.nan)
        if floor_sd is None and ok.any():
            floor_sd = float(np.median(ps[ok]))
    w = normalized_weights(weights, n)
    if floor_sd is not None and not (math.isfinite(floor_sd) and floor_sd >= 0):
        raise ValueError(f"step detection: sigma must be a finite non-negative number, got {floor_sd}")
    scale_floor = max(NOISE_FLOOR_REL * float(np.median(np.abs(a))) if n else 0.0, 1e-300)
    floor = max(scale_floor, 0.0 if floor_sd is None else floor_sd * math.sqrt(2 / math.pi))
    if n == 0:
        return StepFit((), (), (), floor_sd or 0.0, 0.0)
    if n < 2 * min_size:
        m, _ = segment_cost(a, w, 0, n)
        return StepFit(((0, n),), (m,), (), max(noise_sigma(a), floor_sd or 0.0), 0.0)
    wts = None if weights is None else w
    if max_size is None:
        max_size = None if n <= EXACT_MAX_POINTS else WINDOW
    solver = _Solver(a, wts, min_size, max_size)
    total = segment_cost(a, wts, 0, n)[1]
    b = max(0.8 * noise_sigma(a), floor)
    g_lo = 0.25 * penalty_factor * b * math.log(n)
    g_hi = max(total * 1.001, g_lo * 2) + 1e-300
    fits = _path(solver, g_lo, g_hi)
    best: tuple[float, PottsFit, float, float] | None = None
    wsum = float(w.sum())
    for f in fits:
        s, rho = _innovations(a, w, f)
        ic = n * math.log(s / wsum + floor) + penalty_factor * math.log(n) * (len(f.segments) - 1)
        if best is None or ic < best[0] - 1e-9:
            best = (ic, f, s, rho)
    assert best is not None
    _, fit, s, rho = best
    sig = max(1.2533 * s / wsum, floor_sd or 0.0)
    steps = tuple(Step(index=fit.segments[k + 1][0], before=fit.levels[k], after=fit.levels[k + 1],
                       relative_change=(fit.levels[k + 1] / fit.levels[k] - 1) if fit.levels[k] != 0 else None)
                  for k in range(len(fit.segments) - 1))
    return StepFit(fit.segments, fit.levels, steps, sig, fit.gamma, rho=rho,
                   noise_sd=sig / math.sqrt(1 - min(rho * rho, 0.99 ** 2)), n_candidates=len(fits))


# ------------------------------------------------------------------------------------------ interpreting


def regressions(fit: StepFit | PottsFit, *, threshold: float = 0.0, lower_is_better: bool = True
                ) -> tuple[Regression, ...]:
    """The steps towards worse that explain why the latest level is worse than the best one.

    Nothing when the latest level is within ``threshold`` (relative) of the best level. Otherwise, walking
    back from the latest level, a step is reported where the level before it is better by more than
    ``threshold`` than the level still to be explained (starting at the latest); that level then becomes
    the one to explain. A step smaller than the threshold is thus reported only when smaller steps
    together exceed it (gradual creep is named at its first step).
    """
    lv = [float(v) for v in fit.levels]
    if len(lv) < 2:
        return ()
    sign = 1.0 if lower_is_better else -1.0

    def worse_by(new: float, old: float) -> float:
        if old == 0:
            return math.inf if sign * new > 0 else 0.0
        return sign * (new - old) / abs(old)

    best = min(lv, key=lambda v: sign * v)
    if worse_by(lv[-1], best) <= threshold:
        return ()
    found: list[Regression] = []
    ref = lv[-1]
    for k in range(len(lv) - 2, -1, -1):
        if worse_by(ref, lv[k]) > threshold:
            after = min(lv[k + 1:], key=lambda v: sign * v)
            rel = worse_by(after, lv[k]) if lv[k] != 0 else None
            found.append(Regression(index=fit.segments[k + 1][0], before=lv[k], after=after, relative_change=rel))
            ref = lv[k]
    return tuple(reversed(found))


def _mean_var_factor(length: int, rho: float) -> float:
    """Var(mean of ``length`` AR(1) points) / marginal variance."""
    if length <= 1 or rho == 0:
        return 1.0 / max(length, 1)
    k = np.arange(1, length)
    return float((1 + 2 * np.sum((1 - k / length) * rho ** k)) / length)


def level_change(y: Sequence[float] | Array, fit: StepFit, *, baseline: tuple[int, int] | None = None,
                 end_points: int | None = None, weights: Sequence[float | None] | Array | None = None
                 ) -> LevelChange:
    """The level at the end of ``y`` against a baseline window, with a standard error from the fit's noise.

    Args:
        y: the series ``fit`` was computed from.
        baseline: (start, end) of the baseline window, end exclusive; default: the first segment's first
            ``min(5, its length)`` points.
        end_points: how many of the newest points make the end level (default: the baseline's size); never
            more than the last segment holds, so a recent step is measured on its own side only.
        weights: as given to :func:`detect_steps` (weighted medians), if any.

    Slow creep that the detector absorbs as correlated noise (a drift) or splits into steps each below a
    threshold still shows here as a change of the end level against the baseline. The standard error
    treats the two windows as independent means of AR(1) noise with the fit's rho and marginal sd, scaled
    by 1.2533 for medians.
    """
    a = _series(y)
    if not fit.segments or a.size != fit.segments[-1][1]:
        raise ValueError(f"level_change: the fit covers {fit.segments[-1][1] if fit.segments else 0} points, "
                         f"the series has {a.size}")
    w = normalized_weights(weights, a.size)
    if baseline is None:
        s0, e0 = fit.segments[0]
        baseline = (s0, s0 + min(5, e0 - s0))
    b0, b1 = baseline
    if not 0 <= b0 < b1 <= a.size:
        raise ValueError(f"level_change: baseline window {baseline} outside the series of {a.size} points")
    last0 = fit.segments[-1][0]
    k = min(end_points or (b1 - b0), a.size - last0)
    base = weighted_median(a[b0:b1], w[b0:b1])
    end = weighted_median(a[a.size - k:], w[a.size - k:])
    var = fit.noise_sd ** 2 * 1.2533 ** 2 * (_mean_var_factor(b1 - b0, fit.rho) + _mean_var_factor(k, fit.rho))
    se = math.sqrt(var)
    se_ind = fit.sigma * 1.2533 * math.sqrt(1 / (b1 - b0) + 1 / k)
    diff = end - base

    def ratio(d: float, e: float) -> float:
        return d / e if e > 0 else (0.0 if d == 0 else math.copysign(math.inf, d))

    return LevelChange(baseline_level=base, end_level=end, relative_change=(end / base - 1) if base != 0 else None,
                       standard_error=se, z=ratio(diff, se), baseline_points=b1 - b0, end_points=k,
                       standard_error_independent=se_ind, z_independent=ratio(diff, se_ind))


__all__ = ["EXACT_MAX_POINTS", "NOISE_FLOOR_REL", "PENALTY_FACTOR", "WINDOW", "LevelChange", "PottsFit",
           "Regression", "Step", "StepFit", "detect_steps", "fit_potts", "level_change", "noise_sigma",
           "normalized_weights", "regressions", "segment_cost", "weighted_median", "window_costs"]
