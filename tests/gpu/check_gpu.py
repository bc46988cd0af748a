"""Checks stepscope's GPU figures against torch's own, on a machine with CUDA:

    python tests/gpu/check_gpu.py                 # prints each figure beside torch's; exit 0 when all agree
    python tests/gpu/check_gpu.py --device cpu    # the plumbing only (FLOPs, MFU from --peak-flops), no GPU

It runs tests/gpu/gpu_train.py twice: bare (the script reads and resets the allocator's peak after each step),
then under `stepscope run --profile-steps 3 --memory-snapshot 3 --sample-interval 0.2` (the script records a
CUDA event after each optimizer step). Then it compares:

- steps: the count the script ran;
- step device time: stepscope's `device_ns` (its CUDA step timer) against the script's events, step by step;
- peak allocated per step: stepscope's `mem_allocated_peak_bytes` against the bare run's
  `torch.cuda.max_memory_allocated()` (stepscope resets the counter at each step boundary, as the bare run does);
- memory snapshot: the dumped pickle's segments against `torch.cuda.memory_reserved()`, and its allocation trace;
- NVML samples: total memory against `torch.cuda.get_device_properties().total_memory`, memory used at least what
  the process reserved, utilisation, power, energy, clock and temperature plausible;
- device name: the run's hardware record and the FLOP record against `torch.cuda.get_device_name()`;
- FLOPs per step against the count by hand (16 x batch x width^2: three Linear layers, forward, weight
  gradients, and input gradients of the two upper layers), the precision against torch's TF32 setting;
- MFU: by hand (those FLOPs / the median event step time / the peak table's entry for torch's device name)
  against stepscope's;
- the profiler window: its trace holds GPU kernels, and their time per traced step is at most the step's.

Exit status: 0 all agree, 1 a figure disagrees (each printed), 3 no CUDA device (nothing checked).
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import math
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TRAIN = HERE / "gpu_train.py"
NO_CUDA = 3
PROFILE_STEPS, SNAPSHOT_STEPS = 3, 3


@dataclass(frozen=True, slots=True)
class Check:
    figure: str
    ours: str
    torch: str
    ok: bool | None  # None: not applicable on this device


def fmt(v: float | None) -> str:
    if v is None or math.isnan(v):
        return "—"
    return f"{v:.6g}"


def cuda_device() -> str | None:
    """torch's name of device 0, or None without torch or a CUDA device (asked in a child: no CUDA context here)."""
    code = "import torch; print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')"
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() or None if proc.returncode == 0 else None


def train(work: Path, args: argparse.Namespace, name: str, *, observed: bool) -> dict[str, Any]:
    ref = work / f"{name}.json"
    script = [sys.executable, str(TRAIN), "--steps", str(args.steps), "--batch", str(args.batch), "--width",
              str(args.width), "--reference", str(ref), "--device", args.device]
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEPSCOPE")}
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"  # NVML numbers devices by PCI bus: gpu0 is CUDA device 0
    if observed:
        opts = ["--store", str(work / "store"), "--quiet", "--sample-interval", "0.2", "--profile-steps",
                str(PROFILE_STEPS), "--memory-snapshot", str(SNAPSHOT_STEPS)]
        if args.device == "cpu":
            opts += ["--peak-flops", str(args.cpu_peak)]  # no peak table for a CPU: the MFU arithmetic alone
        cmd = [sys.executable, "-m", "stepscope", "run", *opts, "--", *script]
    else:
        cmd = [*script, "--reset-peaks"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=work, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"check_gpu: the {name} training failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(ref.read_text())
    return result


def show_json(store: Path) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-m", "stepscope", "show", "latest", "--store", str(store), "--json"],
                          capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise SystemExit(f"check_gpu: stepscope show failed:\n{proc.stderr[-3000:]}")
    shown: dict[str, Any] = json.loads(proc.stdout)
    return shown


def steady(n: int, skip: Iterable[int]) -> list[int]:
    """Step indices past warm-up (from 5) that no profiler window, FLOP count or snapshot window touched."""
    out = set(range(5, n)) - set(skip)
    return sorted(out)


def near(a: float | None, b: float | None, rel: float, absolute: float = 0.0) -> bool:
    if a is None or b is None or math.isnan(a) or math.isnan(b):
        return False
    return abs(a - b) <= max(rel * abs(b), absolute)


def kernel_time_us(trace_path: Path) -> tuple[int, float]:
    """GPU kernels in a Kineto trace: how many, and their summed duration (µs)."""
    opener = gzip.open if trace_path.suffix == ".gz" else open
    with opener(trace_path, "rt") as f:
        events = json.load(f).get("traceEvents", [])
    kernels = [e for e in events if e.get("cat") == "kernel" and e.get("ph") == "X"]
    return len(kernels), float(sum(e.get("dur", 0.0) for e in kernels))


def compare(args: argparse.Namespace, work: Path, bare: dict[str, Any], obs: dict[str, Any]) -> list[Check]:
    from stepscope.analyze.run.flops import peak_for
    from stepscope.store import open_store

    store = work / "store"
    st = open_store(store)
    try:
        data = st.load("latest")
    finally:
        st.close()
    shown = show_json(store)
    rank = data.ranks[0]
    steps = rank.steps
    cuda = args.device == "cuda"
    checks: list[Check] = []
    add = checks.append
    n = len(steps)
    add(Check("training steps", str(n), str(args.steps), n == args.steps))

    flops_recs = rank.extra.get("flops", [])
    windows = rank.extra.get("profile_window", [])
    snaps = rank.extra.get("memory_snapshot", [])
    touched: set[int] = {int(r["step"]) for r in flops_recs}
    for w in windows:
        touched |= set(range(int(w.get("traced_first_step", w["first_step"])), int(w["carried_step"]) + 1))
    for s in snaps:
        touched |= set(range(int(s["first_step"]) - 1, int(s["last_step"]) + 2))
    idx = steady(n, touched)

    # CUDA step timing: the same boundaries as the script's events (event_ms[k] is step k+1)
    timing = rank.stream.timing
    add(Check("step timing source", str(timing), "cuda_events" if cuda else "cpu_wall",
              timing == ("cuda_events" if cuda else "cpu_wall")))
    event_ns = [ms * 1e6 for ms in obs["event_ms"]]
    if cuda:
        ours = [float(steps["device_ns"][i]) for i in idx]
        theirs = [event_ns[i - 1] for i in idx]
        diffs = [abs(a - b) for a, b in zip(ours, theirs)]
        med = statistics.median(theirs)
        ok = statistics.median(diffs) <= max(20e3, 0.01 * med) and all(math.isfinite(a) for a in ours)
        add(Check("device time per step, median (µs)", fmt(statistics.median(ours) / 1e3),
                  fmt(med / 1e3), ok))
        add(Check("device time per step, median |difference| (µs)", fmt(statistics.median(diffs) / 1e3),
                  "≤ " + fmt(max(20.0, 0.01 * med / 1e3)), ok))
        peaks_ours = [float(steps["mem_allocated_peak_bytes"][i]) for i in idx]
        peaks_bare = [float(bare["peak_allocated"][i]) for i in idx]
        add(Check("peak allocated per step, median (bytes)", fmt(statistics.median(peaks_ours)),
                  fmt(statistics.median(peaks_bare)),
                  near(statistics.median(peaks_ours), statistics.median(peaks_bare), 0.0, 1 << 20)))
    else:
        add(Check("device time per step", "—", "no CUDA", None))
        add(Check("peak allocated per step", "—", "no CUDA", None))

    # memory snapshot
    if cuda:
        if not snaps:
            add(Check("memory snapshot", "none recorded", "a pickle", False))
        else:
            snap = snaps[-1]
            with open(Path(data.path) / snap["path"], "rb") as f:
                pick = pickle.load(f)
            segments = sum(int(s["total_size"]) for s in pick.get("segments", []))
            traces = sum(len(t) for t in pick.get("device_traces", []))
            add(Check("snapshot segments (bytes) vs memory_reserved", fmt(float(segments)),
                      fmt(float(obs["reserved_end"])), near(segments, obs["reserved_end"], 0.05)))
            add(Check("snapshot steps / allocation events", f"{snap['last_step'] - snap['first_step'] + 1} / "
                      f"{traces}", f"{SNAPSHOT_STEPS} / > 0",
                      snap["last_step"] - snap["first_step"] + 1 == SNAPSHOT_STEPS and traces > 0))
    else:
        add(Check("memory snapshot", "—", "no CUDA", None))

    # NVML samples
    cols = rank.samples.columns if len(rank.samples) else {}
    if cuda:
        if "gpu0_mem_total_bytes" not in cols:
            add(Check("NVML samples", "none", "gpu0_* columns (pip install nvidia-ml-py)", False))
        else:
            def col(name: str) -> list[float]:
                """The column's finite values; [nan] where NVML gave none (the checks on it then fail)."""
                got = [float(v) for v in cols.get(name, []) if math.isfinite(float(v))]
                return got or [math.nan]

            total = col("gpu0_mem_total_bytes")
            add(Check("NVML memory total (bytes)", fmt(max(total)), fmt(float(obs["total_memory"])),
                      near(max(total), obs["total_memory"], 0.03)))
            add(Check("NVML memory used, max (bytes) ≥ reserved", fmt(max(col("gpu0_mem_used_bytes"))),
                      fmt(float(obs["reserved_end"])), max(col("gpu0_mem_used_bytes")) >= obs["reserved_end"]))
            util = col("gpu0_util_pct")
            add(Check("NVML utilisation, max (%)", fmt(max(util)), "> 0, ≤ 100", 0 < max(util) <= 100))
            power, energy = col("gpu0_power_w"), col("gpu0_energy_j")
            add(Check("NVML power, max (W)", fmt(max(power)), "> 0", max(power) > 0))
            add(Check("NVML energy, last - first (J)", fmt(energy[-1] - energy[0]), "> 0, never down",
                      energy[-1] > energy[0] and all(b >= a for a, b in itertools.pairwise(energy))))
            clock, temp = col("gpu0_sm_clock_mhz"), col("gpu0_temp_c")
            add(Check("NVML SM clock, max (MHz) / temperature (°C)", f"{fmt(max(clock))} / {fmt(max(temp))}",
                      "> 0 / 10-110", max(clock) > 0 and 10 <= max(temp) <= 110))
    else:
        add(Check("NVML samples", "—", "no CUDA", None))

    # device name
    gpus = data.run.host.gpus or rank.stream.gpus
    flops_name = flops_recs[-1].get("device_name") if flops_recs else None
    if cuda:
        name = gpus[0].name if gpus else None
        add(Check("device name (run record)", str(name), str(obs["device_name"]), name == obs["device_name"]))
        add(Check("device name (FLOP record)", str(flops_name), str(obs["device_name"]),
                  flops_name == obs["device_name"]))

    # FLOPs, precision, MFU
    fl = shown.get("flops") or {}
    expected = 16 * args.batch * args.width**2
    add(Check("FLOPs per step", fmt(fl.get("flops_per_step")), fmt(float(expected)),
              fl.get("flops_per_step") == expected))
    precision = "tf32" if obs["tf32"] else "fp32"
    add(Check("precision", str(fl.get("precision")), precision, fl.get("precision") == precision))
    if cuda:
        peak = peak_for(obs["device_name"], precision)
        if peak is None:
            add(Check("peak FLOP/s", "—", f"{obs['device_name']} is not in PEAK_TABLE (analyze/run/flops.py)", False))
        else:
            step_s = statistics.median(event_ns[i - 1] for i in idx) * 1e-9
            mfu = expected / step_s / peak[0]
            add(Check("peak FLOP/s", fmt(fl.get("peak_flops")), fmt(peak[0]), fl.get("peak_flops") == peak[0]))
            add(Check("MFU", fmt(fl.get("mfu")), fmt(mfu), near(fl.get("mfu"), mfu, 0.10)))
    else:
        # on a shared CPU the step time wanders: MFU must be its achieved FLOP/s over the given peak exactly, and
        # that achieved figure the FLOPs over a step time within the run's spread
        wall = sorted(float(steps.duration_ns[i]) for i in idx)
        achieved = fl.get("achieved_flops")
        add(Check("MFU (--peak-flops) = achieved / peak", fmt(fl.get("mfu")),
                  fmt(achieved / args.cpu_peak if achieved else None),
                  achieved is not None and near(fl.get("mfu"), achieved / args.cpu_peak, 1e-9)))
        lo, hi = expected / (wall[-1] * 1e-9), expected / (wall[0] * 1e-9)
        add(Check("achieved FLOP/s", fmt(achieved), f"{fmt(lo)}-{fmt(hi)}",
                  achieved is not None and lo * 0.9 <= achieved <= hi * 1.1))

    # the profiler window
    if not windows:
        add(Check("profiler window", "none", f"{PROFILE_STEPS} steps", False))
    else:
        w = windows[-1]
        traced = int(w["last_step"]) - int(w["first_step"]) + 1
        add(Check("profiled steps", str(traced), str(PROFILE_STEPS), traced == PROFILE_STEPS))
        if cuda:
            count, busy_us = kernel_time_us(Path(data.path) / w["trace"])
            per_step = busy_us / max(traced, 1)
            step_us = statistics.median(event_ns[i - 1] for i in idx) / 1e3
            add(Check("trace: kernels / kernel µs per traced step", f"{count} / {fmt(per_step)}",
                      f"> 0 / ≤ {fmt(step_us * 1.05)}", count > 0 and per_step <= 1.05 * step_us))
    return checks


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--steps", type=int, default=1500)  # ~3 s on an H100-class GPU: NVML samples
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--width", type=int, default=4096)
    p.add_argument("--cpu-peak", type=float, default=1e12, help="--peak-flops given with --device cpu")
    p.add_argument("--keep", type=Path, help="work in this folder and keep it (store, references)")
    args = p.parse_args()
    if args.device == "cuda":
        name = cuda_device()
        if name is None:
            print("no CUDA device: nothing checked")
            return NO_CUDA
        print(f"device 0: {name}")
    with tempfile.TemporaryDirectory(prefix="stepscope-gpu-") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        bare = train(work, args, "bare", observed=False)
        obs = train(work, args, "observed", observed=True)
        checks = compare(args, work, bare, obs)
    width = max(len(c.figure) for c in checks)
    print(f"{'figure':{width}}  {'stepscope':>22}  {'torch / by hand':>22}  agrees")
    for c in checks:
        verdict = "n/a" if c.ok is None else ("yes" if c.ok else "NO")
        print(f"{c.figure:{width}}  {c.ours:>22}  {c.torch:>22}  {verdict}")
    failed = [c.figure for c in checks if c.ok is False]
    print("all figures agree" if not failed else f"disagree: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
