"""What `stepscope top` shows of a run while it runs: recent step time and rate, per-rank progress, and
the live straggler rule. Pure functions over the records read so far (store/tail.py); the phases, data
wait, system figures and advice come from the run summary and the advisor, computed on the same records.

Definitions (docs/metrics.md, "Live view"):

* Recent: the last ``RECENT_STEPS`` training steps of a rank (K = 10).
* Step rate: rank 0's recent steps divided by the wall time they span (end of the step before the first of
  them to end of the last); steps/s.
* Useful time of a step: step time minus the time in torch.distributed calls (comm_ns; 0 where the rank
  measured none). A rank that computes or loads data more slowly makes the others wait in their
  collectives, so their *step* times match the straggler's while their useful times do not.
* Straggler (live rule): with at least ``MIN_STEPS`` (N = 5) steps on a rank and on another, the rank's
  recent median useful time exceeds ``STRAGGLER_RATIO`` (1.3) x the median of the other ranks' recent
  medians, and the excess is at least ``STRAGGLER_MIN_SHARE`` (5%) of the recent median step time. Or the
  rank is behind, judged at the same moment for every rank: by the end of its last recorded step the other
  ranks had ended (median) at least ``LAG_MIN_STEPS`` (5) and ``LAG_SHARE`` (30%) more steps than it; or its
  records stopped: the others' (median) last recorded step ended more than ``STALL_S`` (10 s, or 10 recent
  median steps if longer) after its own. Counts are never compared as read: each rank's records arrive with
  its own flush (every 2 s, at its own moments), so equal ranks differ by up to a flush's worth of steps in
  what has been read (an A/A job of 30 ms steps, about 66 steps). Medians over 10 steps and a 30% margin keep
  A/A noise (equal ranks on a busy machine) from flagging; a rank slower by a third appears within about K/2
  of its steps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stepscope.model.tables import Phase, RankData, RunData

RECENT_STEPS = 10
MIN_STEPS = 5
STRAGGLER_RATIO = 1.3
STRAGGLER_MIN_SHARE = 0.05
LAG_SHARE = 0.3
LAG_MIN_STEPS = 5
STALL_S = 10.0
STALL_STEPS = 10


@dataclass(frozen=True, slots=True)
class LiveRank:
    """One rank so far. Times in ns (CPU wall clock); None: no training step recorded yet."""

    rank: int
    host: str
    steps: int
    """Training steps recorded so far."""
    last_step_ns: float | None
    """Duration of the rank's last recorded step."""
    recent_step_median_ns: float | None
    """Median step time of the recent steps (module docstring)."""
    recent_useful_median_ns: float | None
    """Median useful time (step time minus torch.distributed time) of the recent steps."""
    since_last_step_s: float | None
    """Seconds from the end of the last recorded step to ``now`` (records arrive every flush, ~2 s)."""
    straggler: str | None
    """Why the rank is flagged, None when it is not: "slow: +E ms Rx" (E: excess useful time per step over
    the others' median, R: the ratio) or "behind: S/O" (its steps S, the others' median O)."""


@dataclass(frozen=True, slots=True)
class LiveState:
    """The run so far: rank 0's recent step figures and every rank's progress."""

    steps: int
    """Rank 0's training steps so far."""
    recent_steps: int
    """Steps the recent figures are computed over (at most RECENT_STEPS)."""
    last_step_ns: float | None
    recent_step_median_ns: float | None
    recent_steps_per_s: float | None
    ranks: tuple[LiveRank, ...]

    @property
    def stragglers(self) -> tuple[int, ...]:
        return tuple(r.rank for r in self.ranks if r.straggler)


def _train(rank: RankData) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Start, end and comm time of the training steps, in step order."""
    s = rank.steps
    keep = s["phase"] == int(Phase.TRAIN)
    return (s["start_ns"][keep].astype("float64"), s["end_ns"][keep].astype("float64"),
            np.nan_to_num(s["comm_ns"][keep].astype("float64"), nan=0.0))


def _steps_per_s(start: np.ndarray, end: np.ndarray, k: int) -> float | None:
    if not len(end):
        return None
    first = len(end) - k
    span = end[-1] - (end[first - 1] if first > 0 else start[0])
    return k / (span / 1e9) if span > 0 else None


def _behind(r: int, ends: dict[int, np.ndarray], step_med: float | None) -> str | None:
    """"behind: S/O" when rank ``r`` progressed less than the others at the same moment, or its records stopped
    while theirs went on (see the module docstring); S its steps, O the others' median step count."""
    others = [o for o in ends if o != r]
    total = float(np.median([len(ends[o]) for o in others]))
    mine = ends[r]
    if not len(mine):  # no step yet: behind once the others have been stepping longer than a stall
        going = [float(ends[o][-1] - ends[o][0]) for o in others if len(ends[o])]
        late = bool(going) and total >= LAG_MIN_STEPS and float(np.median(going)) > _stall_ns(step_med)
        return f"behind: 0/{total:g}" if late else None
    at_same_time = float(np.median([np.searchsorted(ends[o], mine[-1], side="right") for o in others]))
    lag = at_same_time - len(mine)
    if lag >= LAG_MIN_STEPS and lag >= LAG_SHARE * at_same_time:
        return f"behind: {len(mine)}/{total:g}"
    last = [float(ends[o][-1]) for o in others if len(ends[o])]
    if last and float(np.median(last)) - float(mine[-1]) > _stall_ns(step_med):
        return f"behind: {len(mine)}/{total:g}"
    return None


def _stall_ns(step_med: float | None) -> float:
    return max(STALL_S * 1e9, STALL_STEPS * (step_med or 0.0))


def _flag(r: int, ends: dict[int, np.ndarray], useful: dict[int, float], step_med: float | None) -> str | None:
    if len(ends) < 2:
        return None
    behind = _behind(r, ends, step_med)
    if behind:
        return behind
    steps = {o: len(e) for o, e in ends.items()}
    others = [o for o in steps if o != r]
    ready = [o for o in others if steps[o] >= MIN_STEPS and o in useful]
    if steps[r] < MIN_STEPS or r not in useful or not ready or not step_med:
        return None
    ref = float(np.median([useful[o] for o in ready]))
    excess = useful[r] - ref
    if useful[r] > STRAGGLER_RATIO * ref and excess >= STRAGGLER_MIN_SHARE * step_med:
        return f"slow: +{excess / 1e6:.0f} ms {useful[r] / ref:.1f}x"
    return None


def live_state(data: RunData, *, now_ns: int) -> LiveState:
    """Recent figures and per-rank progress of the records read so far (see the module docstring)."""
    k_of: dict[int, int] = {}
    rows: dict[int, tuple[RankData, np.ndarray, np.ndarray, np.ndarray]] = {}
    for rd in data.ranks:
        rows.setdefault(rd.stream.rank, (rd, *_train(rd)))  # a restarted rank: its first stream
    useful: dict[int, float] = {}
    step_med: dict[int, float] = {}
    for r, (_, start, end, comm) in rows.items():
        k = k_of[r] = min(RECENT_STEPS, len(end))
        if k:
            dur = (end - start)[-k:]
            step_med[r] = float(np.median(dur))
            useful[r] = float(np.median(dur - comm[-k:]))
    ends = {r: v[2] for r, v in rows.items()}
    all_med = float(np.median(list(step_med.values()))) if step_med else None
    ranks = []
    for r, (rd, start, end, _) in sorted(rows.items()):
        ranks.append(LiveRank(
            rank=r, host=rd.stream.host, steps=len(end),
            last_step_ns=float(end[-1] - start[-1]) if len(end) else None,
            recent_step_median_ns=step_med.get(r), recent_useful_median_ns=useful.get(r),
            since_last_step_s=(now_ns - float(end[-1])) / 1e9 if len(end) else None,
            straggler=_flag(r, ends, useful, all_med)))
    first = ranks[0] if ranks else None
    r0 = rows.get(first.rank) if first else None
    k0 = k_of.get(first.rank, 0) if first else 0
    return LiveState(
        steps=first.steps if first else 0, recent_steps=k0,
        last_step_ns=first.last_step_ns if first else None,
        recent_step_median_ns=first.recent_step_median_ns if first else None,
        recent_steps_per_s=_steps_per_s(r0[1], r0[2], k0) if r0 is not None and k0 else None,
        ranks=tuple(ranks))
