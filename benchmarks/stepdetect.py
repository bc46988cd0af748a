"""Step detection: speed and error rates of stepscope's detector, a naive exact solver, and asv's.

Speed: seconds (best of --repeats) and peak traced memory to fit asv's staircase test series (six steps
plus noise) of 1,000 / 3,000 / 10,000 points, for

* ``stepscope``: ``stepscope.analyze.runs.stepdetect.detect_steps`` (the whole detector: penalty path + criterion);
* ``naive``: the exact L1 Potts dynamic programme over all segmentations at one penalty
  (``fit_potts(max_size=None)``: every segment's cost, O(n^2) segments; skipped above --naive-max points);
* ``asv``: ``asv.step_detect.detect_steps`` (with its compiled range-median), when asv is installed.

Error rates (simulated, fixed seed, --series series per row; "found" = exactly one step within one commit
of the true one): false steps under AR(1) noise (rho 0.8, sd 1%) and independent noise (sd 1%) at 30 and
100 commits, a 0.3%/commit drift turned into a staircase (two or more steps), a 5% step at CV 1% in 30
commits (at a random commit between 8 and 22) found.

asv is not a dependency of stepscope. To compare against it: ``pip install --no-deps asv==0.6.6`` (the pin in
constraints.txt); only its ``step_detect`` module is loaded, without the rest of the package.

    python benchmarks/stepdetect.py [--series 200] [--repeats 3] [--sizes 1000 3000 10000]
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import sys
import time
import tracemalloc
import types
from collections.abc import Callable
from typing import Any

import numpy as np

from stepscope.analyze.runs.stepdetect import detect_steps, fit_potts


def load_asv_step_detect() -> Any | None:
    """asv.step_detect without importing asv's package __init__ (which needs asv's other dependencies)."""
    spec = importlib.util.find_spec("asv")
    if spec is None or not spec.submodule_search_locations:
        return None
    if "asv" not in sys.modules:
        pkg = types.ModuleType("asv")
        pkg.__path__ = list(spec.submodule_search_locations)
        sys.modules["asv"] = pkg
    import asv.step_detect as sd  # type: ignore[import-not-found]

    return sd


def staircase(n: int, rng: np.random.Generator) -> np.ndarray:
    """asv's test staircase (steps at 10, 30, 200, 600, 2500, 2990 where they fit), noise sd 0.05."""
    t = np.arange(n)
    s = max(n / 3000, 1 / 3)
    y0 = (0.4 * (t >= 10) + 0.9 * (t >= 30) - 0.2 * (t >= int(200 * s)) + 0.2 * (t >= int(600 * s))
          + 1.1 * (t >= int(2500 * s)) - 0.5 * (t >= int(2990 * s)))
    return y0 + 0.05 * rng.standard_normal(n)


def timed(fns: dict[str, Callable[[], object]], repeats: int) -> dict[str, tuple[float, float]]:
    """{name: (best wall seconds over ``repeats``, peak traced MiB of one call)}; the candidates run
    interleaved, so a busy neighbour slows them alike."""
    best = dict.fromkeys(fns, math.inf)
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
    out = {}
    for name, fn in fns.items():
        tracemalloc.start()
        fn()
        out[name] = (best[name], tracemalloc.get_traced_memory()[1] / 2**20)
        tracemalloc.stop()
    return out


def ar1(rng: np.random.Generator, n: int, rho: float, sd: float) -> np.ndarray:
    e = np.empty(n)
    e[0] = rng.standard_normal() * sd
    innov = rng.standard_normal(n) * sd * math.sqrt(1 - rho * rho)
    for i in range(1, n):
        e[i] = rho * e[i - 1] + innov[i]
    return e


def step_positions_ours(y: np.ndarray) -> list[int]:
    return [s.index for s in detect_steps(y).steps]


def step_positions_asv(asv: Any) -> Callable[[np.ndarray], list[int]]:
    def run(y: np.ndarray) -> list[int]:
        return [left for left, *_ in asv.detect_steps(y.tolist())][1:]
    return run


def rates(detect: Callable[[np.ndarray], list[int]], series: int, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    out: dict[str, float] = {}
    for n in (30, 100):
        out[f"AR(1) 0.8 false, {n}"] = sum(bool(detect(1 + ar1(rng, n, 0.8, 0.01))) for _ in range(series)) / series
        out[f"white false, {n}"] = sum(bool(detect(1 + 0.01 * rng.standard_normal(n))) for _ in range(series)) / series
        out[f"drift staircase, {n}"] = sum(
            len(detect(1 + 0.003 * np.arange(n) + 0.01 * rng.standard_normal(n))) >= 2 for _ in range(series)) / series
    found = 0
    for _ in range(series):
        k = int(rng.integers(8, 23))
        y = 1 + 0.01 * rng.standard_normal(30)
        y[k:] *= 1.05
        got = detect(y)
        found += len(got) == 1 and abs(got[0] - k) <= 1
    out["5% step found, 30"] = found / series
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--series", type=int, default=200)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--sizes", type=int, nargs="+", default=[1000, 3000, 10000])
    p.add_argument("--naive-max", type=int, default=1000)
    p.add_argument("--seed", type=int, default=12)
    args = p.parse_args()
    asv = load_asv_step_detect()
    print(f"asv: {'loaded, compiled range-median: ' + str(asv._rangemedian is not None) if asv else 'not installed'}")
    print("\nspeed: best of", args.repeats, "(s), peak traced memory (MiB)")
    print(f"{'points':>8} {'stepscope':>18} {'naive exact':>18} {'asv':>18}")
    for n in args.sizes:
        y = staircase(n, np.random.default_rng(args.seed))
        fns: dict[str, Callable[[], object]] = {"stepscope": lambda y=y: detect_steps(y)}
        if asv:
            fns["asv"] = lambda y=y: asv.detect_steps(y.tolist())
        got = timed(fns, args.repeats)
        if n <= args.naive_max:
            got.update(timed({"naive": lambda y=y: fit_potts(y, gamma=0.5, min_size=2)}, 1))
        ours, naive, theirs = got["stepscope"], got.get("naive"), got.get("asv")

        def cell(r: tuple[float, float] | None) -> str:
            return f"{r[0]:8.2f} s {r[1]:6.0f} MiB" if r else f"{'-':>18}"

        print(f"{n:>8} {cell(ours):>18} {cell(naive):>18} {cell(theirs):>18}", flush=True)
    print(f"\nerror rates over {args.series} series per row (seed {args.seed})")
    ours_r = rates(step_positions_ours, args.series, args.seed)
    asv_r = rates(step_positions_asv(asv), args.series, args.seed) if asv else {}
    print(f"{'':28} {'stepscope':>10} {'asv':>10}")
    for k, v in ours_r.items():
        a = f"{asv_r[k]:10.3f}" if k in asv_r else f"{'-':>10}"
        print(f"{k:28} {v:10.3f} {a}")


if __name__ == "__main__":
    main()
