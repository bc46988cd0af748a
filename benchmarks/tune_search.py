"""`stepscope tune`'s search simulated through the real code (analyze/runs/tune.py ``search``): seeded
objectives stand in for the runs, so the truth is known.

- **flat**: every setting equally fast; how often a search claims a gain (the promise: at most 1%), how often the
  screen moved (it may: a wrong move only costs runs), runs used.
- **bowl**: a known optimum (throughput 25% lower a step away on each axis, a bowl in log space; inter=1 intra=2
  is where the yardstick's real program has it, one step from the start); runs used
  against the grid's cells (a sweep of one run a cell), how often the confirmed best is the optimum or a tie
  (within the 2% threshold of its throughput), how often a gain is claimed.

Grid: the yardstick's inter 1,2,3,4,6 x intra 1,2,3,4,6,8 (30 cells), run-to-run spread ``sigma`` (log), noise
normal or heavy-tailed (Student t with 3 degrees of freedom, scaled to the same spread).

    python benchmarks/tune_search.py --searches 400
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Mapping

import numpy as np

from stepscope.analyze.runs.tune import Dimension, search

INTER = ("1", "2", "3", "4", "6")
INTRA = ("1", "2", "3", "4", "6", "8")
CELLS = len(INTER) * len(INTRA)


def noise(rng: np.random.Generator, sigma: float, tails: str) -> float:
    if tails == "heavy":
        return sigma / math.sqrt(3.0) * float(rng.standard_t(3))
    return sigma * float(rng.standard_normal())


def bowl(optimum: tuple[int, int], step: float) -> Callable[[Mapping[str, str]], float]:
    def f(s: Mapping[str, str]) -> float:
        a, b = INTER.index(s["inter"]), INTRA.index(s["intra"])
        return 1000.0 * math.exp(-step * (abs(a - optimum[0]) + abs(b - optimum[1])))
    return f


def runs_of(truth: Callable[[Mapping[str, str]], float], rng: np.random.Generator, sigma: float,
            tails: str) -> Callable[[Mapping[str, str], str], float]:
    """One run's metric: the truth times seeded noise."""
    return lambda s, note: truth(s) * math.exp(noise(rng, sigma, tails))


def simulate(truth: Callable[[Mapping[str, str]], float], start: tuple[str, str], sigma: float, tails: str,
             searches: int, budget: int) -> dict[str, float]:
    space = [Dimension("inter", INTER, start[0]), Dimension("intra", INTRA, start[1])]
    top = max(truth({"inter": a, "intra": b}) for a in INTER for b in INTRA)
    runs: list[int] = []
    claims, moved, found = 0, 0, 0
    for seed in range(searches):
        r = search(space, runs_of(truth, np.random.default_rng(seed), sigma, tails), budget=budget)
        runs.append(r.runs)
        claims += r.claimed
        moved += r.screen_best != r.start
        tie = truth(r.best) >= top * (1 - 0.02)
        found += tie
    a = np.asarray(runs)
    return {"claims": claims / searches, "moved": moved / searches, "found": found / searches,
            "runs_median": float(np.median(a)), "runs_p10": float(np.percentile(a, 10)),
            "runs_p90": float(np.percentile(a, 90)), "fewer": float(np.mean(a < CELLS))}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--searches", type=int, default=400)
    p.add_argument("--budget", type=int, default=40, help="tune's default budget (40)")
    args = p.parse_args()
    print(f"{args.searches} searches each, grid {len(INTER)} x {len(INTRA)} = {CELLS} cells, budget {args.budget}")
    print("| objective | start | spread | tails | gain claimed | screen moved | best = optimum or tie | runs median "
          "[p10, p90] | runs < 30 |")
    print("|---|---|---|---|---|---|---|---|---|")
    cases: list[tuple[str, Callable[[Mapping[str, str]], float], tuple[str, str]]] = [
        ("flat", lambda s: 1000.0, ("1", "1")),
        ("bowl, optimum inter=1 intra=2", bowl((0, 1), 0.25), ("1", "1")),
        ("bowl, optimum inter=3 intra=3", bowl((2, 2), 0.25), ("1", "1")),
        ("bowl, optimum inter=3 intra=3", bowl((2, 2), 0.25), ("2", "3")),
        ("bowl, optimum inter=2 intra=2", bowl((1, 1), 0.25), ("1", "1")),
    ]
    for name, truth, start in cases:
        for sigma in (0.05, 0.10, 0.20):
            for tails in ("normal", "heavy"):
                m = simulate(truth, start, sigma, tails, args.searches, args.budget)
                print(f"| {name} | inter={start[0]} intra={start[1]} | {sigma:.0%} | {tails} | {m['claims']:.2%} | "
                      f"{m['moved']:.0%} | {m['found']:.0%} | {m['runs_median']:.0f} [{m['runs_p10']:.0f}, "
                      f"{m['runs_p90']:.0f}] | {m['fewer']:.0%} |", flush=True)


if __name__ == "__main__":
    main()
