"""Trace engine benchmark: stepscope vs HTA vs a bare orjson.loads, each in a child process.

    .venv/bin/python benchmarks/trace_analysis.py [--events 5000000] [--hta-events 1000000]
        [--hta-python /tmp/hta-venv/bin/python]

Builds synthetic traces (the v100 fixture's events repeated with shifted timestamps and ids) in a temp
folder, then for each trace measures wall time and peak RSS (ru_maxrss of the child) of:
  ours:   read_trace + temporal + idle + kernel breakdown + comm/comp overlap
  hta:    TraceAnalysis(load) + get_temporal_breakdown + get_idle_time_breakdown + get_gpu_kernel_breakdown
          + get_comm_comp_overlap (if --hta-python exists)
  orjson: reading the bytes (gunzip if needed) + orjson.loads, the floor of any JSON-based reader.
"""

from __future__ import annotations

import argparse
import gzip
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / ".." / "shared" / "fixtures" / "traces" / "v100_1rank" / "rank0.json.gz"

OURS = """
import sys
from stepscope.traces.kineto import read_trace
from stepscope.analyze.trace.gpuview import gpu_view
from stepscope.analyze.trace.temporal import temporal_breakdown, comm_overlap
from stepscope.analyze.trace.idle import idle_breakdown
from stepscope.analyze.trace.kernels import kernel_breakdown
t = read_trace(sys.argv[1]); g = gpu_view(t)
temporal_breakdown(g); idle_breakdown(t, g); kernel_breakdown(t, g); comm_overlap(g)
print(len(t))
"""
HTA = """
import sys, logging
logging.disable(logging.CRITICAL)
from hta.trace_analysis import TraceAnalysis
ta = TraceAnalysis(trace_files={0: sys.argv[1]}, include_last_profiler_step=True)
ta.get_temporal_breakdown(visualize=False); ta.get_idle_time_breakdown(visualize=False)
ta.get_gpu_kernel_breakdown(visualize=False); ta.get_comm_comp_overlap(visualize=False)
"""
BARE = """
import sys, gzip, orjson
p = sys.argv[1]
data = gzip.open(p).read() if p.endswith('.gz') else open(p, 'rb').read()
print(len(orjson.loads(data)['traceEvents']))
"""


def synthesize(target: int, out: Path) -> int:
    doc = orjson.loads(gzip.decompress(FIXTURE.read_bytes()))
    base = [e for e in doc["traceEvents"] if e.get("ph") in ("X", "s", "f")]
    span = max(e["ts"] + e.get("dur", 0) for e in base) - min(e["ts"] for e in base) + 1000.0
    reps = max(1, -(-target // len(base)))
    with out.open("wb") as f:
        head = {k: v for k, v in doc.items() if k != "traceEvents"}
        f.write(orjson.dumps(head)[:-1] + b', "traceEvents": [\n')
        for r in range(reps):
            chunk = []
            for e in base:
                c = dict(e, ts=e["ts"] + r * span)
                if "args" in c:
                    a = dict(c["args"])
                    for key in ("correlation", "External id"):
                        if key in a:
                            a[key] = a[key] + r * 10_000_000
                    c["args"] = a
                if "id" in c:
                    c["id"] = c["id"] + r * 10_000_000
                chunk.append(orjson.dumps(c))
            f.write((b",\n" if r else b"") + b",\n".join(chunk))
        f.write(b"\n]}\n")
    return reps * len(base)


def measure(python: str, code: str, path: Path, timeout: int) -> tuple[float, float] | None:
    """Wall time and the child's own peak RSS (os.wait4 gives per-child rusage)."""
    env = {"PYTHONPATH": str(ROOT / "src"), "HTA_DISABLE_NS_ROUNDING": "1", "PATH": "/usr/bin:/bin"}
    t0 = time.perf_counter()
    proc = subprocess.Popen([python, "-c", code, str(path)], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = status
    wall = time.perf_counter() - t0
    if status != 0:
        print(f"    {python}: failed (status {status})", file=sys.stderr)
        return None
    return wall, usage.ru_maxrss / 1024.0


def row(label: str, path: Path, hta_python: str | None, timeout: int) -> None:
    size = path.stat().st_size / 1e6
    bare = measure(sys.executable, BARE, path, timeout)
    ours = measure(sys.executable, OURS, path, timeout)
    hta = measure(hta_python, HTA, path, timeout) if hta_python else None
    print(f"\n{label} ({size:.0f} MB JSON)")
    for name, m in (("orjson.loads", bare), ("stepscope", ours), ("HTA", hta)):
        print(f"  {name:13s} " + (f"{m[0]:8.2f} s  peak RSS {m[1]:8.0f} MB" if m else "   n/a"))
    if ours and bare:
        print(f"  stepscope / orjson time: {ours[0] / bare[0]:.2f}x (target <= 2x)")
    if ours and hta:
        print(f"  HTA / stepscope time: {hta[0] / ours[0]:.1f}x (target >= 5x); "
              f"stepscope / HTA peak memory: {ours[1] / hta[1]:.2f} (target <= 0.33)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=5_000_000)
    ap.add_argument("--hta-events", type=int, default=1_000_000, help="size of the trace HTA also runs on")
    ap.add_argument("--hta-python", default="/tmp/hta-venv/bin/python")
    ap.add_argument("--timeout", type=int, default=1800)
    args = ap.parse_args()
    hta = args.hta_python if Path(args.hta_python).exists() else None
    if not FIXTURE.exists():
        print(f"fixture {FIXTURE} not found", file=sys.stderr)
        return 1
    # ru_maxrss over children is a running max, so measure in increasing size order and each size fresh
    with tempfile.TemporaryDirectory() as tmp:
        row("fixture v100_1rank", FIXTURE, hta, args.timeout)
        mid = Path(tmp) / "mid.json"
        n = synthesize(args.hta_events, mid)
        row(f"synthetic {n:,} events", mid, hta, args.timeout)
        mid.unlink()
        big = Path(tmp) / "big.json"
        n = synthesize(args.events, big)
        row(f"synthetic {n:,} events", big, None, args.timeout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
