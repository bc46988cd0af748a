"""Where ``analyze_trace`` spends its time, reading excluded: CPU seconds per analysis on ~1M-event traces.

    .venv/bin/python benchmarks/trace_analysis_profile.py [--sources v100,nccl2,cpu] [--events 1000000]
        [--repeats 3] [--workdir /tmp/vecan] [--profile] [--top 25] [--baseline-src OLD/src --rounds 3]

For each source (keys of ``trace_analysis.SOURCES``) the ~N-event trace of ``trace_analysis.py --by-source``
is built once (same ``synthesize``), read once with ``read_trace`` and pickled next to it, so that later
runs time only the analysis. Each analysis function is then timed on its own (CPU time, ``time.process_time``,
best and median of --repeats), and the whole ``analyze_trace``; ``--profile`` adds a cProfile table sorted
by own time. The machine may be shared: CPU time, not wall time, and the load average is printed.

--baseline-src: before/after. Each round runs this script once from that source tree and once from this one
(fresh child processes, order alternating), and the table shows per analysis the best CPU seconds of each.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import json
import os
import pickle
import pstats
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import trace_analysis as bench

from stepscope.analyze.trace.analysis import analyze_trace
from stepscope.analyze.trace.commkernels import comm_kernels
from stepscope.analyze.trace.gpuview import gpu_view
from stepscope.analyze.trace.idle import idle_breakdown
from stepscope.analyze.trace.kernels import kernel_breakdown, memory_copies
from stepscope.analyze.trace.launches import launch_stats
from stepscope.analyze.trace.ops import host_times, module_tree, operator_table
from stepscope.analyze.trace.optimizer import optimizer_stats
from stepscope.analyze.trace.precision import gemm_precision
from stepscope.analyze.trace.steps import step_summary
from stepscope.analyze.trace.temporal import comm_overlap, temporal_breakdown, utilization
from stepscope.model.events import EventTable
from stepscope.traces.components import ComponentRules
from stepscope.traces.kineto import read_trace


def load_table(key: str, events: int, work: Path) -> EventTable:
    """The source's synthetic trace, read once and cached as a pickle."""
    _, rel = bench.SOURCES[key]
    path, _ = bench.cached(work, f"src_{key}", events, fixture=bench.ROOT / "tests" / "data" / "traces" / rel)
    pkl = path.with_suffix(".table.pkl")
    if pkl.exists() and pkl.stat().st_mtime >= path.stat().st_mtime:
        with pkl.open("rb") as f:
            table: EventTable = pickle.load(f)
        return table
    table = read_trace(path)
    with pkl.open("wb") as f:
        pickle.dump(table, f, protocol=pickle.HIGHEST_PROTOCOL)
    return table


def cpu_seconds(fn: Callable[[], Any], repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        t0 = time.process_time()
        fn()
        out.append(time.process_time() - t0)
    return out


def parts(table: EventTable) -> dict[str, Callable[[], Any]]:
    """Each analysis of ``analyze_trace`` on its own (inputs computed once, outside the timing)."""
    rules = ComponentRules.defaults()
    gpu = gpu_view(table, rules)
    host = host_times(table, gpu)
    return {
        "gpu_view": lambda: gpu_view(table, rules),
        "host_times": lambda: host_times(table, gpu),
        "step_summary": lambda: step_summary(table, gpu),
        "temporal_breakdown": lambda: temporal_breakdown(gpu),
        "idle_breakdown": lambda: idle_breakdown(table, gpu) if len(gpu) else None,
        "kernel_breakdown": lambda: kernel_breakdown(table, gpu),
        "comm_overlap": lambda: comm_overlap(gpu),
        "utilization": lambda: utilization(table, gpu),
        "launch_stats": lambda: launch_stats(table, gpu),
        "memory_copies": lambda: memory_copies(table, gpu),
        "operator_table": lambda: operator_table(table, host, rules),
        "module_tree": lambda: module_tree(table, host),
        "gemm_precision": lambda: gemm_precision(table, gpu),
        "optimizer_stats": lambda: optimizer_stats(table, gpu),
        "comm_kernels": lambda: comm_kernels(table, gpu),
    }


def measure(table: EventTable, repeats: int) -> dict[str, list[float]]:
    """CPU seconds of each analysis and of the whole ``analyze_trace``, ``repeats`` times each."""
    out = {name: cpu_seconds(fn, repeats) for name, fn in parts(table).items()}
    out["analyze_trace"] = cpu_seconds(functools.partial(analyze_trace, table), repeats)
    return out


def compare(args: argparse.Namespace) -> None:
    """Before (--baseline-src) and after (this tree), in alternating child processes."""
    here = Path(__file__).resolve()
    trees = {"before": args.baseline_src.resolve(), "after": here.parents[1] / "src"}
    for key in args.sources.split(","):
        best: dict[str, dict[str, float]] = {"before": {}, "after": {}}
        for r in range(args.rounds):
            for which in (("before", "after") if r % 2 == 0 else ("after", "before")):
                cmd = [sys.executable, str(here), "--sources", key, "--events", str(args.events), "--repeats",
                       str(args.repeats), "--workdir", str(args.workdir), "--json"]
                env = dict(os.environ, PYTHONPATH=str(trees[which]))
                got = json.loads(subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout)
                for name, ts in got.items():
                    best[which][name] = min(best[which].get(name, float("inf")), *ts)
        print(f"\n{bench.SOURCES[key][0]}: best CPU s over {args.rounds} rounds x {args.repeats} repeats")
        print(f"  {'':20s} {'before':>8s} {'after':>8s} {'ratio':>6s}")
        for name, b in best["before"].items():
            a = best["after"][name]
            print(f"  {name:20s} {b:8.3f} {a:8.3f} {b / a if a > 0 else float('nan'):6.1f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sources", default="v100,nccl2,cpu")
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/stepscope-trace-profile"))
    ap.add_argument("--profile", action="store_true", help="also print a cProfile table of analyze_trace")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--baseline-src", type=Path, help="before/after against this src folder (see above)")
    ap.add_argument("--rounds", type=int, default=3, help="--baseline-src: child runs of each tree")
    ap.add_argument("--json", action="store_true", help="print only the CPU seconds, as JSON (one source)")
    args = ap.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    if args.json:
        print(json.dumps(measure(load_table(args.sources.split(",")[0], args.events, args.workdir), args.repeats)))
        return 0
    if args.baseline_src:
        print(f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
        compare(args)
        print(f"load average at the end {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
        return 0
    print(f"Python {sys.version.split()[0]}, load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for key in args.sources.split(","):
        table = load_table(key, args.events, args.workdir)
        print(f"\n{bench.SOURCES[key][0]}: {len(table):,} events (CPU s: best / median of {args.repeats})")
        times = measure(table, args.repeats)
        whole = times.pop("analyze_trace")
        for name, ts in times.items():
            print(f"  {name:20s} {min(ts):7.3f} {statistics.median(ts):7.3f}")
        print(f"  {'(sum of parts)':20s} {sum(min(ts) for ts in times.values()):7.3f}")
        print(f"  {'analyze_trace':20s} {min(whole):7.3f} {statistics.median(whole):7.3f}")
        if args.profile:
            prof = cProfile.Profile()
            prof.runcall(analyze_trace, table)
            pstats.Stats(prof).sort_stats("tottime").print_stats(args.top)
    print(f"load average at the end {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
