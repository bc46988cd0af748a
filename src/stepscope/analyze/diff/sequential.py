"""Sequential A/B pairs: add pairs until the paired verdict is decided or the budget is spent.

`advise --verify` and `tune` both decide a change from interleaved pairs. With a fixed number of pairs a quiet
host wastes runs and a busy one ends at "cannot tell"; looking at the verdict as pairs arrive and stopping once it
is decided fixes both, but every look is another chance of a false call. So the looks are planned in advance
(``min_pairs``, then about 1.5 times as many pairs each time, up to ``max_pairs``) and the overall error budget
``1 - confidence`` is split evenly over them (Bonferroni over looks): each look decides at
``1 - (1 - confidence) / looks``, and the chance that any look calls an A/A study faster or slower is at most
``1 - confidence`` whatever the noise (benchmarks/ab_coverage.py ``--sequential`` checks it by simulation
through the real verdict code). `tune`'s confirmation decides one direction only (``one_sided``).

The verdict at each look is ``compare_runs``/``pair_verdict``'s, unchanged: this module only says when to look
and at what level.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from stepscope.analyze.diff.significance import BENCH_CONFIDENCE, Verdict

GROWTH = 1.5
"""Each planned look has about this many times the pairs of the one before (fewer looks than one per pair: each
look costs level, and one more pair rarely turns a verdict)."""


@dataclass(frozen=True, slots=True)
class Looks:
    """When to look at the pairs and at what level. ``confidence``: the overall level (A/A false verdicts at most
    ``1 - confidence`` over all looks)."""

    min_pairs: int
    max_pairs: int
    confidence: float = BENCH_CONFIDENCE
    one_sided: bool = False
    """Only a call in one direction counts as an error (tune's confirmation claims "better" only): a two-sided
    interval errs that way half its level, so each look may take twice the share."""

    def __post_init__(self) -> None:
        if not 2 <= self.min_pairs <= self.max_pairs:
            raise ValueError(f"need 2 <= min_pairs <= max_pairs, got {self.min_pairs}, {self.max_pairs}")
        if not 0 < self.confidence < 1:
            raise ValueError(f"need 0 < confidence < 1, got {self.confidence}")

    @property
    def at(self) -> tuple[int, ...]:
        """The pair counts at which the verdict is looked at: ``min_pairs``, x1.5 each time, ``max_pairs`` last."""
        out = [self.min_pairs]
        while out[-1] < self.max_pairs:
            out.append(min(self.max_pairs, max(out[-1] + 1, math.ceil(out[-1] * GROWTH))))
        return tuple(out)

    @property
    def look_confidence(self) -> float:
        """The level every look decides at: the overall error split evenly over the looks."""
        share = (1.0 - self.confidence) / len(self.at)
        return 1.0 - (2.0 * share if self.one_sided else share)

    def is_look(self, pairs: int) -> bool:
        return pairs in self.at

    def stop(self, pairs: int, verdict: Verdict) -> bool:
        """After a look at ``pairs`` pairs: stop there (decided, or the last look)?"""
        return verdict is not Verdict.INCONCLUSIVE or pairs >= self.max_pairs

    def describe(self) -> str:
        looks = ", ".join(str(n) for n in self.at)
        fam = ", one direction" if self.one_sided else ""
        return (f"sequential pairs: looks at {looks} pairs, each at {self.look_confidence:.3%} "
                f"({1 - self.confidence:.0%} split over {len(self.at)} looks{fam})")
