"""Do stepscope's verdicts cry wolf? Real runs of a 10-20 ms step script (benchmarks/_verdict_step.py), on this
machine as it is, and with a CPU hog pinned to one core:

1. A/A pairs of single runs (`stepscope run` twice, `stepscope diff`): must never be "faster" or "slower";
2. A/A with repeats, interleaved (`stepscope bench --ab --repeat 3` with the same command on both sides):
   at most 1 verdict in 20;
3. a controlled 10% slowdown, `bench --ab --repeat 3`: "slower" in at least 19 of 20;
4. a controlled 5% slowdown, `bench --ab --repeat 5`: reported with the power it had (share called slower,
   and the median minimum detectable effect the runs stated).

Every comparison also checks that the headline verdict is the step-time row's verdict (they can never
disagree). Prints one JSON document; figures go to docs/diff.md and docs/ci.md.

    python benchmarks/verdicts.py [--pairs 20] [--hog off,on] [--studies aa1,aa3,ab10,ab5] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
STEP = HERE / "_verdict_step.py"
HOG = "import time\nend = time.time() + 1e9\nwhile time.time() < end:\n    pass\n"


def sl(*args: str, store: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("STEPSCOPE_HOME", "STEPSCOPE_DB")}
    return subprocess.run([sys.executable, "-m", "stepscope", args[0], "--store", str(store), *args[1:]],
                          capture_output=True, text=True, env=env, timeout=600)


def step_cmd(slow_pct: float, steps: int) -> list[str]:
    return [sys.executable, str(STEP), "--steps", str(steps), "--slow-pct", str(slow_pct)]


def verdict_of(doc: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    row = next(r for r in doc["overview"] if r["key"] == "step_time_median_ns")
    ch = row["change"]
    if doc["verdict"] != ch["verdict"]:  # the headline is the step-time row's verdict, by construction
        raise AssertionError(f"headline {doc['verdict']} vs row {ch['verdict']}")
    for f in doc["findings"]:
        if f["kind"] == "step_time" and f["verdict"] != ch["verdict"]:
            raise AssertionError(f"finding {f['verdict']} vs row {ch['verdict']}")
    return ch["verdict"], ch


def single_pair(store: Path, steps: int) -> dict[str, Any]:
    ids = []
    for _ in range(2):
        p = sl("run", "--quiet", "--sample-interval", "0.2", "--", *step_cmd(0, steps), store=store)
        if p.returncode != 0:
            raise RuntimeError(p.stderr[-1000:])
        ids.append(latest_id(store))
    p = sl("diff", ids[0], ids[1], "--json", store=store)
    doc = json.loads(p.stdout)
    v, ch = verdict_of(doc)
    return {"verdict": v, "ratio": ch["ratio"], "floor": doc["noise_floor"]["source"] if doc["noise_floor"] else None,
            "noisy_runs": sum(q["noisy"] for q in doc["quality"])}


def latest_id(store: Path) -> str:
    return max((store / "runs").iterdir(), key=lambda d: d.stat().st_mtime_ns).name


def ab(store: Path, steps: int, repeat: int, slow_pct: float) -> dict[str, Any]:
    p = sl("bench", "--ab", "--repeat", str(repeat), "--sample-interval", "0.2", "--json", "--",
           *step_cmd(0, steps), "--", *step_cmd(slow_pct, steps), store=store)
    if p.returncode != 0:
        raise RuntimeError(p.stderr[-1000:])
    doc = json.loads(p.stdout)["diff"]
    v, ch = verdict_of(doc)
    return {"verdict": v, "ratio": ch["ratio"], "ci": [ch["ci_low"], ch["ci_high"]], "mde": ch["mde"],
            "noisy_runs": sum(q["noisy"] for q in doc["quality"])}


STUDIES = {
    "aa1": ("A/A, one run a side", lambda s, n: single_pair(s, n)),
    "aa3": ("A/A, bench --ab --repeat 3", lambda s, n: ab(s, n, 3, 0.0)),
    "ab10": ("+10%, bench --ab --repeat 3", lambda s, n: ab(s, n, 3, 10.0)),
    "ab5": ("+5%, bench --ab --repeat 5", lambda s, n: ab(s, n, 5, 5.0)),
}


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    counts = Counter(r["verdict"] for r in results)
    mdes = [r["mde"] for r in results if r.get("mde") is not None]
    return {"n": len(results), "verdicts": dict(counts), "median_ratio": statistics.median(r["ratio"] for r in results),
            "median_mde": statistics.median(mdes) if mdes else None,
            "noisy_runs": sum(r["noisy_runs"] for r in results)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pairs", type=int, default=20, help="comparisons per study (default: 20)")
    p.add_argument("--steps", type=int, default=60, help="steps per run (default: 60)")
    p.add_argument("--hog", default="off,on", help="without / with a CPU hog on core 0 (default: off,on)")
    p.add_argument("--studies", default=",".join(STUDIES), help=f"which studies (default: {','.join(STUDIES)})")
    p.add_argument("--out", help="also write the JSON here")
    a = p.parse_args()
    report: dict[str, Any] = {"cpus": os.cpu_count(), "pairs": a.pairs, "steps": a.steps, "load_before":
                              os.getloadavg()[0], "results": {}}
    for hog in a.hog.split(","):
        proc = None
        if hog == "on":
            proc = subprocess.Popen([sys.executable, "-c", HOG])
            try:
                os.sched_setaffinity(proc.pid, {0})
            except (AttributeError, OSError):
                pass
        try:
            for key in a.studies.split(","):
                title, fn = STUDIES[key]
                with tempfile.TemporaryDirectory() as tmp:
                    store = Path(tmp) / "store"
                    t0 = time.time()
                    res = [fn(store, a.steps) for _ in range(a.pairs)]
                s = {"title": title, **summarize(res), "seconds": round(time.time() - t0, 1),
                     "load": os.getloadavg()[0]}
                report["results"][f"{key}/hog-{hog}"] = s
                print(json.dumps({f"{key}/hog-{hog}": s}), file=sys.stderr, flush=True)
        finally:
            if proc is not None:
                proc.kill()
                proc.wait()
    text = json.dumps(report, indent=2)
    print(text)
    if a.out:
        Path(a.out).write_text(text)


if __name__ == "__main__":
    main()
