"""Does `stepscope advise --verify` confirm a change that does nothing? Real runs, on this machine as it is.

Study "aa": one recorded run of a step script, then --trials times `advise RUN --verify --change
env:NCCL_DEBUG=WARN --repeat R` (at most R sequential pairs; B sets an environment variable nothing in the
script reads: an A/A pair series through the whole verify path: re-run in the recorded directory, the change
applied, bench --ab's order and paired test). A trial must never say "confirmed" or "worse"; the issue's bar
is "not confirmed" in at least 19 of 20, and "cannot tell" is counted apart (the pairs' MDE exceeded the 2%
threshold: honest, but no answer).

Study "showcase": the slow-DataLoader script (tests/scripts/verify_loader.py, num_workers=0) and its own
num_workers suggestion, --trials times: how often it is confirmed (the power at R pairs).

Scripts: "plain" (default) is a stepscope.step() loop whose steps sleep --sleep seconds (no framework: the
trial costs about a second a run); "torch" is the showcase script itself with num_workers=0 (A/A: a torch run).

    python benchmarks/advice_verify_aa.py [--trials 20] [--repeat 10] [--script plain|torch]
                                          [--studies aa,showcase] [--out FILE]

Prints one JSON document (stdout) and one k-of-n line per study (stderr).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SHOWCASE = HERE.parent / "tests" / "scripts" / "verify_loader.py"
PLAIN = ("import sys, time\nimport stepscope\nsteps, sleep = int(sys.argv[1]), float(sys.argv[2])\n"
         "for _ in range(steps):\n    time.sleep(sleep)\n    stepscope.step()\n")


def sl(*args: str, store: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("STEPSCOPE_HOME", "STEPSCOPE_DB", "NCCL_DEBUG")}
    return subprocess.run([sys.executable, "-m", "stepscope", args[0], "--store", str(store), *args[1:]],
                          capture_output=True, text=True, env=env, timeout=1200, cwd=cwd)


def record(store: Path, cwd: Path, command: list[str]) -> str:
    r = sl("run", "--quiet", "--sample-interval", "0.5", "--", *command, store=store, cwd=cwd)
    if r.returncode != 0:
        raise SystemExit(f"the base run failed: {r.stderr[-2000:]}")
    runs = json.loads(sl("ls", "--json", store=store, cwd=cwd).stdout)
    return str(runs[0]["id"] if isinstance(runs, list) else runs["runs"][0]["id"])


def trial(store: Path, cwd: Path, run_id: str, repeat: int, extra: list[str]) -> dict[str, Any]:
    t0 = time.time()
    r = sl("advise", run_id, "--verify", "--repeat", str(repeat), "--json", "--quiet-runs", *extra, store=store,
           cwd=cwd)
    if r.returncode != 0:
        return {"error": r.stderr.strip()[-500:], "wall_s": time.time() - t0}
    (o,) = json.loads(r.stdout)["outcomes"][:1]
    return {"verdict": o["verdict"], "pairs": o["pairs"], "ratio": o["ratio"], "ci": [o["ci_low"], o["ci_high"]],
            "mde": o["mde"], "note": o["note"],
            "predicted_s": o["suggestion"]["predicted_s_per_step"], "saving_s": o["saving_s_per_step"],
            "saving_ci_s": [o["saving_low_s"], o["saving_high_s"]], "wall_s": round(time.time() - t0, 1),
            "load": os.getloadavg()[0]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--trials", type=int, default=20)
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--script", choices=("plain", "torch"), default="plain")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--sleep", type=float, default=0.02)
    p.add_argument("--studies", default="aa")
    p.add_argument("--out")
    args = p.parse_args()
    out: dict[str, Any] = {"trials": args.trials, "repeat": args.repeat, "script": args.script, "studies": {}}
    with tempfile.TemporaryDirectory(prefix="stepscope-verify-aa-") as tmp:
        work = Path(tmp)
        store = work / "store"
        for study in args.studies.split(","):
            if study == "aa":
                if args.script == "plain":
                    (work / "steps.py").write_text(PLAIN)
                    command = [sys.executable, "steps.py", str(args.steps), str(args.sleep)]
                else:
                    command = [sys.executable, str(SHOWCASE), "--steps", str(args.steps), "--sleep",
                               str(args.sleep)]
                extra = ["--change", "env:NCCL_DEBUG=WARN"]
                good = "not confirmed"
            elif study == "showcase":
                command = [sys.executable, str(SHOWCASE), "--steps", "14", "--sleep", "0.01", "--batch-size", "8"]
                extra = ["--rule", "input-bound"]
                good = "confirmed"
            else:
                raise SystemExit(f"unknown study {study!r}: aa or showcase")
            run_id = record(store, work, command)
            results = []
            for i in range(args.trials):
                results.append(trial(store, work, run_id, args.repeat, extra))
                print(f"{study} {i + 1}/{args.trials}: {results[-1]}", file=sys.stderr, flush=True)
            counts = Counter(r.get("verdict", "error") for r in results)
            out["studies"][study] = {"command": command, "change": extra, "results": results,
                                     "counts": dict(counts)}
            print(f"{study}: {counts.get(good, 0)} of {len(results)} {good}; " +
                  ", ".join(f"{k} {v}" for k, v in sorted(counts.items()) if k != good), file=sys.stderr)
    text = json.dumps(out, indent=1)
    if args.out:
        Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
