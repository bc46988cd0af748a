"""Change-point (step) detection over a series of per-commit values, in the spirit of asv's step_detect.

The series is fitted by a piecewise-constant function that minimises

    sum_i |y_i - mu(segment of i)|  +  gamma * (number of segments)

(an L1 "Potts" fit, solved exactly by dynamic programming). The L1 cost makes the fit robust: a single
outlying commit moves a segment's median by little and cannot pay for a segment of its own, because a
segment must hold at least ``min_size`` points (default 2). The penalty ``gamma`` scales with the noise,
estimated robustly from successive differences (which a few real steps barely move), so the same settings
work for step times in microseconds and throughputs in thousands.

It cannot say that a step *below* the noise does not exist: a change smaller than about the noise level
may go undetected, and a step at the very last commit is reported only once ``min_size`` commits show it
(the CI gate compares the last commit's repeats directly instead).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

PENALTY_FACTOR = 3.0
"""gamma = PENALTY_FACTOR * sigma * ln(n + 1): large enough that pure noise of 20-500 points is left as one
segment (checked by simulation in the tests), small enough that a step of ~4 sigma held for 3 commits is found."""

NOISE_FLOOR_REL = 0.002
"""sigma is at least this fraction of the series' median magnitude, so noiseless data does not turn every
0.01% wiggle into a step."""


@dataclass(frozen=True, slots=True)
class Step:
    """One detected change of level.

    index: position (in the input series) of the first point after the step.
    before / after: medians of the fitted segments on either side (the input's unit).
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
    levels: the median of each segment.
    steps: the level changes between consecutive segments.
    sigma: the robust noise estimate used (the input's unit).
    gamma: the penalty per segment that was used.
    """

    segments: tuple[tuple[int, int], ...]
    levels: tuple[float, ...]
    steps: tuple[Step, ...]
    sigma: float
    gamma: float

    def to_dict(self) -> dict[str, Any]:
        return {"segments": [list(s) for s in self.segments], "levels": list(self.levels),
                "steps": [s.to_dict() for s in self.steps], "sigma": self.sigma, "gamma": self.gamma}


def noise_sigma(y: Sequence[float]) -> float:
    """Robust noise scale: 1.4826 * median |y[i+1] - y[i]| / sqrt(2), floored at NOISE_FLOOR_REL * median |y|."""
    a = np.asarray(y, dtype="float64")
    floor = NOISE_FLOOR_REL * float(np.median(np.abs(a))) if a.size else 0.0
    if a.size < 2:
        return floor
    sigma = 1.4826 * float(np.median(np.abs(np.diff(a)))) / math.sqrt(2)
    return max(sigma, floor, 1e-300)


def segment_costs(y: Sequence[float]) -> tuple[list[list[float]], list[list[float]]]:
    """cost[i][j-i-1] = sum |y_k - median(y[i:j])| and med[i][j-i-1] = that median, for all i < j.

    Two heaps per start index give each extension in O(log n): O(n^2 log n) overall.
    """
    n = len(y)
    costs: list[list[float]] = []
    meds: list[list[float]] = []
    for i in range(n):
        low: list[float] = []   # max-heap (negated) of the lower half
        high: list[float] = []  # min-heap of the upper half
        s_low = s_high = 0.0
        row_c: list[float] = []
        row_m: list[float] = []
        for j in range(i, n):
            v = float(y[j])
            if low and v > -low[0]:
                heapq.heappush(high, v)
                s_high += v
            else:
                heapq.heappush(low, -v)
                s_low += v
            if len(low) > len(high) + 1:
                x = -heapq.heappop(low)
                s_low -= x
                heapq.heappush(high, x)
                s_high += x
            elif len(high) > len(low):
                x = heapq.heappop(high)
                s_high -= x
                heapq.heappush(low, -x)
                s_low += x
            m = -low[0]
            row_c.append((m * len(low) - s_low) + (s_high - m * len(high)))
            row_m.append(m if len(low) > len(high) else (m + high[0]) / 2)
        costs.append(row_c)
        meds.append(row_m)
    return costs, meds


def detect_steps(y: Sequence[float], *, min_size: int = 2, penalty_factor: float = PENALTY_FACTOR,
                 sigma: float | None = None) -> StepFit:
    """Fit ``y`` (ordered, e.g. per-commit medians) and return its steps.

    Args:
        y: the series; NaN values are not allowed (drop them first).
        min_size: fewest points a segment may hold (2: one noisy point never makes a step).
        penalty_factor: see PENALTY_FACTOR.
        sigma: noise scale to use instead of the estimate (e.g. from repeats).
    """
    n = len(y)
    sig = noise_sigma(y) if sigma is None else max(float(sigma), 1e-300)
    gamma = penalty_factor * sig * math.log(n + 1)
    if n == 0:
        return StepFit((), (), (), sig, gamma)
    if n < 2 * min_size:
        med = float(np.median(np.asarray(y, dtype="float64")))
        return StepFit(((0, n),), (med,), (), sig, gamma)
    costs, meds = segment_costs(y)
    best = [math.inf] * (n + 1)
    prev = [0] * (n + 1)
    best[0] = 0.0
    for j in range(min_size, n + 1):
        for i in range(0, j - min_size + 1):
            if best[i] == math.inf:
                continue
            c = best[i] + costs[i][j - i - 1] + gamma
            if c < best[j]:
                best[j], prev[j] = c, i
    bounds: list[tuple[int, int]] = []
    j = n
    while j > 0:
        i = prev[j]
        bounds.append((i, j))
        j = i
    bounds.reverse()
    levels = tuple(meds[i][j - i - 1] for i, j in bounds)
    steps = tuple(Step(index=bounds[k + 1][0], before=levels[k], after=levels[k + 1],
                       relative_change=(levels[k + 1] / levels[k] - 1) if levels[k] != 0 else None)
                  for k in range(len(bounds) - 1))
    return StepFit(tuple(bounds), levels, steps, sig, gamma)
