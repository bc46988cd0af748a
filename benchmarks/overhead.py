"""Collection overhead, measured side by side.

1. The same training loop (benchmarks/_loop.py ``mlp``, ~10 ms steps on one CPU thread) runs bare, under
   `stepscope run` with default settings, under torch.profiler, and under Lightning's SimpleProfiler,
   interleaved over several rounds so machine drift hits every mode alike: median step time per mode and its
   ratio to the bare loop.
2. The three scripts of issue 20 where the hooks weigh most (``loader48``: a 48-item DataLoader batch,
   ``linear``: a ``Linear(20, 1)`` step, ``many``: 201 modules), bare and under `stepscope run`, in
   interleaved pairs: the paired difference of the median step time and of the process CPU time per step
   (background threads included).
   Then the hooks' cost on a realistic step (benchmarks/step_overhead.py: a small CNN fed by a real DataLoader,
   about 1.5 ms a step on a quiet core): bare, bare again (the A/A check) and hooked blocks interleaved in
   rounds, the paired difference to bare by the wall and the CPU clock with its sign-test interval, judged
   against the target (met, not met, inconclusive; not judged when the A/A misses 0).
3. The per-hook table (benchmarks/hook_costs.py: each hook's own figure, thread CPU time, minima of
   repeats), a region enter/exit, and start-up (``python -c "import torch"`` bare and under stepscope's boot,
   wall and CPU time, minima over alternating pairs).

Targets (issue 20), printed beside the figures: <= 10 µs per step for the zero-code hooks; a region
enter/exit <= 0.5 µs; start-up <= 0.2 s. The load average is printed: on a shared machine it decides how
far a figure can be trusted.

With TensorFlow and Keras installed, the same interleaved rounds for a Keras ``fit`` (benchmarks/_keras_loop.py,
~10 ms steps), three processes per round in a rotating order: bare, bare again (A/A: the noise floor of the
pair) and under `stepscope run` (the zero-code Keras / TensorFlow hooks); each ratio (over the same round's bare)
printed as the median over rounds with its sign-test interval; then one more run under `stepscope run` times
the hooks' own work in-process (µs and share of the step; kept out of the pairs, since its timers add to the
steps they time); then the arms paired within one process and one compiled train function, whose noise floor
is below 1% where separate runs' is not (benchmarks/keras_within.py, ``--within-rounds``, 0: left out).
Per-part figures of separate fits in one process: benchmarks/keras_overhead.py.

    python benchmarks/overhead.py [--rounds 5] [--steps 300] [--keras-steps 150] [--only-keras | --no-keras]
        [--no-tools] [--no-scripts] [--within-rounds 1000] [--step-rounds 60] [--step-processes 3]
    python benchmarks/overhead.py --no-tools --no-scripts --no-keras --step-rounds 200   # the realistic step only
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
LOOP = HERE / "_loop.py"
KERAS_LOOP = HERE / "_keras_loop.py"
KERAS_MODES = ("keras-bare", "keras-bare-again", "keras-stepscope")
"""Keras fit (TensorFlow backend, ~10 ms steps on one thread) bare, bare again (A/A) and under `stepscope run`
(zero-code hooks); ``keras-hook-cost``, run once after the rounds, times the hooks' own work (--hook-cost)."""
KERAS_HOOK_COSTS: list[tuple[dict[str, float], float]] = []
"""Per keras-stepscope run: the hooks' own work timed in-process (_keras_loop.py --hook-cost) and its step time."""


SCRIPT_STEPS = {"loader48": 1500, "linear": 4000, "many": 300}
"""Steps per run of each issue-20 script (about 1-2 s of steps each on an idle core)."""
STEP_TARGET_US = 10.0
REGION_TARGET_US = 0.5
STARTUP_TARGET_S = 0.2


def run_loop(mode: str, steps: int, hidden: int, store: str, script: str = "mlp") -> dict[str, float]:
    """One run of benchmarks/_loop.py (or the Keras loop); its JSON line."""
    base = [sys.executable, str(LOOP), "--steps", str(steps), "--hidden", str(hidden), "--script", script]
    if mode in (*KERAS_MODES, "keras-hook-cost"):
        base = [sys.executable, str(KERAS_LOOP), "--steps", str(steps), "--hidden", str(hidden)]
        base += ["--hook-cost"] if mode == "keras-hook-cost" else []
        mode = "stepscope" if mode in ("keras-stepscope", "keras-hook-cost") else "bare-keras"
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
        KERAS_HOOK_COSTS.append((result.pop("hook_cost"), float(result["median_step_ns"])))
    return {k: float(v) for k, v in result.items()}


def run_mode(mode: str, steps: int, hidden: int, store: str) -> float:
    return run_loop(mode, steps, hidden, store)["median_step_ns"]


def have_tensorflow() -> bool:
    import importlib.util

    return importlib.util.find_spec("tensorflow") is not None and importlib.util.find_spec("keras") is not None


def have_lightning() -> bool:
    try:
        import lightning  # noqa: F401
    except ImportError:
        return False
    return True


def startup_cost(rounds: int = 7) -> dict[str, float]:
    """``python -c "import torch"`` bare and under `stepscope run`'s boot (the injected sitecustomize and a
    dormant session; the hooks install once torch is imported), over ``rounds`` alternating pairs: minima of
    wall time (``bare_wall_s``, ``boot_wall_s``) and of CPU time (user + system of the child: what a busy
    machine moves least; ``bare_cpu_s``, ``boot_cpu_s``); and, from ``-X importtime``, the sum of
    stepscope's own modules' import times (``own_import_s``, minimum of 3)."""
    import os
    import resource
    import time

    src = Path(__file__).resolve().parent.parent / "src"
    boot = src / "stepscope" / "collect" / "startup" / "boot"
    bare_env = {**os.environ}
    bare_env.pop("STEPSCOPE_RUN_DIR", None)
    cmd = [sys.executable, "-c", "import torch"]

    def timed(env: dict[str, str]) -> tuple[float, float]:
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, check=True)
        wall = time.perf_counter() - t0
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)

    with tempfile.TemporaryDirectory() as run_dir:
        boot_env = {**bare_env, "STEPSCOPE_RUN_DIR": run_dir, "STEPSCOPE_RUN_ID": "startup",
                    "PYTHONPATH": os.pathsep.join([str(boot), str(src)])}
        bare: list[tuple[float, float]] = []
        booted: list[tuple[float, float]] = []
        for _ in range(rounds):
            bare.append(timed(bare_env))
            booted.append(timed(boot_env))
        own: list[float] = []
        for _ in range(3):
            err = subprocess.run([sys.executable, "-X", "importtime", *cmd[1:]], env=boot_env, check=True,
                                 capture_output=True, text=True).stderr
            rows = [ln.split("|") for ln in err.splitlines() if ln.startswith("import time:")]
            us = [int(r[0].split(":")[1]) for r in rows if r[2].strip().startswith(("stepscope", "sitecustomize"))]
            own.append(sum(us) / 1e6)
    return {"bare_wall_s": min(w for w, _ in bare), "boot_wall_s": min(w for w, _ in booted),
            "bare_cpu_s": min(c for _, c in bare), "boot_cpu_s": min(c for _, c in booted),
            "own_import_s": min(own)}


def script_pairs(rounds: int, store: str) -> dict[str, dict[str, list[float]]]:
    """The issue-20 scripts bare and under `stepscope run`, back to back in each round: per script and mode,
    the median step ns and the process CPU ns per step of each run."""
    out: dict[str, dict[str, list[float]]] = {}
    for r in range(rounds):
        for script, steps in SCRIPT_STEPS.items():
            for mode in ("bare", "stepscope"):
                got = run_loop(mode, steps, 0, store, script)
                d = out.setdefault(script, {})
                d.setdefault(f"{mode}_median", []).append(got["median_step_ns"])
                d.setdefault(f"{mode}_cpu", []).append(got["cpu_per_step_ns"])
        print(f"scripts: round {r + 1}/{rounds} done", file=sys.stderr)
    return out


def print_script_pairs(res: dict[str, dict[str, list[float]]]) -> None:
    print(f"\nissue-20 scripts under `stepscope run`, {len(next(iter(res.values()))['bare_median'])} interleaved pairs "
          "(differences paired by round: median, range)")
    print(f"{'script':<10}{'bare step':>11}{'step cost':>11}{'range':>20}{'CPU cost':>10}{'range':>20}   target")
    for script, d in res.items():
        step = [s - b for s, b in zip(d["stepscope_median"], d["bare_median"], strict=True)]
        cpu = [s - b for s, b in zip(d["stepscope_cpu"], d["bare_cpu"], strict=True)]
        print(f"{script:<10}{statistics.median(d['bare_median']) / 1e3:>9.1f}µs"
              f"{statistics.median(step) / 1e3:>9.1f}µs{min(step) / 1e3:>9.1f} to {max(step) / 1e3:>6.1f}"
              f"{statistics.median(cpu) / 1e3:>8.1f}µs{min(cpu) / 1e3:>9.1f} to {max(cpu) / 1e3:>6.1f}"
              f"   <= {STEP_TARGET_US:g} µs")
    print("  step cost: median step time under stepscope minus bare; CPU cost: process CPU time per step (the\n"
          "  background threads included) under stepscope minus bare. Both move by more than 10 µs from one run\n"
          "  to the next on a loaded machine: the per-hook table below is the resolved figure.")


def target_verdict(interval: tuple[float, float], aa: tuple[float, float], target: float,
                   processes: int = 6) -> str:
    """The verdict on a cost's interval against ``target`` (µs), given the method's A/A interval: met only when
    the whole interval is at or under the target, not met when all of it is above, else inconclusive; nothing is
    judged with fewer than 6 processes (their range is no 95% interval) or when the A/A interval misses 0 (the
    method itself is biased on that run)."""
    if processes < 6:
        return f"not judged: {processes} processes (6 or more give a 95% interval)"
    if not aa[0] <= 0.0 <= aa[1]:
        return (f"not judged: the A/A check gave {aa[0]:+.1f} to {aa[1]:+.1f} µs, not covering 0 (the method is "
                "biased on this run; rerun on a quieter machine)")
    if interval[1] <= target:
        return "met"
    if interval[0] > target:
        return "NOT MET"
    return "inconclusive: the interval spans the target (more --step-rounds, or a quieter machine)"


def print_realistic_step(rounds: int, processes: int) -> None:
    """The zero-code hooks' cost on a realistic step (benchmarks/step_overhead.py: a small CNN fed by a real
    DataLoader), bare, bare again (A/A) and hooked blocks interleaved in one session, pooled over processes, with
    the verdict on the target (CPU clock)."""
    sys.path.insert(0, str(HERE.parent))
    from benchmarks.hook_costs import sign_interval
    from benchmarks.step_overhead import CLOCKS, measure

    print(f"\nthe zero-code hooks on a realistic step (step_overhead.py: {processes} processes x {rounds} rounds, "
          "bare / bare again / hooked blocks interleaved)", flush=True)
    pooled = measure(rounds, 20, processes, ["bare", "bare-again", "hooks"], show=False)
    print(f"{'clock':<6}{'bare step':>11}{'hooks - bare':>14}{'interval':>20}{'A/A':>9}{'interval':>20}   target")
    for c in CLOCKS:
        med = pooled[c]
        bare = med["bare"]
        diff = [(h - b) / 1e3 for h, b in zip(med["hooks"], bare, strict=True)]
        aa = [(h - b) / 1e3 for h, b in zip(med["bare-again"], bare, strict=True)]
        r, a = sign_interval(diff)[:2], sign_interval(aa)[:2]
        print(f"{c:<6}{statistics.median(bare) / 1e3:>9.0f}µs{statistics.median(diff):>+12.1f}µs"
              f"{r[0]:>+10.1f} to {r[1]:>+6.1f}{statistics.median(aa):>+7.1f}µs{a[0]:>+10.1f} to {a[1]:>+6.1f}   "
              f"<= {STEP_TARGET_US:g} µs: " + target_verdict(r, a, STEP_TARGET_US))
    print("  µs per step, median over rounds of the paired difference of block medians, with its 95% sign-test\n"
          "  interval (benchmarks/RESULTS.md has the figures over time)")


def print_hooks_and_region() -> None:
    """The per-hook table of benchmarks/hook_costs.py (each hook's figure, targets beside)."""
    sys.path.insert(0, str(HERE.parent))
    from benchmarks.hook_costs import background_us, hook_costs, print_hook_table

    print("\nper-hook costs (benchmarks/hook_costs.py: thread CPU time, minima of repeats)")
    background, rate = background_us()
    print_hook_table(hook_costs(), background, rate)


def print_startup() -> None:
    st = startup_cost()
    wall = st["boot_wall_s"] - st["bare_wall_s"]
    cpu = st["boot_cpu_s"] - st["bare_cpu_s"]
    print(f"\nstart-up of `python -c 'import torch'` (minima over 7 alternating pairs): bare {st['bare_wall_s']:.2f} s "
          f"wall / {st['bare_cpu_s']:.2f} s CPU, under stepscope's boot {st['boot_wall_s']:.2f} s / "
          f"{st['boot_cpu_s']:.2f} s\n  -> +{wall:.3f} s wall, +{cpu:.3f} s CPU (target <= {STARTUP_TARGET_S:g} s: "
          f"{'met' if max(wall, cpu) <= STARTUP_TARGET_S else 'NOT MET'}); stepscope's own modules import in "
          f"{st['own_import_s']:.3f} s")


def print_keras_pairs(keras: dict[str, list[float]], steps: int, rounds: int) -> None:
    """The Keras rounds: each mode's median step time, its ratio over the same round's bare run (median over
    rounds, sign-test interval), the A/A ratio beside as the floor, and the target."""
    from hook_costs import sign_interval

    bare = keras["keras-bare"]
    print(f"\nKeras fit (TensorFlow, {steps} steps, one thread), {rounds} rounds of bare, bare again and stepscope "
          f"in rotating order; ratio: over the same round's bare run, median over rounds [sign-test interval]")
    for m, label in (("keras-bare-again", "bare again (A/A floor)"), ("keras-stepscope", "stepscope")):
        ratios = [x / b for x, b in zip(keras[m], bare, strict=True)]
        low, high, cover = sign_interval(ratios)
        print(f"  {label:<24} {statistics.median(keras[m]) / 1e6:.3f} ms per step (bare "
              f"{statistics.median(bare) / 1e6:.3f} ms): ratio {statistics.median(ratios):.4f} [{low:.4f}, "
              f"{high:.4f}] ({cover * 100:.0f}%)")
    print("  target: stepscope < 1.01; an interval that spans the A/A one does not resolve it")


WITHIN_ROUNDS = 1000
"""Rounds of benchmarks/keras_within.py that overhead.py runs by default (one untimed and one timed ~10 ms step
per arm each: about 7 minutes here on a quiet machine)."""


def print_keras_within(rounds: int, hidden: int) -> None:
    """The Keras arms paired within one process and one compiled train function (benchmarks/keras_within.py),
    run as ``keras_overhead.py --within`` in a process of its own; its report as it prints it."""
    print(f"\nKeras fit's step, the arms paired within one process (keras_overhead.py --within --rounds {rounds})",
          flush=True)
    out = subprocess.run([sys.executable, str(HERE / "keras_overhead.py"), "--within", "--rounds", str(rounds),
                          "--hidden", str(hidden), "--cost-runs", "0"], capture_output=True, text=True, check=True)
    print("\n".join(ln for ln in out.stdout.splitlines() if not ln.startswith("round ")))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--hidden", type=int, default=1024, help="hidden size: 1024 gives ~10 ms steps on one thread")
    p.add_argument("--keras-steps", type=int, default=150, help="steps of the Keras fit (TensorFlow pairs)")
    p.add_argument("--only-keras", action="store_true", help="only the Keras / TensorFlow pairs")
    p.add_argument("--no-keras", action="store_true", help="leave out the Keras / TensorFlow pairs")
    p.add_argument("--within-rounds", type=int, default=WITHIN_ROUNDS,
                   help="rounds of the Keras arms paired within one process (keras_overhead.py --within; 0: none)")
    p.add_argument("--no-tools", action="store_true", help="leave out the 10 ms loop under the four tools")
    p.add_argument("--no-scripts", action="store_true", help="leave out the issue-20 scripts' pairs")
    p.add_argument("--step-rounds", type=int, default=60,
                   help="rounds a process of the realistic step's bare / A/A / hooked blocks (0: leave it out)")
    p.add_argument("--step-processes", type=int, default=3, help="processes of the realistic step's rounds")
    args = p.parse_args()
    if args.step_rounds < 0 or 0 < args.step_rounds < 6 or args.step_processes < 1:
        p.error(f"--step-rounds is 0 (left out) or at least 6, and --step-processes 1 or more; got "
                f"{args.step_rounds} and {args.step_processes}")
    import os

    print(f"load average at start: {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)", file=sys.stderr)
    keras_modes = list(KERAS_MODES) if have_tensorflow() and not args.no_keras else []
    modes = [] if args.only_keras or args.no_tools else (
        ["bare", "stepscope", "torch-profiler"] + (["lightning-simple"] if have_lightning() else []))
    results: dict[str, list[float]] = {m: [] for m in modes}
    keras: dict[str, list[float]] = {m: [] for m in keras_modes}
    scripts: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds if modes or keras_modes else 0):
            for m in modes:
                results[m].append(run_mode(m, args.steps, args.hidden, tmp))
            for m in keras_modes[r % 3:] + keras_modes[:r % 3]:  # back to back, each first in turn
                keras[m].append(run_mode(m, args.keras_steps, args.hidden, tmp))
            print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
        if not args.only_keras and not args.no_scripts:
            scripts = script_pairs(args.rounds, tmp)
    print(f"load average: {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)")
    if keras_modes:
        print_keras_pairs(keras, args.keras_steps, args.rounds)
        with tempfile.TemporaryDirectory() as tmp:
            run_mode("keras-hook-cost", args.keras_steps, args.hidden, tmp)
        from _keras_loop import describe_hook_cost

        cost, step_ns = KERAS_HOOK_COSTS[-1]
        print("one more run under `stepscope run`: " + describe_hook_cost(cost, step_ns))
        if args.within_rounds > 0:
            print_keras_within(args.within_rounds, args.hidden)
    if args.only_keras:
        return
    if modes:
        print(f"\nmedian step time over {args.rounds} interleaved rounds ({args.steps} steps each, warm-up excluded);"
              "\nratios are paired: each round's mode over the same round's bare loop, median and range over rounds")
        print(f"{'mode':<20}{'step':>12}{'vs bare':>10}{'range':>20}")
        for m in modes:
            med = statistics.median(results[m])
            ratios = [x / b for x, b in zip(results[m], results["bare"], strict=True)]
            print(f"{m:<20}{med / 1e6:>10.3f} ms{statistics.median(ratios):>10.4f}"
                  f"{min(ratios):>10.4f}-{max(ratios):.4f}")
    if scripts:
        print_script_pairs(scripts)
    if args.step_rounds > 0:
        print_realistic_step(args.step_rounds, args.step_processes)
    print_hooks_and_region()
    print_startup()
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
