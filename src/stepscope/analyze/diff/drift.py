"""Drift inside an interleaved A/B study (`stepscope bench --ab`): the load each pair met, and what the pairing
does not cancel.

Pairs run A B / B A alternately, so a load that drifts slowly across the study hits both sides alike and cancels
in the per-pair ratios. What does not cancel is load that follows a side: a neighbour that starts with every B
run, or a B that itself draws contention. Each pair's contention shift (contention.py: the log step-time ratio
B / A that the difference in run-queue latency predicts) measures it. Their mean is the systematic part; the
part of it beyond twice its own standard error (what alternation leaves by chance) is multiplied by
``LOAD_FACTOR`` (the measured step moved by up to 2.2 times a predicted shift) and widens the paired interval on
both sides: an estimate, so a widening, never a correction.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from stepscope.analyze.diff.contention import LOAD_FACTOR, Contention, load_shift
from stepscope.analyze.diff.runlevel import RunValues


@dataclass(frozen=True, slots=True)
class PairLoad:
    """One A/B pair: each run's id, run-queue latency (ms), 1-minute load average and median CPU frequency (MHz;
    None where not sampled), and the contention shift B / A (log; None when not measured)."""

    a: str
    b: str
    a_latency_ms: float | None
    b_latency_ms: float | None
    a_load: float | None
    b_load: float | None
    a_freq_mhz: float | None
    b_freq_mhz: float | None
    shift_log: float | None


@dataclass(frozen=True, slots=True)
class PairDrift:
    """The pairs' loads, the mean contention shift B / A and its standard error (log), and the widening of the
    paired interval (log; 0 when the shift is within what alternation leaves by chance)."""

    pairs: tuple[PairLoad, ...]
    mean_shift_log: float | None
    se_shift_log: float | None
    widen_log: float

    def message(self) -> str | None:
        """The sentence a diff prints when the drift widened the interval (None otherwise)."""
        if self.widen_log <= 0 or self.mean_shift_log is None:
            return None
        side = "B" if self.mean_shift_log > 0 else "A"
        n = sum(p.shift_log is not None for p in self.pairs)
        return (f"the {side} runs met more CPU contention than their partners (mean predicted shift "
                f"{math.expm1(abs(self.mean_shift_log)):.1%} over {n} pairs): drift the pairing does not cancel; "
                f"the interval is widened by {math.expm1(self.widen_log):.1%} — rerun the study on a steadier host")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _freq(v: RunValues) -> float | None:
    return v.cpu_freq_mhz


def pair_drift(base: list[RunValues], exp: list[RunValues]) -> PairDrift:
    """The drift of interleaved pairs (base[i], exp[i])."""
    none = Contention(None, None, None, 0)
    pairs = []
    for a, b in zip(base, exp, strict=False):
        ca, cb = a.contention or none, b.contention or none
        pairs.append(PairLoad(a.run_id, b.run_id, ca.latency_ms, cb.latency_ms, ca.load_avg, cb.load_avg,
                              _freq(a), _freq(b), load_shift(ca, cb).shift_log))
    return PairDrift(tuple(pairs), *drift_widening([p.shift_log for p in pairs]))


def drift_widening(shifts: list[float | None]) -> tuple[float | None, float | None, float]:
    """(mean shift, its standard error, widening) from per-pair contention shifts (log)."""
    s = np.asarray([x for x in shifts if x is not None], dtype="float64")
    if s.size < 2:
        return (float(s[0]) if s.size else None), None, 0.0
    mean, se = float(s.mean()), float(s.std(ddof=1)) / math.sqrt(s.size)
    return mean, se, LOAD_FACTOR * max(abs(mean) - 2.0 * se, 0.0)
