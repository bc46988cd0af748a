"""Collection overhead, measured side by side in one run.

The same training loop (benchmarks/_loop.py, ~10 ms steps on one CPU thread) runs bare, under
`stepscope run` with default settings, under torch.profiler, and under Lightning's SimpleProfiler,
interleaved over several rounds so machine drift hits every mode alike. Prints the median step time
of each mode and its ratio to the bare loop. Also times a region enter/exit and the per-step cost of
the zero-code hooks on a tiny step, where it can be resolved.

Also times start-up (`import torch` bare and under stepscope's boot). The per-hook breakdown, timed and
counted, is benchmarks/hook_costs.py (docs/metrics.md, "Overhead").

Targets (issue 20): <= 10 µs per step for the zero-code hooks; a region enter/exit <= 0.5 µs; start-up
<= 0.2 s.

With TensorFlow and Keras installed, the same interleaved pairs for a Keras ``fit`` (benchmarks/_keras_loop.py,
~10 ms steps): bare vs under `stepscope run` (the zero-code Keras / TensorFlow hooks), paired ratio printed,
and beside it the hooks' own work timed in-process in each stepscope run (µs and share of the step).

    python benchmarks/overhead.py [--rounds 5] [--steps 300] [--keras-steps 150] [--only-keras | --no-keras]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import timeit
from pathlib import Path

HERE = Path(__file__).resolve().parent
LOOP = HERE / "_loop.py"
KERAS_LOOP = HERE / "_keras_loop.py"
KERAS_MODES = ("keras-bare", "keras-stepscope")
"""Keras fit (TensorFlow backend, ~10 ms steps on one thread) bare and under `stepscope run` (zero-code hooks)."""
KERAS_HOOK_COSTS: list[tuple[dict[str, float], float]] = []
"""Per keras-stepscope run: the hooks' own work timed in-process (_keras_loop.py --hook-cost) and its step time."""


def run_mode(mode: str, steps: int, hidden: int, store: str) -> float:
    base = [sys.executable, str(LOOP), "--steps", str(steps), "--hidden", str(hidden)]
    if mode in KERAS_MODES:
        base = [sys.executable, str(KERAS_LOOP), "--steps", str(steps), "--hidden", str(hidden)]
        base += ["--hook-cost"] if mode == "keras-stepscope" else []
        mode = "stepscope" if mode == "keras-stepscope" else "bare-keras"
    if mode == "stepscope":
        cmd = [sys.executable, "-m", "stepscope", "run", "--quiet", "--store", store, "--", *base]
    elif mode == "bare-keras":
        cmd = base
    else:
        cmd = [*base, "--mode", mode]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    line = [ln for ln in out.splitlines() if ln.startswith("{")][-1]
    result = json.loads(line)
    if "hook_cost" in result:
        KERAS_HOOK_COSTS.append((result["hook_cost"], float(result["median_step_ns"])))
    return float(result["median_step_ns"])


def have_tensorflow() -> bool:
    import importlib.util

    return importlib.util.find_spec("tensorflow") is not None and importlib.util.find_spec("keras") is not None


def have_lightning() -> bool:
    try:
        import lightning  # noqa: F401
    except ImportError:
        return False
    return True


def region_cost_ns(store: str) -> tuple[float, float]:
    """(region enter+exit, empty context manager) in ns per use, inside an active session."""
    import contextlib

    import stepscope

    with stepscope.session(name="bench-region", store=store):
        n = 200_000
        region = stepscope.region
        t_region = min(timeit.repeat(lambda: region("x").__enter__().__exit__(None, None, None),
                                     number=n, repeat=5)) / n
        null = contextlib.nullcontext()
        t_null = min(timeit.repeat(lambda: null.__enter__() or null.__exit__(None, None, None),
                                   number=n, repeat=5)) / n
    return t_region * 1e9, t_null * 1e9


def startup_cost(rounds: int = 7) -> tuple[float, float, float]:
    """(bare, under `stepscope run`'s boot, stepscope's own import time) in s for ``import torch``:
    minima over ``rounds`` alternating pairs; the last from ``-X importtime`` (stepscope's modules' own
    import times, summed: what does not move with torch's import)."""
    import os
    import time

    src = Path(__file__).resolve().parent.parent / "src"
    boot = src / "stepscope" / "collect" / "boot"
    bare_env = {**os.environ}
    bare_env.pop("STEPSCOPE_RUN_DIR", None)
    with tempfile.TemporaryDirectory() as run_dir:
        boot_env = {**bare_env, "STEPSCOPE_RUN_DIR": run_dir, "STEPSCOPE_RUN_ID": "startup",
                    "PYTHONPATH": os.pathsep.join([str(boot), str(src)])}
        cmd = [sys.executable, "-c", "import torch"]
        bare: list[float] = []
        booted: list[float] = []
        for _ in range(rounds):
            for env, out in ((bare_env, bare), (boot_env, booted)):
                t0 = time.perf_counter()
                subprocess.run(cmd, env=env, check=True)
                out.append(time.perf_counter() - t0)
        own: list[float] = []
        for _ in range(3):
            err = subprocess.run([sys.executable, "-X", "importtime", *cmd[1:]], env=boot_env, check=True,
                                 capture_output=True, text=True).stderr
            rows = [ln.split("|") for ln in err.splitlines() if ln.startswith("import time:")]
            us = [int(r[0].split(":")[1]) for r in rows if r[2].strip().startswith(("stepscope", "sitecustomize"))]
            own.append(sum(us) / 1e6)
    return min(bare), min(booted), min(own)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--hidden", type=int, default=1024, help="hidden size: 1024 gives ~10 ms steps on one thread")
    p.add_argument("--keras-steps", type=int, default=150, help="steps of the Keras fit (TensorFlow pairs)")
    p.add_argument("--only-keras", action="store_true", help="only the Keras / TensorFlow pairs")
    p.add_argument("--no-keras", action="store_true", help="leave out the Keras / TensorFlow pairs")
    args = p.parse_args()
    keras_modes = list(KERAS_MODES) if have_tensorflow() and not args.no_keras else []
    modes = [] if args.only_keras else (
        ["bare", "stepscope", "torch-profiler"] + (["lightning-simple"] if have_lightning() else []))
    tiny_modes = ["bare", "stepscope"]
    results: dict[str, list[float]] = {m: [] for m in modes}
    tiny: dict[str, list[float]] = {m: [] for m in tiny_modes}
    keras: dict[str, list[float]] = {m: [] for m in keras_modes}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for m in modes:
                results[m].append(run_mode(m, args.steps, args.hidden, tmp))
            for m in keras_modes:  # the pair runs back to back in every round: drift hits both alike
                keras[m].append(run_mode(m, args.keras_steps, args.hidden, tmp))
            if args.only_keras:
                print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
                continue
            for m in tiny_modes:
                tiny[m].append(run_mode(m, 1000, 16, tmp))
            print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
        region_ns, null_ns = region_cost_ns(tmp) if not args.only_keras else (0.0, 0.0)
    if keras_modes:
        kb = statistics.median(keras["keras-bare"])
        ks = statistics.median(keras["keras-stepscope"])
        ratios = [s / b for s, b in zip(keras["keras-stepscope"], keras["keras-bare"], strict=True)]
        print(f"\nKeras fit (TensorFlow, {args.keras_steps} steps, one thread), {args.rounds} interleaved pairs: "
              f"bare {kb / 1e6:.3f} ms, stepscope {ks / 1e6:.3f} ms per step; paired ratio median "
              f"{statistics.median(ratios):.4f} (range {min(ratios):.4f}-{max(ratios):.4f}; target < 1.01)")
        from _keras_loop import describe_hook_cost

        cost, step_ns = sorted(KERAS_HOOK_COSTS, key=lambda c: c[0]["per_step"] / c[1])[len(KERAS_HOOK_COSTS) // 2]
        print(f"median of {len(KERAS_HOOK_COSTS)} runs: " + describe_hook_cost(cost, step_ns))
    if args.only_keras:
        return
    print(f"\nmedian step time over {args.rounds} interleaved rounds ({args.steps} steps each, warm-up excluded);"
          "\nratios are paired: each round's mode over the same round's bare loop, median and range over rounds")
    print(f"{'mode':<20}{'step':>12}{'vs bare':>10}{'range':>20}")
    for m in modes:
        med = statistics.median(results[m])
        ratios = [x / b for x, b in zip(results[m], results["bare"], strict=True)]
        print(f"{m:<20}{med / 1e6:>10.3f} ms{statistics.median(ratios):>10.4f}"
              f"{min(ratios):>10.4f}-{max(ratios):.4f}")
    tb, ts = statistics.median(tiny["bare"]), statistics.median(tiny["stepscope"])
    per_step_us = statistics.median([s - b for s, b in zip(tiny["stepscope"], tiny["bare"], strict=True)]) / 1e3
    print(f"\nzero-code hooks on a tiny step: bare {tb / 1e3:.1f} µs, stepscope {ts / 1e3:.1f} µs "
          f"-> {per_step_us:.1f} µs per step = {per_step_us / 100:.3f}% of a 10 ms step (target < 1%)")
    print(f"region enter+exit: {region_ns:.0f} ns (an empty context manager: {null_ns:.0f} ns; target <= 500 ns)")
    bare_s, boot_s, own_s = startup_cost()
    print(f"start-up of `import torch`: bare {bare_s:.2f} s, under stepscope's boot {boot_s:.2f} s "
          f"(+{boot_s - bare_s:.2f} s); stepscope's own modules import in {own_s:.3f} s (target <= 0.2 s)")
    print("per-hook costs: python benchmarks/hook_costs.py")


if __name__ == "__main__":
    main()
