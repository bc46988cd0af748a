"""Do stepscope's verdicts cry wolf? Real runs of a 10-20 ms step script (benchmarks/_verdict_step.py), on this
machine as it is, and with a CPU hog pinned to one core:

1. A/A pairs of single runs (`stepscope run` twice, `stepscope diff`): must never be "faster" or "slower";
   reports each pair's ratio, the change the (load-widened) floor required, both runs' run-queue latency and
   wait share, the contention shift, the load average, and how many floors were widened because the runs'
   CPU contention differed;
2. A/A with repeats, interleaved (`stepscope bench --ab --repeat 3` with the same command on both sides):
   none (bench decides at 99%: at most 1 A/A study in 100 by simulation, benchmarks/ab_coverage.py);
3. a controlled 10% slowdown, `bench --ab --repeat 3`: "slower" in at least 19 of 20;
4. a controlled 5% slowdown, `bench --ab --repeat 5`: reported with the power it had (share called slower,
   and the median minimum detectable effect the runs stated);
5. `check` (study "check", one trial per --pairs): a 10-commit throwaway git repository of identical speed, 3
   repeats a commit, `stepscope check` at every commit (must never exit 1; 2, "cannot tell", is allowed); and a
   7-commit repository with a 20% step at commit 6, 3 repeats a commit, `check` (5% tolerated) at commit 6 (must
   exit 1 naming it, or 2: never 0, a pass).
6. A/A single pairs against an empty store (study "aa1e": a fresh store per pair, so the floor comes from the
   runs' own dispersion and load) and a +20% change with `bench --ab --repeat 3` (study "ab20": found or
   "cannot tell", never "no significant change").
7. The second clock (studies "cpu10" and "aacpu"): B does 10% more of the step's Python work (about 3% more wall
   time on a quiet host, as the step's wait stays), `bench --ab --repeat 5 --metric step_cpu_time` (bench's
   defaults: 2%, 99%); the verdict on the training thread's CPU time and, from the same pairs, on step time, and
   each pair's ratio on both clocks. Under two hogs the CPU clock must find the 10% in at least 9 of 10, and the A/A
   ("aacpu") must give no faster/slower on either clock.

Each study prints k-of-n counts (stderr, one line a study): false verdicts of A/A studies (faster or slower; for
check, exit 1), misses of step studies (no significant change; for check, exit 0), and cannot-tell answers.

Every comparison also checks that the headline verdict is the step-time row's verdict (they can never
disagree). Prints one JSON document; figures go to docs/diff.md and docs/ci.md.

    python benchmarks/verdicts.py [--pairs 20] [--hog off,on,two] [--studies aa1,aa1e,aa3,ab10,ab20] [--out FILE]
    python benchmarks/verdicts.py --pairs 10 --hog two --studies cpu10,aacpu
"""

from __future__ import annotations

import argparse
import json
import math
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


def step_cmd(slow_pct: float, steps: int, cpu_pct: float = 0.0) -> list[str]:
    return [sys.executable, str(STEP), "--steps", str(steps), "--slow-pct", str(slow_pct),
            "--cpu-slow-pct", str(cpu_pct)]


ROW_OF = {"step_time": "step_time_median_ns", "step_cpu_time": "step_cpu_time_median_ns"}


def verdict_of(doc: dict[str, Any], metric: str = "step_time") -> tuple[str, dict[str, Any]]:
    row = next(r for r in doc["overview"] if r["key"] == ROW_OF[metric])
    ch = row["change"]
    if doc.get("metric", "step_time") == metric and doc["verdict"] != ch["verdict"]:
        # the headline is the verdict of the chosen metric's row, by construction
        raise AssertionError(f"headline {doc['verdict']} vs row {ch['verdict']}")
    for f in doc["findings"]:
        if f["kind"] == metric and f["verdict"] != ch["verdict"]:
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
    load = doc.get("load") or {}
    sides = [load.get(side) or {} for side in ("baseline", "experiment")]
    return {"verdict": v, "ratio": ch["ratio"], "floor": doc["noise_floor"]["source"] if doc["noise_floor"] else None,
            "noisy_runs": sum(q["noisy"] for q in doc["quality"]), "need": ch["mde"],
            "waits": [None if c.get("wait_share") is None else round(c["wait_share"], 3) for c in sides],
            "latency_ms": [None if c.get("latency_ms") is None else round(c["latency_ms"], 3) for c in sides],
            "shift": None if load.get("shift_log") is None else round(load["shift_log"], 3),
            "load_avg": round(os.getloadavg()[0], 2)}


def latest_id(store: Path) -> str:
    return max((store / "runs").iterdir(), key=lambda d: d.stat().st_mtime_ns).name


def pair_ratios(store: Path, runs: dict[str, list[str]]) -> dict[str, list[float | None]]:
    """Each pair's B / A ratio of median step time and of the training thread's median CPU time per step (in pair
    order; A ran first in pairs 1, 3, 5, ...), read from the study's store: what one outlying pair looks like."""
    from stepscope.analyze.diff.runlevel import run_values
    from stepscope.store import open_store

    st = open_store(str(store), None)
    vals = {side: [run_values(st.load(r)) for r in ids] for side, ids in runs.items()}
    out: dict[str, list[float | None]] = {}
    for key, attr in (("step_time", "step_ns"), ("step_cpu_time", "thread_cpu_ns")):
        out[key] = [None if getattr(a, attr) is None or getattr(b, attr) is None else
                    round(getattr(b, attr) / getattr(a, attr), 4) for a, b in zip(vals["A"], vals["B"], strict=True)]
    return out


def ab(store: Path, steps: int, repeat: int, slow_pct: float) -> dict[str, Any]:
    p = sl("bench", "--ab", "--repeat", str(repeat), "--sample-interval", "0.2", "--json", "--",
           *step_cmd(0, steps), "--", *step_cmd(slow_pct, steps), store=store)
    if p.returncode != 0:
        raise RuntimeError(p.stderr[-1000:])
    top = json.loads(p.stdout)
    doc = top["diff"]
    v, ch = verdict_of(doc)
    return {"verdict": v, "ratio": ch["ratio"], "ci": [ch["ci_low"], ch["ci_high"]], "mde": ch["mde"],
            "noisy_runs": sum(q["noisy"] for q in doc["quality"]), "pair_ratios": pair_ratios(store, top["runs"])}


def ab_cpu(store: Path, steps: int, repeat: int, cpu_pct: float, threshold: float = 2.0) -> dict[str, Any]:
    """`bench --ab --metric step_cpu_time` of B doing ``cpu_pct``% more Python work a step, at bench's defaults
    (2% threshold, 99% interval): the CPU verdict (the headline) and, from the same pairs, the wall-time verdict
    `bench --ab` gives without --metric; each pair's B / A ratio on both clocks."""
    p = sl("bench", "--ab", "--repeat", str(repeat), "--sample-interval", "0.2", "--metric", "step_cpu_time",
           "--threshold", f"{threshold:g}", "--json", "--", *step_cmd(0, steps), "--", *step_cmd(0, steps, cpu_pct),
           store=store)
    if p.returncode != 0:
        raise RuntimeError(p.stderr[-1000:])
    top = json.loads(p.stdout)
    doc = top["diff"]
    v, ch = verdict_of(doc, "step_cpu_time")
    wv, wch = verdict_of(doc, "step_time")
    return {"verdict": v, "ratio": ch["ratio"], "ci": [ch["ci_low"], ch["ci_high"]], "mde": ch["mde"],
            "wall_verdict": wv, "wall_ratio": wch["ratio"], "wall_mde": wch["mde"],
            "wall_ci": [wch["ci_low"], wch["ci_high"]], "pair_ratios": pair_ratios(store, top["runs"]),
            "drift_widen": (doc.get("drift") or {}).get("widen_log"),
            "noisy_runs": sum(q["noisy"] for q in doc["quality"]), "load_avg": round(os.getloadavg()[0], 2)}


REPO_SCRIPT = """import time
import stepscope

SLEEP_S = {sleep!r}
NOTE = {note!r}

for i in stepscope.steps(range(10)):
    with stepscope.region("work"):
        time.sleep(SLEEP_S)
"""


def git(repo: Path, *args: str, date: str | None = None) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@example.com", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@example.com"}
    if date:
        env.update(GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True, env=env).stdout.strip()


def check_series(root: Path, *, commits: int, slow_at: int, factor: float, repeat: int, bench_from: int,
                 check_from: int, threshold: str) -> list[tuple[int, int, int | str | None]]:
    """(commit index, exit code, first bad commit named) of `stepscope check` at each commit from ``check_from``."""
    repo, store = root / "repo", root / "store"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    shas = []
    for i in range(commits):
        (repo / "train.py").write_text(REPO_SCRIPT.format(sleep=0.015 * (factor if i >= slow_at else 1.0),
                                                          note=f"tweak {i}"))
        git(repo, "add", "train.py")
        git(repo, "commit", "-q", "-m", f"commit {i}", date=f"2024-03-{i + 1:02d}T12:00:00+00:00")
        shas.append(git(repo, "rev-parse", "HEAD"))
    out: list[tuple[int, int, int | str | None]] = []
    env = {k: v for k, v in os.environ.items() if k not in ("STEPSCOPE_HOME", "STEPSCOPE_DB")}
    for i, sha in enumerate(shas):
        if i < bench_from:
            continue
        git(repo, "checkout", "-q", sha)
        subprocess.run([sys.executable, "-m", "stepscope", "bench", "--store", str(store), "--repeat", str(repeat),
                        "--sample-interval", "0", "--name", "tiny", "--", sys.executable, "train.py"], cwd=repo,
                       env=env, check=True, capture_output=True)
        if i >= check_from:
            p = subprocess.run([sys.executable, "-m", "stepscope", "check", "--store", str(store), "--json",
                                "--max-regression", threshold], cwd=repo, env=env, capture_output=True, text=True)
            doc = json.loads(p.stdout) if p.stdout.strip() else {}
            step = (doc.get("step") or {}).get("first_bad")
            out.append((i, p.returncode, None if step is None else shas.index(step) if step in shas else step))
            st = next((c for c in doc.get("checks", []) if c["metric"] == "step_time_median_s"
                       and c["against"] == "window"), None)
            if st is not None and st["worse"] is not None:
                CHANGES.append((i, round(st["change"], 4), round(st["worse_low"] - 1, 4),
                                round(st["worse_high"] - 1, 4)))
    return out


CHANGES: list[tuple[int, float, float, float]] = []
"""(commit index, step-time change, interval low, high) of every check made, for the report."""


def check_study(store: Path, _steps: int) -> dict[str, Any]:
    CHANGES.clear()
    store.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(dir=store))  # a fresh repository and store per trial
    aa = check_series(root / "aa", commits=10, slow_at=99, factor=1.0, repeat=3, bench_from=0, check_from=1,
                      threshold="5%")
    step = check_series(root / "step", commits=7, slow_at=6, factor=1.20, repeat=3, bench_from=3, check_from=6,
                        threshold="5%")
    ok = all(rc != 1 for _, rc, _ in aa)
    caught = (step[-1][1] == 1 and step[-1][2] == 6) or step[-1][1] == 2
    return {"verdict": f"aa_never_fails={ok}, step_caught_or_cannot_tell={caught}", "ratio": 1.0, "noisy_runs": 0,
            "aa_exit_codes": [rc for _, rc, _ in aa], "step_exit": step[-1][1], "step_named": step[-1][2],
            "changes": list(CHANGES)}


STUDIES: dict[str, tuple[str, Any]] = {
    "aa1": ("A/A, one run a side, learned store", lambda s, n: single_pair(s, n)),
    "aa1e": ("A/A, one run a side, empty store",
             lambda s, n: single_pair(Path(tempfile.mkdtemp(dir=s.parent)) / "store", n)),
    "ab20": ("+20%, bench --ab --repeat 3", lambda s, n: ab(s, n, 3, 20.0)),
    "aa3": ("A/A, bench --ab --repeat 3", lambda s, n: ab(s, n, 3, 0.0)),
    "ab10": ("+10%, bench --ab --repeat 3", lambda s, n: ab(s, n, 3, 10.0)),
    "ab5": ("+5%, bench --ab --repeat 5", lambda s, n: ab(s, n, 5, 5.0)),
    "ab10r5": ("+10%, bench --ab --repeat 5", lambda s, n: ab(s, n, 5, 10.0)),
    "check": ("check: 10 commits A/A at 3 repeats; 20% step at commit 6 with 3 repeats", check_study),
    "cpu10": ("+10% CPU work, bench --ab --repeat 5 --metric step_cpu_time (and step time from the "
              "same pairs)", lambda s, n: ab_cpu(s, n, 5, 10.0)),
    "aacpu": ("A/A, bench --ab --repeat 5 --metric step_cpu_time (and step time from the same pairs)",
              lambda s, n: ab_cpu(s, n, 5, 0.0)),
}


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    counts = Counter(r["verdict"] for r in results)
    mdes = [r["mde"] for r in results if r.get("mde") is not None]
    keys = ("aa_exit_codes", "step_exit", "step_named", "changes", "wall_verdict", "wall_ratio", "ci", "load_avg",
            "wall_ci", "pair_ratios", "drift_widen")
    if "waits" in results[0]:  # one run a side: each pair's ratio, the change the floor required, and the loads
        extra_pairs = [{"ratio": round(r["ratio"], 3), "need": None if r["need"] is None else round(r["need"], 3),
                        "verdict": r["verdict"], "waits": r["waits"], "latency_ms": r["latency_ms"],
                        "shift": r["shift"], "load_avg": r["load_avg"]} for r in results]
        loads = [r["load_avg"] for r in results]
        pair_extra: dict[str, Any] = {"pairs": extra_pairs, "load_min_max": [min(loads), max(loads)],
                                      "max_abs_log_ratio": round(max(abs(math.log(r["ratio"])) for r in results), 3),
                                      "widened": sum("widened" in (r["floor"] or "") for r in results)}
    else:
        pair_extra = {}
    extra: dict[str, Any] = {k: [r[k] for r in results] for k in keys if k in results[0]}
    return {"n": len(results), "verdicts": dict(counts), "median_ratio": statistics.median(r["ratio"] for r in results),
            "median_mde": statistics.median(mdes) if mdes else None,
            "noisy_runs": sum(r["noisy_runs"] for r in results), **extra, **pair_extra}


def k_of_n(key: str, results: list[dict[str, Any]]) -> str:
    """One line of counts: false verdicts (A/A), misses (a real change called no change), cannot-tell answers."""
    n = len(results)
    if key == "check":
        aa = [rc for r in results for rc in r["aa_exit_codes"]]
        steps = [r["step_exit"] for r in results]
        return (f"check A/A: exit 1 in {aa.count(1)} of {len(aa)}, exit 2 in {aa.count(2)} of {len(aa)}; 20% step: "
                f"exit 1 in {steps.count(1)} of {n}, exit 2 in {steps.count(2)} of {n}, "
                f"PASS in {steps.count(0)} of {n}")
    v = Counter(r["verdict"] for r in results)
    called, untold, quiet = v["faster"] + v["slower"], v["inconclusive"], v["no_significant_change"]
    if "wall_verdict" in results[0]:  # one line per clock, the same pairs
        w = Counter(r["wall_verdict"] for r in results)
        return "; ".join(f"{key} {clock}: " + (
            f"faster/slower {c['faster'] + c['slower']} of {n}" if key.startswith("aa") else
            f"slower {c['slower']} of {n}, faster {c['faster']} of {n}") +
            f", cannot tell {c['inconclusive']} of {n}, no change {c['no_significant_change']} of {n}"
            for clock, c in (("step_cpu_time", v), ("step_time", w)))
    if key.startswith("aa"):
        return f"{key}: faster/slower {called} of {n}, cannot tell {untold} of {n}, no change {quiet} of {n}"
    return (f"{key}: slower {v['slower']} of {n}, cannot tell {untold} of {n}, missed (no change) {quiet} of {n}, "
            f"faster {v['faster']} of {n}")


def start_hogs(hog: str) -> list[subprocess.Popen[bytes]]:
    """"on": one CPU hog pinned to core 0; "two": two hogs, one a core where there are two; "off": none."""
    procs = []
    for core in range({"on": 1, "two": 2}.get(hog, 0)):
        proc = subprocess.Popen([sys.executable, "-c", HOG])
        try:
            os.sched_setaffinity(proc.pid, {core % (os.cpu_count() or 1)})
        except (AttributeError, OSError):
            pass
        procs.append(proc)
    return procs


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pairs", type=int, default=20, help="comparisons per study (default: 20)")
    p.add_argument("--steps", type=int, default=60, help="steps per run (default: 60)")
    p.add_argument("--hog", default="off,on", help="off: no hog, on: a CPU hog on core 0, two: two hogs "
                   "(default: off,on)")
    p.add_argument("--studies", default="aa1,aa3,ab10,ab5",
                   help=f"which studies, of {','.join(STUDIES)} (default: aa1,aa3,ab10,ab5)")
    p.add_argument("--out", help="also write the JSON here")
    a = p.parse_args()
    report: dict[str, Any] = {"cpus": os.cpu_count(), "pairs": a.pairs, "steps": a.steps, "load_before":
                              os.getloadavg()[0], "results": {}}
    for hog in a.hog.split(","):
        procs = start_hogs(hog)
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
                s["k_of_n"] = k_of_n(key, res)
                print(json.dumps({f"{key}/hog-{hog}": s}), file=sys.stderr, flush=True)
                print(f"hog-{hog} load {os.getloadavg()[0]:.1f}: {s['k_of_n']}", file=sys.stderr, flush=True)
        finally:
            for proc in procs:
                proc.kill()
                proc.wait()
    text = json.dumps(report, indent=2)
    print(text)
    if a.out:
        Path(a.out).write_text(text)


if __name__ == "__main__":
    main()
