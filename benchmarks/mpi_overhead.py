"""What stepscope's mpi4py timing costs a latency-bound and a bandwidth-bound MPI program (docs/frameworks.md,
MPI section; history in benchmarks/RESULTS.md).

Three figures, from tests/scripts/mpi_pingpong.py:

1. **Ping-pong**, 2 ranks under ``mpirun -n 2``: --round-trips 1-byte ``Send``/``Recv`` round trips.
2. **Allreduce**, the same jobs: --allreduces ``Allreduce`` calls of 1 MB (float64).
   Each round runs three jobs in a random (seeded) order: bare (``mpirun ... python prog``), observed
   (``stepscope run -- mpirun ... python prog``) and bare again (the A/A pair). A job reports its own loop
   times (the jobs' start-up is not in them; the observed job's records are opened before its loops), so
   a round gives one ratio observed/bare and one A/A ratio bare-again/bare per figure. The ping-pong is
   timed in blocks of 200 round trips and the allreduce per call: on a loaded 2-core host a rank that is
   descheduled while the other spins in MPI stalls a block for milliseconds, in either arm, so the median
   block (median call) is the figure to compare; the totals are printed too. Printed: the median ratio
   over the rounds and its 95% bootstrap interval; the A/A line shows how far two bare jobs differ on this
   machine at the same time.
3. **Per call**, one process under ``stepscope run`` (no mpirun): a 1-byte ``Send`` to itself and its
   ``Recv`` (two calls, nothing overlapping them), in blocks alternating the timed methods and mpi4py's own
   on the same communicator (order alternating per pair); per pair (timed - bare) / 2 is the cost of one
   call, sampled rows included. Printed: the median and its 95% bootstrap interval.

OpenMPI as root needs ``--allow-run-as-root`` (set through its environment variables here). Run:

    .venv/bin/python benchmarks/mpi_overhead.py                 # 10 rounds, about 2 minutes on 2 cores
    .venv/bin/python benchmarks/mpi_overhead.py --rounds 20 --round-trips 20000 --allreduces 200
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = ROOT / "tests" / "scripts" / "mpi_pingpong.py"


def _env() -> dict[str, str]:
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    env.pop("STEPSCOPE_DB", None)
    return env


def run_job(observed: bool, store: Path, prog_args: list[str], ranks: int = 2) -> dict[str, Any]:
    """One job; its rank 0's JSON line."""
    cmd = [sys.executable, str(PROGRAM), *prog_args]
    if ranks:
        cmd = ["mpirun", "--oversubscribe", "-n", str(ranks), *cmd]
    if observed:
        cmd = [sys.executable, "-m", "stepscope", "run", "--store", str(store), "--quiet", "--sample-interval", "0",
               "--", *cmd]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=_env())
    if proc.returncode != 0:
        raise SystemExit(f"mpi_overhead: {' '.join(cmd[:8])} ... failed: {proc.stderr.strip()[-500:]}")
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def median_ci(xs: list[float], seed: int = 0, n: int = 4000) -> tuple[float, float, float]:
    """Median and its 95% percentile-bootstrap interval."""
    rng = random.Random(seed)
    meds = sorted(statistics.median(rng.choices(xs, k=len(xs))) for _ in range(n))
    return statistics.median(xs), meds[int(0.025 * n)], meds[int(0.975 * n) - 1]


def fmt(name: str, xs: list[float], unit: str = "x") -> str:
    m, lo, hi = median_ci(xs)
    return f"  {name:<42} {m:8.3f}{unit}  (95% {lo:.3f} to {hi:.3f}; {len(xs)} values)"


PP_BLOCK = 200
"""Round trips per timed block of the ping-pong jobs."""
PHASES = ("pingpong_s", "pingpong_median_us", "allreduce_s", "allreduce_median_us")


def jobs(rounds: int, prog_args: list[str], seed: int) -> dict[str, dict[str, list[float]]]:
    """Per figure of the program (PHASES): ratios observed/bare and A/A bare-again/bare, one per round, and
    the bare and observed values."""
    rng = random.Random(seed)
    res: dict[str, dict[str, list[float]]] = {p: {"observed": [], "aa": [], "bare": [], "observed_v": []}
                                              for p in PHASES}
    with tempfile.TemporaryDirectory(prefix="stepscope-mpi-") as tmp:
        for r in range(rounds):
            arms = ["bare", "observed", "bare2"]
            rng.shuffle(arms)
            got = {arm: run_job(arm == "observed", Path(tmp) / f"store{r}", prog_args) for arm in arms}
            shutil.rmtree(Path(tmp) / f"store{r}", ignore_errors=True)
            for phase, d in res.items():
                bare = got["bare"][phase]
                d["observed"].append(got["observed"][phase] / bare)
                d["aa"].append(got["bare2"][phase] / bare)
                d["bare"].append(bare)
                d["observed_v"].append(got["observed"][phase])
            print(f"  round {r + 1}/{rounds}: " + ", ".join(
                f"{p} {got['bare'][p]:.4g} / {got['observed'][p]:.4g} / {got['bare2'][p]:.4g}" for p in PHASES)
                + "  (bare / observed / bare again)", flush=True)
    return res


def per_call(pairs: int, block: int) -> tuple[list[float], float]:
    """Per pair, the µs one timed call adds (one process, Send to itself and Recv); and the difference of the
    two arms' fastest blocks per call (on a shared host a block runs in one of a few speed modes, switching
    every few ms for both arms alike: the fastest blocks compare the arms in the same, quietest mode)."""
    with tempfile.TemporaryDirectory(prefix="stepscope-mpi-") as tmp:
        got = run_job(True, Path(tmp) / "store", ["--pairs", str(pairs), "--block", str(block)], ranks=0)
    timed, bare = got["pairs_timed_us"], got["pairs_bare_us"]
    fastest = (statistics.quantiles(timed, n=10)[0] - statistics.quantiles(bare, n=10)[0]) / 2
    return [(t - b) / 2 for t, b in zip(timed, bare, strict=True)], fastest


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--round-trips", type=int, default=20000)
    p.add_argument("--allreduces", type=int, default=200)
    p.add_argument("--allreduce-bytes", type=int, default=1 << 20)
    p.add_argument("--pairs", type=int, default=60, help="per-call figure: alternated block pairs")
    p.add_argument("--block", type=int, default=2000, help="per-call figure: round trips per block")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    if a.rounds < 2 or a.round_trips < 1 or a.allreduces < 1 or a.pairs < 2 or a.block < 1:
        raise SystemExit("mpi_overhead: --rounds and --pairs must be at least 2, the loop counts at least 1")
    if shutil.which("mpirun") is None:
        raise SystemExit("mpi_overhead: mpirun is not installed (Debian: openmpi-bin)")
    print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores")
    prog = ["--round-trips", str(a.round_trips), "--allreduces", str(a.allreduces),
            "--allreduce-bytes", str(a.allreduce_bytes), "--block", str(PP_BLOCK)]
    res = jobs(a.rounds, prog, a.seed)
    calls, fastest = per_call(a.pairs, a.block)
    print(f"mpirun -n 2, {a.rounds} rounds (load average now {os.getloadavg()[0]:.2f}); ratios observed / bare:")
    for phase, label, target in (
            ("pingpong_median_us", f"ping-pong, median block of {PP_BLOCK}", "   target <= 1.5x"),
            ("pingpong_s", f"ping-pong, all {a.round_trips} round trips", ""),
            ("allreduce_median_us", f"allreduce {a.allreduce_bytes} B, median call", "   target <= 1.02x"),
            ("allreduce_s", f"allreduce, all {a.allreduces} calls", "")):
        d = res[phase]
        print(fmt(label, d["observed"]) + target)
        print(fmt("  A/A (bare again / bare)", d["aa"]))
    pp = res["pingpong_median_us"]
    print(fmt("ping-pong bare round trip (median block)", pp["bare"], " us"))
    print(fmt("ping-pong added per round trip", [o - b for o, b in zip(pp["observed_v"], pp["bare"], strict=True)],
              " us"))
    print(fmt("allreduce bare call (median)", res["allreduce_median_us"]["bare"], " us"))
    print(f"one process, {a.pairs} alternated pairs of {a.block} Send-to-self + Recv:")
    print(fmt("added per call", calls, " us") + "   target <= 0.5 us")
    print(f"  {'added per call, fastest tenth':<42} {fastest:8.3f} us  (10th percentile timed - bare, / 2)")


if __name__ == "__main__":
    main()
