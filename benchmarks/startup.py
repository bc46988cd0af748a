"""What `stepscope run` adds to the start of a job: the whole command, and each Python process it starts.

Interleaved pairs, each pair's order drawn at random (seeded), so that the machine's drift cancels:

- ``whole pass`` / ``whole torch``: ``stepscope run -- python -c pass`` (and ``-c "import torch"``) against the
  bare command: the launcher, the run record, the index and the summary printed at the end;
- ``process pass`` / ``process torch``: the same child started with the environment `stepscope run` gives its
  processes (the injected sitecustomize, no launcher) against the bare child: what every Python process of an
  observed job pays at its start (``torch``: the hooks installed once torch is imported);
- ``A/A``: the bare ``python -c pass`` against itself: how large a difference this machine makes of nothing.

Each line prints, for the wall time and for the CPU time of all the command's processes, the medians, the median
of the paired differences (observed minus bare) with its 95% distribution-free interval, and the ratio of the
medians with a bootstrap 95% interval. Targets: at most
+0.40 s for the whole ``python -c pass`` and at most +0.15 s per process, on a quiet machine.

Compiled bytecode is written to a temporary folder for both arms (``PYTHONPYCACHEPREFIX``), as an installed
package has it; a set ``PYTHONDONTWRITEBYTECODE`` would make every process compile stepscope from source.

    python benchmarks/startup.py [--pairs 20] [--only whole,process,aa] [--no-torch]
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from stepscope.analyze.stats import bootstrap_median_ratio_ci, median_ci

TARGET_WHOLE_S = 0.40
TARGET_PROCESS_S = 0.15


def timed(cmd: Sequence[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds, and CPU seconds (user + system) of the command and every process it waited for."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    rc = subprocess.run(list(cmd), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    took = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if rc != 0:
        raise SystemExit(f"startup.py: {' '.join(cmd)!r} exited {rc}")
    return took, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def stepscope_cmd() -> list[str]:
    """The `stepscope` console script of this interpreter (as a user runs it), else ``python -m stepscope``."""
    script = Path(sys.executable).with_name("stepscope")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "stepscope"]


def observed_child_env(base: dict[str, str], work: Path) -> dict[str, str]:
    """The environment `stepscope run` gives the processes it starts, for a run directory of its own."""
    from stepscope.collect.core.options import Options
    from stepscope.collect.startup.launch import child_env

    run_dir = work / "child-run"
    run_dir.mkdir(exist_ok=True)
    return child_env("startupbench", run_dir, Options(), base=base)


def summarise(label: str, bare: list[float], obs: list[float]) -> str:
    b, o = np.asarray(bare), np.asarray(obs)
    diff = o - b
    lo, hi = median_ci(diff)
    rlo, rhi = bootstrap_median_ratio_ci(b, o)
    return (f"  {label:<6} {np.median(b):7.3f} s {np.median(o):7.3f} s  {np.median(diff):+7.3f} s "
            f"({lo:+.3f} to {hi:+.3f})  x{np.median(o) / np.median(b):5.2f} ({rlo:.2f} to {rhi:.2f})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=20, help="pairs per line (default 20)")
    ap.add_argument("--only", default="aa,process,whole", help="which lines: aa, process, whole (default all)")
    ap.add_argument("--no-torch", action="store_true", help="leave out the `import torch` lines")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.pairs < 3:
        ap.error("--pairs must be at least 3")
    only = {s.strip() for s in args.only.split(",")}
    work = Path(tempfile.mkdtemp(prefix="stepscope-startup-"))
    try:
        base = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "STEPSCOPE_RUN_DIR")}
        base["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
        base["STEPSCOPE_HOME"] = str(work / "store")
        child = observed_child_env(base, work)
        py = sys.executable
        codes = ["pass"] + ([] if args.no_torch else ["import torch"])
        # (label, bare command, observed command, observed environment)
        lines: list[tuple[str, list[str], list[str], dict[str, str]]] = []
        if "aa" in only:
            lines.append(("A/A  python -c pass", [py, "-c", "pass"], [py, "-c", "pass"], base))
        for code in codes:
            if "process" in only:
                lines.append((f"process  python -c {code!r}", [py, "-c", code], [py, "-c", code], child))
            if "whole" in only:
                lines.append((f"whole  stepscope run -- python -c {code!r}", [py, "-c", code],
                              [*stepscope_cmd(), "run", "--", py, "-c", code], base))
        for _, bare_cmd, obs_cmd, env in lines:  # warm-up: bytecode written, caches filled
            timed(bare_cmd, base)
            timed(obs_cmd, env)
        rng = random.Random(args.seed)
        # per line: bare wall, observed wall, bare CPU, observed CPU
        results: dict[str, tuple[list[float], ...]] = {label: ([], [], [], []) for label, *_ in lines}
        for _ in range(args.pairs):  # round by round, so every line sees the same drift
            for label, bare_cmd, obs_cmd, env in lines:
                first_bare = rng.random() < 0.5
                if first_bare:
                    b = timed(bare_cmd, base)
                    o = timed(obs_cmd, env)
                else:
                    o = timed(obs_cmd, env)
                    b = timed(bare_cmd, base)
                for i, v in enumerate((b[0], o[0], b[1], o[1])):
                    results[label][i].append(v)
        print(f"start-up under stepscope run: {args.pairs} interleaved pairs a line, {os.cpu_count()} CPUs, "
              f"load average {os.getloadavg()[0]:.2f}")
        print(f"  {'':<6} {'bare':>9} {'observed':>9}  {'added (95% interval)':<28}  ratio (95% interval)")
        for label, (bare, obs, bare_cpu, obs_cpu) in results.items():
            print(label)
            print(summarise("wall", bare, obs))
            print(summarise("CPU", bare_cpu, obs_cpu))
        print("CPU: user + system seconds of every process of the command; on a loaded machine the wall time is\n"
              "mostly the wait for a core, and the CPU time is what a quiet machine would show")
        print(f"targets on a quiet machine: whole `python -c 'pass'` at most +{TARGET_WHOLE_S:.2f} s, "
              f"each process at most +{TARGET_PROCESS_S:.2f} s")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
