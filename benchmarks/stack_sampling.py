"""Overhead of the Python stack sampler (`--sample-stacks`) and of region enter/exit.

    .venv/bin/python benchmarks/stack_sampling.py [--hz 100] [--seconds 2] [--rounds 5]

1. Sampler, CPU cost: the time of one sample (read the frames, walk 40 frames, aggregate) times HZ.
2. Sampler, end to end: the same CPU-bound Python loop (a fixed amount of work, 40 frames deep so that every sample
   walks a realistic stack) is timed with the sampler off and on at HZ, alternating A/B over ROUNDS
   rounds; the overhead is the ratio of the medians minus 1. Target: < 2% at 100 Hz.
3. Region enter/exit: ``with region("r"):`` around an empty body, no session (STEPSCOPE_DISABLE), minus
   an empty loop; target < 3 µs a pair. The stack sampler reads the main thread's region stack through a
   reference taken once, so the hot path is unchanged.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("STEPSCOPE_DISABLE", "1")


def work(depth: int, n: int) -> int:
    if depth:
        return work(depth - 1, n)
    s = 0
    for i in range(n):
        s += i * i % 7
    return s


def timed_work(n: int) -> float:
    t = time.perf_counter()
    work(40, n)
    return time.perf_counter() - t


def sampler_overhead(hz: float, seconds: float, rounds: int) -> tuple[float, float, float, int]:
    from stepscope.collect.system.stacks import StackSampler

    n = 100_000
    while timed_work(n) < seconds / 4:
        n *= 2
    n = int(n * seconds / timed_work(n))
    off, on, samples = [], [], 0
    for _ in range(rounds):
        off.append(timed_work(n))
        got: list[dict[str, object]] = []
        s = StackSampler(hz, got.append, process="main", region_of=lambda: "", interval_s=3600)
        s.start()
        on.append(timed_work(n))
        s.stop()
        samples += sum(int(r["samples"]) for r in got)  # type: ignore[call-overload]
    a, b = statistics.median(off), statistics.median(on)
    return a, b, b / a - 1, samples


def sample_cost(n: int = 5000) -> float:
    """Seconds of one sample (sys._current_frames + a 40-frame walk + aggregation), sampling this thread."""
    import threading

    from stepscope.collect.system.stacks import StackSampler

    s = StackSampler(100.0, lambda r: None, process="main", region_of=lambda: "", interval_s=3600)
    s.target = threading.get_ident()
    out: list[float] = []

    def deep(depth: int) -> None:
        if depth:
            return deep(depth - 1)
        for _ in range(3):
            t = time.perf_counter()
            for _ in range(n):
                s.sample()
            out.append((time.perf_counter() - t) / n)
        return None

    deep(40)
    return min(out)


def region_cost(n: int = 200_000) -> float:
    from stepscope.collect.regions import region

    def empty() -> float:
        t = time.perf_counter_ns()
        for _ in range(n):
            pass
        return time.perf_counter_ns() - t

    def regions() -> float:
        t = time.perf_counter_ns()
        for _ in range(n):
            with region("r"):
                pass
        return time.perf_counter_ns() - t

    base = min(empty() for _ in range(3))
    return (min(regions() for _ in range(3)) - base) / n


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hz", type=float, default=100.0)
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    off, on, overhead, samples = sampler_overhead(args.hz, args.seconds, args.rounds)
    print(f"sampler at {args.hz:g} Hz: bare {off:.3f} s, sampled {on:.3f} s (medians of {args.rounds}), "
          f"overhead {100 * overhead:+.2f}% ({samples} samples, target < 2%)")
    cost = sample_cost()
    print(f"one sample of a 40-frame stack: {cost * 1e6:.1f} µs, i.e. {100 * cost * args.hz:.2f}% of one core at "
          f"{args.hz:g} Hz (CPU cost alone, without the GIL hand-over)")
    print(f"region enter/exit: {region_cost() / 1e3:.2f} µs a pair (target < 3 µs)")


if __name__ == "__main__":
    main()
