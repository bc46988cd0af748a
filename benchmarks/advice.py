"""Advice calibration: does each rule's predicted saving come true on a workload built to show its bottleneck?

Each workload (benchmarks/_advice_loop.py, real torch training) is run once under `stepscope run`; `stepscope advise
RUN --json` gives the rule's finding, its predicted saving per step and its change; `stepscope advise RUN --verify
--repeat N --rule ID --metric step_time_mean` then re-runs the command as N interleaved A/B pairs, B with the change
applied, and gives the realised saving per mean step with its interval and the verdict, both decided on the runs'
mean step times: the figure the advisor's estimates and the run's duration speak of (a remedy that speeds one step
in k leaves the median at the fast steps). The prediction is also taken on each A run of the series and averaged
("on the A runs"): the pairs measure those runs' steps, not the recorded run's, and where the step moves much from
run to run (the threads showcase) only that comparison is like for like.

- ``loader``: a Dataset sleeping 3 ms a sample read with num_workers=0 -> input-bound, the rule's num_workers;
- ``threads``: two processes (torchrun) asking for 8 intra-op threads each (OMP_NUM_THREADS=8; torch caps it at
  the logical cores, so on a 2-core host 2 x 2 threads) -> cpu-oversubscription, the rule's torch threads. Sampled
  every 0.1 s: the rule's estimate reads the training thread's run-queue wait over the measured steps, which the
  default 1 s samples barely cover in a run of a few seconds;
- ``ddp``: DDP on gloo, 2 ranks, gradient buckets of 0.02 MiB -> comm-not-overlapped (latency-bound). Its remedy is
  a code change, so B is made by the workload's own settings, each its own series: --sync-every 4 (the rule's
  remedy: the all-reduce once per 4 micro-batches, under no_sync() for the others) and --bucket-mb 25 (DDP's
  default buckets: the same bytes in fewer calls);
- ``pinned``: pageable host-to-device copies need a CUDA GPU: skipped with a line where there is none.

Prints one line per rule (predicted, realised with interval, realised / predicted, verdict) and a JSON document
(--out FILE). Figures: docs/advice.md ("Advice calibration") and benchmarks/RESULTS.md.

    python benchmarks/advice.py [--repeat 5] [--workloads loader,threads,ddp,pinned] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
LOOP = str(HERE / "_advice_loop.py")
PY = sys.executable
TORCHRUN = [PY, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]

WORKLOADS: dict[str, dict[str, Any]] = {
    "loader": {"cmd": [PY, LOOP, "loader"], "rules": {"input-bound": []}, "env": {}},
    "threads": {"cmd": [*TORCHRUN, LOOP, "threads", "--steps", "30", "--batch-size", "64",
                            "--width", "256"],
                "rules": {"cpu-oversubscription": []}, "env": {"OMP_NUM_THREADS": "8"},
                "opts": ["--sample-interval", "0.1"]},
    "ddp": {"cmd": [*TORCHRUN, LOOP, "ddp", "--steps", "20", "--width", "256",
                        "--bucket-mb", "0.02", "--sync-every", "1"],
            "rules": {"comm-not-overlapped": ["param:sync_every=4", "param:bucket_mb=25"]}, "env": {}},
}
"""Per workload: its rules and, for a rule whose remedy is a code change, the settings of the workload that make
that remedy (each measured as its own A/B series; none: the rule's own change)."""


def stepscope(store: Path, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PY, "-m", "stepscope", *args[:1], "--store", str(store), *args[1:]],
                          capture_output=True, text=True, env={**os.environ, **env}, check=False)


def latest_run(store: Path) -> str:
    out = stepscope(store, ["ls", "--json"], {})
    rows = json.loads(out.stdout)
    return str(max(rows, key=lambda r: r["start_ns"])["id"])


def calibrate(name: str, spec: dict[str, Any], store: Path, repeat: int) -> list[dict[str, Any]]:
    env = dict(spec["env"])
    run = stepscope(store, ["run", *spec.get("opts", []), "--", *spec["cmd"]], env)
    if run.returncode != 0:
        return [{"workload": name, "error": f"the run failed ({run.returncode}): {run.stderr.strip()[-300:]}"}]
    run_id = latest_run(store)
    advice = json.loads(stepscope(store, ["advise", run_id, "--json"], env).stdout)
    fired = {f["rule_id"]: f for f in advice["findings"]}
    rows = []
    for rule, remedies in spec["rules"].items():
        f = fired.get(rule)
        if f is None:
            continue
        for change in remedies or [None]:
            rows.append(_verify(store, name, run_id, rule, f, change, repeat, env))
    if not rows:
        rows.append({"workload": name, "error": "no rule of " + ", ".join(spec["rules"]) + " fired; fired: " +
                     (", ".join(fired) or "none")})
    return rows


def _verify(store: Path, name: str, run_id: str, rule: str, f: dict[str, Any], change: str | None, repeat: int,
            env: dict[str, str]) -> dict[str, Any]:
    """One A/B series: B with the rule's change, or with ``change`` (KIND:KEY=VALUE) where given."""
    changes = ["--change", change] if change else []
    ver = stepscope(store, ["advise", run_id, "--verify", "--repeat", str(repeat), "--rule", rule, *changes,
                            "--metric", "step_time_mean", "--quiet-runs", "--json"], env)
    row: dict[str, Any] = {"workload": name, "rule": rule, "run": run_id, "run_step_s": mean_step_s(store, run_id),
                           "predicted_s_per_step": f["saving_s_per_step"], "basis": f["saving_basis"],
                           "change": change or (f.get("change") or {}).get("label")}
    if ver.returncode != 0:
        row["error"] = ver.stderr.strip().splitlines()[-1] if ver.stderr.strip() else f"exit {ver.returncode}"
        return row
    out = json.loads(ver.stdout)["outcomes"][0]
    row.update({k: out.get(k) for k in ("verdict", "pairs", "baseline_step_s", "experiment_step_s", "ratio", "mde",
                                        "confidence", "metric")})
    row.update(realised_s_per_step=out.get("saving_s_per_step"), realised_low_s=out.get("saving_low_s"),
               realised_high_s=out.get("saving_high_s"))
    row["predicted_a_s_per_step"] = predicted_on(store, out.get("runs_a") or [], rule, env)
    pred, real = row["predicted_s_per_step"], row["realised_s_per_step"]
    row["realised_over_predicted"] = real / pred if pred and real is not None else None
    pred_a = row["predicted_a_s_per_step"]
    row["realised_over_predicted_a"] = real / pred_a if pred_a and real is not None else None
    return row


def predicted_on(store: Path, runs: list[str], rule: str, env: dict[str, str]) -> float | None:
    """The rule's predicted saving per step, averaged over the A runs of the series (each the recorded command
    re-run, so each a prediction of its own): where a run's step time moves much from run to run (the threads
    showcase: 20-400 ms a step on a shared host), one recorded run's prediction speaks of another step than the
    pairs measured. None when the rule made no estimate on some A run."""
    got = []
    for run_id in runs:
        out = stepscope(store, ["advise", run_id, "--json"], env)
        try:
            f = next(f for f in json.loads(out.stdout)["findings"] if f["rule_id"] == rule)
        except (ValueError, KeyError, StopIteration):
            return None
        if f.get("saving_s_per_step") is None:
            return None
        got.append(float(f["saving_s_per_step"]))
    return sum(got) / len(got) if got else None


def mean_step_s(store: Path, run_id: str) -> float | None:
    shown = stepscope(store, ["show", run_id, "--json"], {})
    try:
        return float(json.loads(shown.stdout)["ranks"][0]["steps"]["step_time"]["mean"]) / 1e9
    except (ValueError, KeyError, IndexError, TypeError):
        return None


def _ms(v: float | None) -> str:
    return "—" if v is None else f"{v * 1e3:.1f}"


def level(r: dict[str, Any]) -> str:
    """The deciding look's interval level (verify's sequential looks split bench's 1%)."""
    c = r.get("confidence")
    return "—" if c is None else f"{100 * c:.4g}%"


def line(r: dict[str, Any]) -> str:
    if "rule" not in r or "verdict" not in r:
        return f"{r['workload']:8} {r.get('rule', ''):22} {r.get('error', '')}"
    ratio, ratio_a = r["realised_over_predicted"], r.get("realised_over_predicted_a")
    return (f"{r['workload']:8} {r['rule']:22} predicted {_ms(r['predicted_s_per_step']):>6} ms/step (on the A runs "
            f"{_ms(r.get('predicted_a_s_per_step'))}, ratio {'—' if ratio_a is None else f'{ratio_a:.2f}'})  realised "
            f"{_ms(r['realised_s_per_step']):>6} [{_ms(r['realised_low_s'])}, {_ms(r['realised_high_s'])}] ms "
            f"(mean step, {level(r)})  ratio "
            f"{'—' if ratio is None else f'{ratio:.2f}'}  {r['verdict']} ({r['pairs']} pairs; {r['change']})")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=5, help="A/B pairs per rule (default 5)")
    p.add_argument("--workloads", default="loader,threads,ddp,pinned")
    p.add_argument("--out", help="write the JSON document here")
    args = p.parse_args()
    rows: list[dict[str, Any]] = []
    for name in args.workloads.split(","):
        if name == "pinned":
            import torch

            if not torch.cuda.is_available():
                rows.append({"workload": "pinned", "error": "skipped: no CUDA GPU on this host (pageable "
                                                            "host-to-device copies need one)"})
                print(line(rows[-1]), flush=True)
                continue
            rows.append({"workload": "pinned", "error": "not built yet: needs a GPU host to calibrate on"})
            print(line(rows[-1]), flush=True)
            continue
        with tempfile.TemporaryDirectory(prefix="advice-") as tmp:
            for r in calibrate(name, WORKLOADS[name], Path(tmp) / "store", args.repeat):
                rows.append(r)
                print(line(r), flush=True)
    doc = {"repeat": args.repeat, "cores": os.cpu_count(), "load": os.getloadavg(), "rows": rows}
    if args.out:
        Path(args.out).write_text(json.dumps(doc, indent=1))
    else:
        print(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
