"""Trace engine benchmark: stepscope vs HTA vs a bare orjson.loads, each in a child process.

    .venv/bin/python benchmarks/trace_analysis.py [--quick] [--events 5000000] [--hta-events 1000000]
        [--repeats 3] [--ranks 4] [--hta-python /tmp/hta-venv/bin/python] [--workdir DIR]
    .venv/bin/python benchmarks/trace_analysis.py --all-new [--sizes 100000,1000000,3000000] [--repeats 3]
    .venv/bin/python benchmarks/trace_analysis.py --by-source [--source-events 1000000] [--repeats 1]
        [--sources v100,nccl2,diff8,mi250,alexnet,cpu] [--baseline-src /path/to/old/src] [--no-hta]
        [--reader auto|c|python] [--compare-readers]

Cases: the v100 fixture (68k events), a synthetic trace HTA also runs on (--hta-events), a big synthetic
trace (--events; HTA too if it fits, see --hta-max-events) and a folder of --ranks synthetic ranks.
Synthetic traces repeat the v100 fixture's events with shifted timestamps and ids, written to a temp
folder (or --workdir, where they are kept and reused).

--by-source: for each real fixture (v100 1 rank, A100 NCCL 2-rank, A100 8-rank diff, MI250 ROCm, AlexNet,
CPU-only) a ~1M-event trace built by repeating it; stepscope runs every analysis ``trace analyze`` prints
(read_trace + analyze_trace), HTA the analyses it has of those (temporal, idle, kernel breakdown, overlap,
kernel launch stats, memory bandwidth, profiler steps), and a GC-off ``orjson.loads`` of the same bytes
is the floor; prints a Markdown table of the per-source ratios.

Each tool runs in a fresh child process; we record its wall time, CPU time (user + sys) and peak RSS
(ru_maxrss, from os.wait4, per child):
  stepscope:  read_trace + temporal + idle + kernel breakdown + comm/comp overlap
  HTA:        TraceAnalysis (load) + get_temporal_breakdown + get_idle_time_breakdown
              + get_gpu_kernel_breakdown + get_comm_comp_overlap
  orjson:     read the bytes (gunzip if needed) + orjson.loads: the floor of any JSON-based reader;
              "gc off" is the same with Python's cycle collector disabled (stepscope disables it too).
--reader picks stepscope's trace reader in every child (``STEPSCOPE_TRACE_READER``: the compiled reader, the
Python one, or auto); --compare-readers (with --by-source) also runs read_trace alone with each reader and
read + analyze with the Python reader, and prints their CPU seconds beside the GC-off orjson.loads floor.

The machine may be shared, so the tools run interleaved (order rotated each repeat) and every ratio is
the median of the per-repeat ratios of runs made side by side; times are medians.
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "data" / "traces" / "v100_1rank" / "rank0.json.gz"

OURS = """
import sys
from stepscope.traces.kineto import read_trace
from stepscope.analyze.trace.gpuview import gpu_view
from stepscope.analyze.trace.temporal import temporal_breakdown, comm_overlap
from stepscope.analyze.trace.idle import idle_breakdown
from stepscope.analyze.trace.kernels import kernel_breakdown
t = read_trace(sys.argv[1]); g = gpu_view(t)
temporal_breakdown(g); idle_breakdown(t, g); kernel_breakdown(t, g); comm_overlap(g)
"""
OURS_SET = """
import sys
from stepscope.executor.traceset import analyze_traceset
s = analyze_traceset([sys.argv[1]], workers=int(sys.argv[2]))
assert len(s.ranks) == int(sys.argv[3]) and not s.errors, s.errors
"""
OURS_ALL = """
import sys
from stepscope.traces.kineto import read_trace
from stepscope.analyze.trace.analysis import analyze_trace
analyze_trace(read_trace(sys.argv[1]))
"""
HTA_ALL = """
import sys, logging
logging.disable(logging.CRITICAL)
from hta.trace_analysis import TraceAnalysis
ta = TraceAnalysis(trace_files={0: sys.argv[1]}, include_last_profiler_step=True)
failed = []
for name in ("get_temporal_breakdown", "get_idle_time_breakdown", "get_gpu_kernel_breakdown",
             "get_comm_comp_overlap", "get_cuda_kernel_launch_stats", "get_memory_bw_summary"):
    try:
        getattr(ta, name)(visualize=False) if name != "get_memory_bw_summary" else ta.get_memory_bw_summary()
    except Exception as exc:
        failed.append(name)
ta.get_profiler_steps()
print("FAILED", ",".join(failed))
"""
HTA = """
import sys, logging
logging.disable(logging.CRITICAL)
from hta.trace_analysis import TraceAnalysis
ta = TraceAnalysis(trace_files={0: sys.argv[1]}, include_last_profiler_step=True)
ta.get_temporal_breakdown(visualize=False); ta.get_idle_time_breakdown(visualize=False)
ta.get_gpu_kernel_breakdown(visualize=False); ta.get_comm_comp_overlap(visualize=False)
"""
OURS_NEW = """
import inspect, sys
from stepscope.traces.kineto import read_trace
from stepscope.analyze.trace.analysis import analyze_trace
opt = {"with_critical_path": True} if "with_critical_path" in inspect.signature(analyze_trace).parameters else {}
analyze_trace(read_trace(sys.argv[1]), **opt)
"""
HTA_NEW = """
import sys, logging
logging.disable(logging.CRITICAL)
from hta.trace_analysis import TraceAnalysis
ta = TraceAnalysis(trace_files={0: sys.argv[1]}, include_last_profiler_step=True)
failed = []
def run(name, call):
    try:
        call()
    except Exception:
        failed.append(name)
run("temporal", lambda: ta.get_temporal_breakdown(visualize=False))
run("idle", lambda: ta.get_idle_time_breakdown(visualize=False))
run("kernels", lambda: ta.get_gpu_kernel_breakdown(visualize=False))
run("overlap", lambda: ta.get_comm_comp_overlap(visualize=False))
run("launches", lambda: ta.get_cuda_kernel_launch_stats(visualize=False))
run("bandwidth", lambda: (ta.get_memory_bw_summary(ranks=[0]), ta.get_memory_bw_time_series(ranks=[0])))
def queues():
    series = ta.get_queue_length_time_series(ranks=[0])
    ta.get_queue_length_summary(ranks=[0])
    ta.get_time_spent_blocked_on_full_queue(series)
run("queues", queues)
run("annotations", lambda: ta.get_gpu_user_annotation_breakdown(visualize=False, num_kernels=10**9, duration_ratio=1.0))
if sys.argv[2] == "1":
    run("critical_path", lambda: ta.critical_path_analysis(rank=0, annotation="", instance_id=None))
ta.get_profiler_steps()
print("FAILED", ",".join(failed))
"""
NEW_ANALYSES = ("critical_path", "roofline", "collectives", "queues", "bandwidth", "memory_timeline", "sequences",
                "annotations")
"""Modules of analyze/trace/ added for issue 41 (each timed alone by --all-new where present in the tree)."""
OURS_EACH = """
import importlib, sys, time
from stepscope.traces.kineto import read_trace
from stepscope.analyze.trace.analysis import analyze_trace
from stepscope.analyze.trace.gpuview import gpu_view
from stepscope.analyze.trace.ops import host_times
t0 = time.process_time(); t = read_trace(sys.argv[1]); t1 = time.process_time()
a = analyze_trace(t, **({"with_critical_path": True} if "with_critical_path" in
                        __import__("inspect").signature(analyze_trace).parameters else {})); t2 = time.process_time()
print(f"TIME read {t1 - t0:.3f}"); print(f"TIME analyze_trace {t2 - t1:.3f}")
g = gpu_view(t)
calls = {"critical_path": ("critical_path", lambda f: f(t, gpu=g)),
         "roofline": ("op_roofline", lambda f: f(t, host_times(t, g))),
         "collectives": ("rank_collectives", lambda f: f(t, g)), "queues": ("queue_lengths", lambda f: f(t)),
         "bandwidth": ("bandwidth", lambda f: f(t)), "memory_timeline": ("memory_timeline", lambda f: f(t)),
         "sequences": ("kernel_sequences", lambda f: f(t)), "annotations": ("gpu_annotations", lambda f: f(t))}
for mod in sys.argv[2].split(","):
    if mod not in calls:
        continue
    name, call = calls[mod]
    try:
        f = getattr(importlib.import_module("stepscope.analyze.trace." + mod), name)
    except (ImportError, AttributeError):
        continue
    s = time.process_time(); call(f); print(f"TIME {mod} {time.process_time() - s:.3f}")
"""
READ_ONLY = """
import sys
from stepscope.traces.kineto import read_trace
read_trace(sys.argv[1])
"""
BARE = """
import sys, gzip, orjson
p = sys.argv[1]
data = gzip.open(p).read() if p.endswith('.gz') else open(p, 'rb').read()
orjson.loads(data)
"""
BARE_NOGC = "import gc; gc.disable()\n" + BARE


@dataclass(frozen=True)
class Run:
    """One child process: wall and CPU seconds, peak RSS in MB (the largest of it and its children)."""

    wall: float
    cpu: float
    rss_mb: float


@dataclass(frozen=True)
class Tool:
    name: str
    python: str
    code: str
    extra: tuple[str, ...] = ()
    reader: str = "auto"
    """stepscope's trace reader in the child (``STEPSCOPE_TRACE_READER``)."""


SOURCES = {
    "v100": ("V100, 1 rank (PyTorch 1.x)", "v100_1rank/rank0.json.gz"),
    "nccl2": ("A100, NCCL 2-rank", "a100_2rank_nccl/rank0.json.gz"),
    "diff8": ("A100, 8-rank diff (test rank 3)", "a100_8rank_diff/test_rank3.json.gz"),
    "mi250": ("MI250, ROCm", "mi250_1rank/rank0.json.gz"),
    "alexnet": ("A100, AlexNet", "a100_alexnet/rank0.json.gz"),
    "cpu": ("CPU only", "cpu_only/rank34.json.gz"),
}
"""Fixtures the --by-source table repeats: key -> (label, path under tests/data/traces)."""


def synthesize(target: int, out: Path, rank: int = 0, fixture: Path | None = None) -> int:
    """Write a trace of >= target events (X, s, f) built from the fixture; returns the event count."""
    doc = orjson.loads(gzip.decompress((fixture or FIXTURE).read_bytes()))
    base = [e for e in doc["traceEvents"] if e.get("ph") in ("X", "s", "f")]
    span = max(e["ts"] + e.get("dur", 0) for e in base) - min(e["ts"] for e in base) + 1000.0
    reps = max(1, -(-target // len(base)))
    head = {k: v for k, v in doc.items() if k != "traceEvents"}
    head["distributedInfo"] = dict(head.get("distributedInfo") or {}, rank=rank)
    with_args = [(e, e.get("args")) for e in base]
    with out.open("wb") as f:
        f.write(orjson.dumps(head)[:-1] + b', "traceEvents": [\n')
        for r in range(reps):
            shift, ids = r * span, r * 10_000_000
            chunk = []
            for e, a in with_args:
                c = dict(e, ts=e["ts"] + shift)
                if a is not None and ("correlation" in a or "External id" in a):
                    a = dict(a)
                    for key in ("correlation", "External id"):
                        if key in a:
                            a[key] += ids
                    c["args"] = a
                if "id" in c:
                    c["id"] += ids
                chunk.append(c)
            f.write((b",\n" if r else b"") + orjson.dumps(chunk)[1:-1].replace(b"},{", b"},\n{"))
        f.write(b"\n]}\n")
    return reps * len(base)


def cached(workdir: Path, name: str, target: int, rank: int = 0, fixture: Path | None = None) -> tuple[Path, int]:
    path = workdir / f"{name}_{target}.json"
    count = workdir / f"{name}_{target}.count"
    if not (path.exists() and count.exists()):
        t0 = time.perf_counter()
        # in a child: ru_maxrss survives fork + exec on Linux, so a parent grown by synthesis would set
        # the floor of every later child's peak RSS
        code = ("import sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]); import trace_analysis as b; "
                "print(b.synthesize(int(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]), "
                "Path(sys.argv[5]) if sys.argv[5] else None))")
        out = subprocess.run([sys.executable, "-c", code, str(Path(__file__).parent), str(target), str(path), str(rank),
                              str(fixture or "")], check=True, capture_output=True, text=True).stdout
        count.write_text(out.strip())
        print(f"  (wrote {path.name}: {path.stat().st_size / 1e6:.0f} MB in {time.perf_counter() - t0:.0f} s)")
    return path, int(count.read_text())


def rank_folder(src: Path, folder: Path, ranks: int) -> Path:
    """Copies of a synthetic trace as ranks 0..n-1 (distributedInfo patched in the header)."""
    folder.mkdir(exist_ok=True)
    head = src.open("rb").read(1 << 16)
    for r in range(ranks):
        dst = folder / f"rank{r}.json"
        if dst.exists():
            continue
        new_head = re.sub(rb'("distributedInfo":\{[^}]*?"rank":)\d+', rb"\g<1>%d" % r, head, count=1)
        with src.open("rb") as fi, dst.open("wb") as fo:
            fi.seek(len(head))
            fo.write(new_head)
            shutil.copyfileobj(fi, fo, 1 << 20)
    return folder


def _children_cpu() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def measure(tool: Tool, path: Path, timeout: int) -> Run | None:
    """Run one tool in a child; CPU time includes the child's own workers (they are waited for)."""
    env = {"PYTHONPATH": str(ROOT / "src"), "HTA_DISABLE_NS_ROUNDING": "1", "PATH": "/usr/bin:/bin",
           "STEPSCOPE_TRACE_READER": tool.reader}
    probe = "\nimport resource as _r; print('RSS', max(_r.getrusage(_r.RUSAGE_SELF).ru_maxrss, " \
        "_r.getrusage(_r.RUSAGE_CHILDREN).ru_maxrss))"
    cpu0, t0 = _children_cpu(), time.perf_counter()
    proc = subprocess.Popen([tool.python, "-c", tool.code + probe, str(path), *tool.extra], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        print(f"    {tool.name}: timed out after {timeout} s", file=sys.stderr)
        return None
    wall, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
    if proc.returncode != 0:
        tail = err.decode(errors="replace").strip().splitlines()[-1:] or ["?"]
        print(f"    {tool.name}: failed (exit {proc.returncode}: {tail[0]})", file=sys.stderr)
        return None
    rss = max([float(m) for m in re.findall(rb"^RSS (\d+)", out, re.M)] or [0.0])
    return Run(wall, cpu, rss / 1024.0)


Runs = dict[str, list["Run | None"]]


def compare(label: str, path: Path, tools: list[Tool], repeats: int, timeout: int) -> Runs:
    """Run every tool ``repeats`` times, interleaved (order rotated each repeat); print medians."""
    size = path.stat().st_size / 1e6 if path.is_file() else sum(p.stat().st_size for p in path.iterdir()) / 1e6
    print(f"\n{label} ({size:,.0f} MB JSON), {repeats} interleaved repeats", flush=True)
    runs: Runs = {t.name: [] for t in tools}
    for r in range(repeats):
        for t in tools[r % len(tools):] + tools[:r % len(tools)]:
            runs[t.name].append(measure(t, path, timeout))
    print(f"  {'':24s} {'wall s':>8s} {'CPU s':>8s} {'peak RSS MB':>12s}   (medians)")
    for name, rs in runs.items():
        ok = [x for x in rs if x]
        if ok:
            print(f"  {name:24s} {med(x.wall for x in ok):8.2f} {med(x.cpu for x in ok):8.2f} "
                  f"{med(x.rss_mb for x in ok):12.0f}")
        else:
            print(f"  {name:24s}      n/a")
    return runs


def med(values: Iterable[float]) -> float:
    return float(statistics.median(list(values)))


def ok_runs(runs: Runs, name: str) -> list[Run]:
    return [x for x in runs.get(name, []) if x]


def ratio(runs: Runs, num: str, den: str, field: str) -> float | None:
    """Median over repeats of num/den, each from the two runs of the same repeat (side by side)."""
    pairs = [getattr(x, field) / getattr(y, field) for x, y in zip(runs.get(num, []), runs.get(den, []))
             if x and y and getattr(y, field) > 0]
    return med(pairs) if pairs else None


def verdicts(runs: Runs) -> None:
    def show(text: str, value: float | None, ok: bool | None) -> None:
        if value is not None:
            print(f"  {text:44s} {value:6.2f}  {'ok' if ok else 'MISSED'}")
    for field in ("wall", "cpu"):
        v = ratio(runs, "HTA", "stepscope", field)
        show(f"HTA / stepscope {field} (target >= 5)", v, v is not None and v >= 5)
    for floor in ("orjson.loads", "orjson.loads, gc off"):
        for field in ("wall", "cpu"):
            v = ratio(runs, "stepscope", floor, field)
            show(f"stepscope / {floor} {field} (target <= 2)", v, v is not None and v <= 2)
    v = ratio(runs, "stepscope", "HTA", "rss_mb")
    show("stepscope / HTA peak RSS (target <= 0.33)", v, v is not None and v <= 1 / 3)
    v = ratio(runs, "stepscope", "orjson.loads", "rss_mb")
    show("stepscope / orjson.loads peak RSS (info)", v, True)


def project_hta(hta_mid: list[Run], n_mid: int, ours_big: list[Run], n_big: int) -> None:
    """Say why HTA was not run on the big trace, and what it would need (linear in events)."""
    if not hta_mid:
        return
    scale = n_big / n_mid
    need_mb, need_cpu = med(x.rss_mb for x in hta_mid) * scale, med(x.cpu for x in hta_mid) * scale
    print(f"  HTA not run at {n_big:,} events: scaling its {n_mid:,}-event run, it would need at least "
          f"{need_mb / 1024:.1f} GB and {need_cpu:.0f} CPU s here (--hta-max-events {n_big} runs it); "
          f"HTA is compared at {n_mid:,} events above")
    if ours_big:
        print(f"  projected HTA / stepscope CPU {need_cpu / med(x.cpu for x in ours_big):.1f}, "
              f"stepscope / projected HTA peak RSS {med(x.rss_mb for x in ours_big) / need_mb:.2f}")


def by_source(args: argparse.Namespace, work: Path, hta: str | None) -> None:
    """One ~N-event trace per real fixture: stepscope (all analyses) vs GC-off orjson.loads vs HTA."""
    py = sys.executable
    ours, floor = Tool("stepscope", py, OURS_ALL, reader=args.reader), Tool("orjson.loads, gc off", py, BARE_NOGC)
    tools = [ours, floor] + ([Tool("HTA", hta, HTA_ALL)] if hta else [])
    if args.compare_readers:
        tools += [Tool("read, c", py, READ_ONLY, reader="c"), Tool("read, python", py, READ_ONLY, reader="python")]
        if args.reader != "python":
            tools.append(Tool("read+analyze, python", py, OURS_ALL, reader="python"))
    readers: list[tuple[str, ...]] = []
    if args.baseline_src:  # the same analyses from another source tree (e.g. a checkout of main): before/after
        tools.insert(1, Tool("baseline", py, f"import sys; sys.path.insert(0, {str(args.baseline_src)!r})\n"
                                             + OURS_ALL))
    rows = []
    for key in args.sources.split(","):
        label, rel = SOURCES[key]
        path, n = cached(work, f"src_{key}", args.source_events, fixture=ROOT / "tests" / "data" / "traces" / rel)
        runs = compare(f"{label}: {n:,} events", path, tools, args.repeats, args.timeout)
        size = path.stat().st_size / 1e6
        o, f, h = (ok_runs(runs, t) for t in ("stepscope", "orjson.loads, gc off", "HTA"))
        def fmt(v: float | None, spec: str = ".2f") -> str:
            return "n/a" if v is None else format(v, spec)
        rows.append((label, f"{n / 1e6:.2f}M", f"{size:.0f}",
                     fmt(med(x.wall for x in o) if o else None, ".1f"), fmt(med(x.rss_mb for x in o) if o else None,
                                                                            ".0f"),
                     fmt(med(x.wall for x in f) if f else None, ".1f"),
                     fmt(ratio(runs, "stepscope", "orjson.loads, gc off", "wall")),
                     fmt(ratio(runs, "stepscope", "orjson.loads, gc off", "cpu")),
                     fmt(med(x.wall for x in h) if h else None, ".1f"), fmt(med(x.rss_mb for x in h) if h else None,
                                                                            ".0f"),
                     fmt(ratio(runs, "HTA", "stepscope", "wall"), ".1f"), fmt(ratio(runs, "HTA", "stepscope", "cpu"),
                                                                              ".1f"),
                     fmt(ratio(runs, "stepscope", "HTA", "rss_mb"))))
        if args.compare_readers:
            readers.append(_reader_row(label, runs, args.reader))
        b = ok_runs(runs, "baseline")
        if b:
            print(f"  baseline: CPU {med(x.cpu for x in b):.2f} s, wall {med(x.wall for x in b):.2f} s, "
                  f"{med(x.rss_mb for x in b):.0f} MB; baseline / stepscope CPU "
                  f"{fmt(ratio(runs, 'baseline', 'stepscope', 'cpu'))}, wall "
                  f"{fmt(ratio(runs, 'baseline', 'stepscope', 'wall'))}; baseline / orjson CPU "
                  f"{fmt(ratio(runs, 'baseline', 'orjson.loads, gc off', 'cpu'))}")
    head = ("source", "events", "MB", "stepscope s", "stepscope MB", "orjson s", "÷ orjson wall", "÷ orjson CPU",
            "HTA s", "HTA MB", "HTA ÷ us wall", "HTA ÷ us CPU", "RSS ÷ HTA")
    print("\n| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for r in rows:
        print("| " + " | ".join(r) + " |")
    print("(targets: ÷ orjson <= 1.5, HTA ÷ us >= 15, RSS ÷ HTA <= 0.2; wall/CPU ratios are medians of runs made "
          "side by side)")
    if readers:
        rhead = ("source", "orjson CPU s", "read C", "read Python", "read+analyze C", "read+analyze Python",
                "read C ÷ orjson", "read Python ÷ orjson", "all C ÷ orjson", "all Python ÷ orjson")
        print("\nCPU seconds by reader (medians; ratios: medians of side-by-side runs)\n| " + " | ".join(rhead)
              + " |\n|" + "---|" * len(rhead))
        for line in readers:
            print("| " + " | ".join(line) + " |")


def _reader_row(label: str, runs: Runs, reader: str) -> tuple[str, ...]:
    """CPU seconds of read-only and read+analyze with each reader, and their ratios to GC-off orjson.loads."""
    floor = "orjson.loads, gc off"
    all_c = "stepscope" if reader != "python" else None
    all_py = "read+analyze, python" if reader != "python" else "stepscope"

    def cpu(name: str | None) -> str:
        rs = ok_runs(runs, name) if name else []
        return f"{med(x.cpu for x in rs):.2f}" if rs else "n/a"

    def over(name: str | None) -> str:
        v = ratio(runs, name, floor, "cpu") if name else None
        return "n/a" if v is None else f"{v:.2f}"

    return (label, cpu(floor), cpu("read, c"), cpu("read, python"), cpu(all_c), cpu(all_py),
            over("read, c"), over("read, python"), over(all_c), over(all_py))


def all_new(args: argparse.Namespace, work: Path, hta: str | None) -> None:
    """stepscope's ``analyze_trace`` (every analysis in the tree, the issue-41 ones included) against HTA's load and
    the analyses it has of those, on synthetic traces of each --sizes; then each new analysis timed alone."""
    py = sys.executable
    present = [m for m in NEW_ANALYSES if (ROOT / "src" / "stepscope" / "analyze" / "trace" / f"{m}.py").exists()]
    print(f"new analyses in the tree: {', '.join(present) or 'none'}")
    rows = []
    for n in (int(x) for x in args.sizes.split(",")):
        path, events = cached(work, "synthetic", n)
        cp = "1" if events <= args.hta_cp_max_events else "0"
        tools = [Tool("stepscope", py, OURS_NEW, reader=args.reader)]  # the critical path too where it is opt-in
        if hta:
            tools.append(Tool("HTA", hta, HTA_NEW, (cp,)))
        runs = compare(f"all analyses, synthetic {events:,} events (HTA critical path: {'on' if cp == '1' else 'off'})",
                       path, tools, args.repeats, args.timeout)
        o, h = ok_runs(runs, "stepscope"), ok_runs(runs, "HTA")

        def fmt(v: float | None, spec: str = ".2f") -> str:
            return "n/a" if v is None else format(v, spec)
        rows.append((f"{events:,}", fmt(med(x.cpu for x in o) if o else None, ".1f"),
                     fmt(med(x.rss_mb for x in o) if o else None, ".0f"),
                     fmt(med(x.cpu for x in h) if h else None, ".1f"),
                     fmt(med(x.rss_mb for x in h) if h else None, ".0f"),
                     "on" if cp == "1" else "off", fmt(ratio(runs, "HTA", "stepscope", "cpu"), ".1f"),
                     fmt(ratio(runs, "HTA", "stepscope", "wall"), ".1f"),
                     fmt(ratio(runs, "stepscope", "HTA", "rss_mb"))))
        out = subprocess.run([py, "-c", OURS_EACH, str(path), ",".join(present)], cwd=ROOT, capture_output=True,
                             text=True, env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin",
                                             "STEPSCOPE_TRACE_READER": args.reader})
        times = dict(re.findall(r"^TIME (\S+) ([\d.]+)$", out.stdout, re.M))
        print("  stepscope CPU s by part (one run): " + ", ".join(f"{k} {v}" for k, v in times.items())
              if times else f"  (per-analysis timing failed: {out.stderr.strip().splitlines()[-1:]})")
    head = ("events", "stepscope CPU s", "stepscope MB", "HTA CPU s", "HTA MB", "HTA critical path", "HTA ÷ us CPU",
            "HTA ÷ us wall", "RSS ÷ HTA")
    print("\n| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for r in rows:
        print("| " + " | ".join(r) + " |")
    print("(targets: HTA ÷ us >= 15, RSS ÷ HTA <= 0.2; ratios are medians of runs made side by side)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=5_000_000, help="size of the big synthetic trace")
    ap.add_argument("--hta-events", type=int, default=1_000_000, help="size of the trace HTA also runs on")
    ap.add_argument("--hta-max-events", type=int, default=1_000_000,
                    help="run HTA on the big trace only up to this size (measured here: 1.2 GB and 38 CPU s "
                         "at 1M events, 5.7 GB and 321 CPU s at 5M)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--ranks", type=int, default=4, help="ranks in the multi-rank memory case (0: skip)")
    ap.add_argument("--quick", action="store_true", help="small sizes, 3 repeats: a few minutes")
    ap.add_argument("--by-source", action="store_true", help="only the per-source table (see above)")
    ap.add_argument("--sources", default=",".join(SOURCES), help="comma-separated keys of SOURCES")
    ap.add_argument("--source-events", type=int, default=1_000_000,
                    help="events per --by-source trace (smaller for a quick run)")
    ap.add_argument("--baseline-src", type=Path, default=None,
                    help="--by-source: also run stepscope from this src folder (before/after, interleaved)")
    ap.add_argument("--no-hta", action="store_true", help="leave HTA out even where it is installed")
    ap.add_argument("--reader", choices=("auto", "c", "python"), default="auto",
                    help="stepscope's trace reader: compiled (c), pure Python, or auto (compiled where built)")
    ap.add_argument("--compare-readers", action="store_true",
                    help="--by-source: also read-only with each reader and read+analyze with the Python one")
    ap.add_argument("--hta-python", default=None,
                    help="Python with HTA installed (default: this one if it imports hta, else /tmp/hta-venv)")
    ap.add_argument("--all-new", action="store_true",
                    help="only the all-analyses table: analyze_trace (the issue-41 analyses included) against HTA's "
                         "load + temporal, idle, kernels, overlap, launches, bandwidth, queues, annotations and, up "
                         "to --hta-cp-max-events, its critical path; at each of --sizes")
    ap.add_argument("--sizes", default="100000,1000000,3000000", help="--all-new: synthetic trace sizes")
    ap.add_argument("--hta-cp-max-events", type=int, default=1_100_000,
                    help="--all-new: run HTA's critical_path_analysis only up to this many events (its graph's "
                         "memory grows past what a shared machine has)")
    ap.add_argument("--workdir", type=Path, help="keep synthetic traces here and reuse them")
    ap.add_argument("--timeout", type=int, default=3600)
    args = ap.parse_args()
    if args.quick:
        args.events, args.hta_events, args.ranks = 1_000_000, 250_000, min(args.ranks, 4)
    if not FIXTURE.exists():
        print(f"fixture {FIXTURE} not found", file=sys.stderr)
        return 1
    if args.hta_python is None:
        has = subprocess.run([sys.executable, "-c", "import hta"], capture_output=True).returncode == 0
        args.hta_python = sys.executable if has else "/tmp/hta-venv/bin/python"
    hta = args.hta_python if Path(args.hta_python).exists() and not args.no_hta else None
    if hta is None and not args.no_hta:
        print(f"HTA not found at {args.hta_python}: HTA columns are n/a (pip install HolisticTraceAnalysis)")
    py = sys.executable
    ours, bare, nogc = (Tool("stepscope", py, OURS, reader=args.reader), Tool("orjson.loads", py, BARE),
                        Tool("orjson.loads, gc off", py, BARE_NOGC))
    with_hta = [ours, bare, nogc] + ([Tool("HTA", hta, HTA)] if hta else [])
    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as tmp:
        work = args.workdir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        if args.by_source:
            by_source(args, work, hta)
            return 0
        if args.all_new:
            all_new(args, work, hta)
            return 0
        verdicts(compare("fixture v100_1rank", FIXTURE, with_hta, args.repeats, args.timeout))
        mid, n_mid = cached(work, "synthetic", args.hta_events)
        mid_runs = compare(f"synthetic {n_mid:,} events", mid, with_hta, args.repeats, args.timeout)
        verdicts(mid_runs)
        big, n_big = cached(work, "synthetic", args.events)
        big_tools = [ours, bare]
        if hta and n_big <= args.hta_max_events:
            big_tools.append(Tool("HTA", hta, HTA))
        big_runs = compare(f"synthetic {n_big:,} events", big, big_tools, args.repeats, args.timeout)
        verdicts(big_runs)
        if hta and n_big > args.hta_max_events:
            project_hta(ok_runs(mid_runs, "HTA"), n_mid, ok_runs(big_runs, "stepscope"), n_big)
        if args.ranks > 0:
            folder = rank_folder(mid, work / f"ranks_{n_mid}", args.ranks)
            one = folder / "rank0.json"
            tools = [Tool("all analyses, 1 rank", py, OURS_SET, ("1", "1"), args.reader),
                     Tool(f"all analyses, {args.ranks} ranks", py, OURS_SET, ("1", str(args.ranks)), args.reader),
                     Tool(f"{args.ranks} ranks, 2 workers", py, OURS_SET, ("2", str(args.ranks)), args.reader)]
            print(f"\nmulti-rank: analyze_traceset on 1 and {args.ranks} ranks of {n_mid:,} events "
                  "(peak RSS: the largest process)")
            multi: Runs = {}
            for t in tools:
                multi.update(compare(t.name, one if t.extra[1] == "1" else folder, [t], args.repeats, args.timeout))
            base = ok_runs(multi, tools[0].name)
            for t in tools[1:]:
                rs = ok_runs(multi, t.name)
                if base and rs:
                    print(f"  {t.name}: peak RSS {med(x.rss_mb for x in rs) / med(x.rss_mb for x in base):.2f}x "
                          f"that of 1 rank (flat, not {args.ranks}x), CPU "
                          f"{med(x.cpu for x in rs) / med(x.cpu for x in base):.2f}x, wall "
                          f"{med(x.wall for x in rs) / med(x.wall for x in base):.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
