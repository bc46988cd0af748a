"""`stepscope tune` against `stepscope sweep` on the CosmoFlow-like example (issue 42's yardstick).

The yardstick is the CosmoFlow seed's own thread study: the whole inter x intra grid, one run a cell (there 5 x 6
= 30 runs). Here the grid is inter 1,2,3,4,6 x intra 1,2,3,4,6,8 (TensorFlow's thread pools on a 2-core host;
30 cells, `sweep --repeat 1`), and tune starts from one thread a pool (the grid's first values). "tune finds
the setting sweep finds" means: tune's best is sweep's best, or an interleaved paired A/B (`bench --ab`, 99%)
cannot tell them apart, or finds tune's better.

Each trial runs both on the example (sweep first in odd trials, tune first in even ones: the machine's drift
hits both), then, where the two bests differ, `bench --ab --repeat N` with A = sweep's best, B = tune's best.
Prints per trial the runs each used, each one's best and the A/B verdict; --out writes every figure as JSON;
--hogs N keeps N busy loops running beside the trials (a busy host).

    python benchmarks/tune_vs_sweep.py --trials 3 --out /tmp/tune_vs_sweep.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "cosmoflow_like_data.py"
GRID = {"inter": "1,2,3,4,6", "intra": "1,2,3,4,6,8"}


def stepscope(args: list[str], env: dict[str, str], timeout: float = 3600) -> dict[str, Any]:
    """Run a stepscope command, its JSON document (after the example's own "epoch N" lines)."""
    r = subprocess.run([sys.executable, "-m", "stepscope", *args], capture_output=True, text=True, env=env,
                       timeout=timeout, cwd=ROOT)
    if r.returncode != 0:
        raise SystemExit(f"stepscope {args[0]} failed ({r.returncode}): {r.stderr[-2000:]}")
    doc: dict[str, Any] = json.loads(r.stdout[r.stdout.index("{"):])
    return doc


def example(extra: list[str]) -> list[str]:
    return [sys.executable, str(EXAMPLE), *extra]


def trial(k: int, args: argparse.Namespace, env: dict[str, str]) -> dict[str, Any]:
    data = ["--samples", str(args.samples), "--epochs", str(args.epochs)]
    cmd = ["--", *example(["--inter", "{inter}", "--intra", "{intra}", *data])]
    grid = [a for name in GRID for a in ("--param", f"{name}={getattr(args, name)}")]
    common = ["--sample-interval", "0", "--json"]

    def sweep() -> dict[str, Any]:
        t0 = time.time()
        doc = stepscope(["sweep", *common, "--repeat", "1", "--metric", args.metric, *grid, *cmd], env)
        runs = sum(p["runs"] for p in doc["points"])
        return {"runs": runs, "best": doc["best"]["values"], "best_value": doc["best"]["mean"],
                "seconds": round(time.time() - t0, 1)}

    def tune() -> dict[str, Any]:
        t0 = time.time()
        doc = stepscope(["tune", *common, "--budget", str(args.budget), "--metric", args.metric, *grid, *cmd], env)
        conf = doc.get("confirmation") or {}
        return {"runs": doc["runs"], "best": doc["best"], "screen_best": doc["screen_best"],
                "screen_runs": doc["screen_runs"], "gain": doc["gain"], "gain_ci": [doc["gain_low"], doc["gain_high"]],
                "confirmation": conf.get("outcome"), "confirmation_pairs": conf.get("pairs"),
                "screen": [{"candidate": c["candidate"], "ratio": c["ratio"], "ci": [c["ci_low"], c["ci_high"]],
                            "outcome": c["outcome"]} for c in doc["comparisons"]],
                "seconds": round(time.time() - t0, 1)}

    load0 = os.getloadavg()[0]
    first, second = (sweep, tune) if k % 2 == 0 else (tune, sweep)
    out = {first.__name__: first(), second.__name__: second()}
    s, t = out["sweep"], out["tune"]
    ab: dict[str, Any] = {"verdict": "same setting"}
    if s["best"] != t["best"]:
        def at(values: dict[str, str]) -> list[str]:
            return example(["--inter", values["inter"], "--intra", values["intra"], *data])

        doc = stepscope(["bench", "--ab", "--repeat", str(args.ab_pairs), "--sample-interval", "0", "--json", "--",
                         *at(s["best"]), "--", *at(t["best"])], env)
        row = next(r for r in doc["diff"]["overview"] if r["key"] == "step_time_median_ns")
        ch = row["change"]
        # the verdict is on step time: B (tune's best) faster is tune finding better
        ab = {"verdict": ch["verdict"], "ratio": ch["ratio"], "ci": [ch["ci_low"], ch["ci_high"]],
              "pairs": args.ab_pairs}
    return {"trial": k + 1, "order": [first.__name__, second.__name__], "load_start": round(load0, 2),
            "load_end": round(os.getloadavg()[0], 2), "metric": args.metric, **out, "ab": ab}


def show(r: dict[str, Any]) -> str:
    s, t, ab = r["sweep"], r["tune"], r["ab"]

    def name(v: dict[str, str]) -> str:
        return f"inter={v['inter']} intra={v['intra']}"

    gain = f" gain x{t['gain']:.2f} [{t['gain_ci'][0]:.2f}, {t['gain_ci'][1]:.2f}]" if t["gain"] else " no gain claimed"
    line = (f"trial {r['trial']} (load {r['load_start']}-{r['load_end']}, {' then '.join(r['order'])}): "
            f"sweep {s['runs']} runs, best {name(s['best'])} ({s['best_value']:.4g} {r['metric']}, {s['seconds']} s); "
            f"tune {t['runs']} runs (screen {t['screen_runs']}), best {name(t['best'])}, screen's "
            f"{name(t['screen_best'])}, confirmation {t['confirmation']} after {t['confirmation_pairs']} pairs,{gain} "
            f"({t['seconds']} s); A/B tune's best vs sweep's: {ab['verdict']}")
    if "ratio" in ab:
        line += f" (step time x{ab['ratio']:.3f} [{ab['ci'][0]:.3f}, {ab['ci'][1]:.3f}], {ab['pairs']} pairs)"
    for c in t["screen"]:
        ratio = f"x{c['ratio']:.3f}" if c["ratio"] else "—"
        line += f"\n  tune's screen: {name(c['candidate'])} {ratio} — {c['outcome']}"
    return line


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--inter", default=GRID["inter"], help=f"inter-op values (default: {GRID['inter']})")
    p.add_argument("--intra", default=GRID["intra"], help=f"intra-op values (default: {GRID['intra']})")
    p.add_argument("--samples", type=int, default=64, help="the example's volumes (default: 64)")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--budget", type=int, default=40, help="tune's --budget (default: 40)")
    p.add_argument("--metric", default="samples_per_s",
                   help="what sweep ranks and tune improves (default: samples_per_s, the run's throughput; "
                        "step_time_median_s: the median step, robust to the first epoch's slow steps)")
    p.add_argument("--ab-pairs", type=int, default=5, help="bench --ab pairs where the bests differ (default: 5)")
    p.add_argument("--hogs", type=int, default=0,
                   help="busy-loop processes kept running beside the trials, for a busy host (default: 0)")
    p.add_argument("--out", type=Path, help="write every trial's figures as JSON here")
    args = p.parse_args()
    results: list[dict[str, Any]] = []
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.hogs)]
    try:
        trials(args, results)
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    found = sum(r["ab"]["verdict"] in ("same setting", "no_significant_change", "inconclusive", "faster")
                for r in results)
    fewer = sum(r["tune"]["runs"] < r["sweep"]["runs"] for r in results)
    print(f"tune found sweep's setting (or one the A/B cannot tell from it, or better) in {found} of "
          f"{len(results)} trials, in fewer runs in {fewer}")


def trials(args: argparse.Namespace, results: list[dict[str, Any]]) -> None:
    with tempfile.TemporaryDirectory(prefix="tune-vs-sweep-") as tmp:
        env = {**os.environ, "STEPSCOPE_HOME": str(Path(tmp) / "store")}
        env.pop("STEPSCOPE_DB", None)
        for k in range(args.trials):
            results.append(trial(k, args, env))
            print(show(results[-1]), flush=True)
            if args.out:
                args.out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
