"""Trace sets of many ranks: the local process pool vs a Dask LocalCluster, wall time and peak memory.

    .venv/bin/python benchmarks/trace_scale.py [--ranks 16 64 256] [--events 100000] [--workers 2]
        [--executors local dask] [--small] [--workdir DIR] [--discard] [--json FILE] [--table FILE]

Each rank is the A100 NCCL fixture (tests/data/traces/a100_2rank_nccl, 27k complete events) repeated
with shifted timestamps, ids and step numbers until it holds at least --events complete events
(--small: 5,000, for a quick run; below 27k, the fixture's first --events complete events). The ranks
of a set share those events and differ in their ``distributedInfo`` rank; each file is a multi-member
gzip (header + the shared, compressed-once events + trailer), so building 256 ranks costs a file copy each, and
the set takes a rank's compressed size per rank on disk (673,325 events: 200.7 MB of JSON, 24.6 MB compressed;
256 such ranks 6.3 GB). They cannot share one file through hard links: a rank is taken from its file's content
(``distributedInfo``) first, and files claiming the same rank are reported as duplicates, not analysed.
``--discard`` deletes each set once it is measured.

Every (set, executor) pair runs in a fresh child process, which maps over the ranks, on the executor, the
job ``stepscope trace analyze`` runs (``stepscope.executor.rankjob.run_rank``: read the rank, analyse it,
free the table), wrapped to measure it inside the worker: the worker's VmHWM is reset at the start of the
rank (/proc/self/clear_refs), so the peak read after it is this rank's alone, and its RSS just before the
rank is kept. Then the ranks are reduced with ``combine``. Recorded: wall time of the analysis (executor
start-up excluded and shown apart), the median CPU time of the thread that ran a rank (load-independent:
local pool and Dask compared on the job itself) and the 1-minute load average at the end; the client's peak RSS (the
child's VmHWM: with Dask this includes the LocalCluster's scheduler, which runs in the client process);
per worker its peak RSS, its growth (the highest per-rank peak minus its baseline, the RSS before its first
rank with imports and component rules loaded) and the largest growth of one rank over the RSS just before
it, and the same for the ranks after each worker's first (its steady state: the first rank of a process also
touches code pages and imports modules for good). By kind of memory (a second table): each worker's anonymous
growth (the highest peak of its anonymous memory, RssAnon, over its ranks, bounded above from samples of
/proc/self/status taken every millisecond or so while a rank runs (``AnonPeak``), minus its RssAnon before its
first rank: the RSS growth without the code pages faulted in, which are the page cache's and shared), what its
first rank left behind (anonymous memory; file-backed pages faulted in), and the pages it copied from its parent
on write (private dirty pages gained beyond the anonymous pages gained: a forked pool process's copies of the
parent's pages, which its RssAnon counted already; 0 for a Dask worker). One rank's table: the bytes of its
EventTable's column arrays (events and flows), the largest of the set. The projection for 4,096 ranks scales the
measured per-rank cost (wall x workers / ranks) and the client's memory per rank (growth from the smallest to the
largest set) linearly.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "data" / "traces" / "a100_2rank_nccl" / "rank0.json.gz"
ID_ARGS = ("correlation", "External id", "Ev Idx", "Record function id", "Sequence number")


def _repeated_events(min_events: int) -> tuple[bytes, int, dict[str, Any]]:
    doc = orjson.loads(gzip.decompress(FIXTURE.read_bytes()))
    events = doc.pop("traceEvents")
    xs = [e for e in events if e.get("ph") == "X"]
    span = max(e["ts"] + e.get("dur", 0) for e in xs) - min(e["ts"] for e in xs) + 1000
    if min_events < len(xs):  # a smaller rank: the fixture's first min_events complete events (and metadata)
        keep = {id(e) for e in xs[:min_events]}
        events = [e for e in events if e.get("ph") != "X" or id(e) in keep]
        xs = xs[:min_events]
    copies = max(1, math.ceil(min_events / len(xs)))
    out: list[Any] = []
    for c in range(copies):
        for e in events:
            if c and e.get("ph") == "M":
                continue
            e = dict(e)
            if "ts" in e:
                e["ts"] = e["ts"] + c * span
            name = e.get("name", "")
            if c and isinstance(name, str) and name.startswith("ProfilerStep#"):
                e["name"] = f"ProfilerStep#{int(name.split('#')[1]) + 100 * c}"
            args = e.get("args")
            if c and isinstance(args, dict):
                args = dict(args)
                for k in ID_ARGS:
                    if isinstance(args.get(k), int) and args[k] >= 0:
                        args[k] += c * 10_000_000
                e["args"] = args
            out.append(e)
    body = orjson.dumps(out)[1:-1]
    return body, copies * len(xs), doc


def build_set(folder: Path, ranks: int, min_events: int) -> int:
    """``ranks`` files in ``folder`` (reused when already there); returns the complete events per rank. The
    bytes of one rank's JSON (uncompressed) go to ``json_bytes.txt`` beside them (:func:`json_bytes`)."""
    stamp = folder / "events.txt"
    if stamp.exists() and len(list(folder.glob("rank*.json.gz"))) == ranks:
        return int(stamp.read_text())
    folder.mkdir(parents=True, exist_ok=True)
    body, n, header = _repeated_events(min_events)
    events_gz = gzip.compress(body, compresslevel=1)
    tail = gzip.compress(b"]}")
    for r in range(ranks):
        head = {**header, "distributedInfo": {**header["distributedInfo"], "rank": r, "world_size": ranks}}
        prefix = orjson.dumps(head)[:-1] + b',"traceEvents":['
        (folder / f"rank{r}.json.gz").write_bytes(gzip.compress(prefix) + events_gz + tail)
        if r == 0:
            (folder / "json_bytes.txt").write_text(str(len(prefix) + len(body) + 2))
    stamp.write_text(str(n))
    return n


def json_bytes(folder: Path) -> int | None:
    """The uncompressed bytes of a set's first rank (None for a set built before they were recorded)."""
    f = folder / "json_bytes.txt"
    return int(f.read_text()) if f.exists() else None


def disk_bytes(folder: Path) -> int:
    """What a set's files take on disk."""
    return sum(f.stat().st_blocks * 512 for f in folder.iterdir())


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _peak_rss_bytes() -> int:
    """This process's RSS high-water mark (VmHWM: unlike ru_maxrss, not carried over from the parent that
    forked and exec'd it)."""
    return _status()["VmHWM"]


def _status() -> dict[str, int]:
    """This process's peak RSS and its resident anonymous, file-backed and shared-memory pages (bytes)."""
    out = {}
    with open("/proc/self/status", "rb") as f:
        for line in f:
            if line.startswith((b"VmHWM:", b"RssAnon:", b"RssFile:", b"RssShmem:")):
                key, value = line.split(b":")
                out[key.decode()] = int(value.split()[0]) * 1024
    return out


def _private_dirty() -> int:
    """This process's private dirty pages (bytes, /proc/self/smaps_rollup): its own anonymous pages, including
    those it copied from its parent on write, which RssAnon counted already while they were shared."""
    with open("/proc/self/smaps_rollup", "rb") as f:
        line = next(x for x in f if x.startswith(b"Private_Dirty:"))
    return int(line.split()[1]) * 1024


class AnonPeak(threading.Thread):
    """An upper bound on this process's peak of anonymous memory (RssAnon) while it runs, from samples of
    /proc/self/status every millisecond or so (as often as the GIL lets this thread run).

    The kernel keeps a high-water mark of the whole RSS only (VmHWM: anonymous + file-backed + shared memory).
    Between two samples, at any moment the RSS is at most the later sample's VmHWM, and the file-backed and
    shared pages at least the earlier sample's (they are only faulted in while a rank runs: code pages touched
    for the first time; none were dropped, which ``bound`` checks), so the anonymous memory then is at most the
    later VmHWM minus the earlier RssFile + RssShmem. The bound is the largest of these over the samples: sound
    however far apart they are (sparser samples only loosen it); where no page was faulted in, it is exact.
    A page can also move the other way, from file-backed to anonymous (a library's data page written for the first
    time): the smaller of the two samples' file-backed pages is used, which covers one such move between them."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self._done = threading.Event()
        self.samples = [_status()]

    def run(self) -> None:
        while not self._done.wait(0.001):
            self.samples.append(_status())

    def bound(self) -> int:
        """Stop sampling; the bound in bytes."""
        self._done.set()
        self.join()
        self.samples.append(_status())
        return max(b["VmHWM"] - min(a["RssFile"] + a["RssShmem"], b["RssFile"] + b["RssShmem"])
                   for a, b in itertools.pairwise(self.samples))


def _reset_peak() -> None:
    """Start VmHWM afresh at the current RSS (Linux: ``5`` to /proc/self/clear_refs), so the peak read after
    a rank is that rank's."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def table_bytes(table: Any) -> int:
    """One rank's table: the bytes of its column arrays (events, and the CPU->GPU flow pairs)."""
    return sum(a.nbytes for a in table.cols.values()) + sum(a.nbytes for a in table.flows.values())


def _analyse_and_size(table: Any) -> dict[str, Any]:
    from stepscope.analyze.trace.analysis import analyze_trace

    return {"analysis": analyze_trace(table), "table_bytes": table_bytes(table)}


def measured_rank(job: Any) -> tuple[Any, dict[str, int]]:
    """One rank's job as ``trace analyze`` runs it (``run_rank``: read, analyse, free), measured in the worker:
    its RSS and anonymous memory just before, its peak RSS during this rank alone (VmHWM reset at the start),
    the peak of its anonymous memory (bounded above by :class:`AnonPeak`), the file-backed pages it faulted in
    and the CPU time of the thread that ran it (what the job itself cost, whatever else the machine was doing)."""
    from stepscope.executor.rankjob import run_rank

    dirty_before = _private_dirty()
    _reset_peak()
    before, cpu = _rss_bytes(), time.thread_time()
    anon = AnonPeak()
    anon.start()
    result = run_rank(job, _analyse_and_size)
    cpu_ns = int(1e9 * (time.thread_time() - cpu))
    anon_peak, first, last = anon.bound(), anon.samples[0], anon.samples[-1]
    nth = next(_RANKS_HERE)
    return result, {"pid": os.getpid(), "rss_before": before, "peak": last["VmHWM"], "cpu_ns": cpu_ns,
                    "nth": nth, "anon_before": first["RssAnon"], "anon_peak": anon_peak,
                    "anon_after": last["RssAnon"], "file_faulted": last["RssFile"] - first["RssFile"],
                    "dirty_before": dirty_before, "dirty_after": _private_dirty()}


_RANKS_HERE = itertools.count(1)
"""Numbers the ranks this process measures (a rank's ``nth``: 1 for the first one of its worker)."""


def _warm() -> None:
    """A worker's imports and component rules, as before its first rank (not counted as a rank's growth)."""
    from stepscope.analyze.trace.analysis import analyze_trace  # noqa: F401
    from stepscope.executor.rankjob import release_memory
    from stepscope.traces.components import ComponentRules

    ComponentRules.defaults()
    release_memory()


def worker_memory(mems: list[dict[str, int]]) -> list[dict[str, int]]:
    """Per worker: its peak RSS; its growth = the highest peak of any of its ranks minus its baseline (its RSS
    before its first rank, imports loaded: min of the RSS before each rank); the largest growth of one rank
    over the RSS just before that rank; its anonymous growth = the highest anonymous peak of any of its ranks
    minus its anonymous memory before its first rank; what its first rank left behind (anonymous memory, and
    file-backed pages faulted in: code touched for the first time), the most anonymous memory left after any rank;
    and the pages it copied from its parent on write (private dirty pages gained beyond the anonymous pages
    gained, from before its first rank to the end of each rank: the most of these; 0 for a process that shares
    no pages with a parent)."""
    by_pid: dict[int, list[dict[str, int]]] = {}
    for m in mems:
        by_pid.setdefault(m["pid"], []).append(m)
    out = []
    for ms in by_pid.values():
        peak, base = max(m["peak"] for m in ms), min(m["rss_before"] for m in ms)
        later = [m["peak"] - m["rss_before"] for m in ms if m.get("nth", 1) > 1]
        w = {"peak": peak, "growth": peak - base, "rank_growth": max(m["peak"] - m["rss_before"] for m in ms),
             "later_rank_growth": max(later, default=0), "ranks": len(ms)}
        if all("anon_peak" in m for m in ms):
            first = min(ms, key=lambda m: m["nth"])
            anon_base = first["anon_before"]
            w.update(anon_growth=max(m["anon_peak"] for m in ms) - anon_base,
                     first_anon_left=first["anon_after"] - anon_base,
                     anon_left=max(m["anon_after"] for m in ms) - anon_base,
                     first_file_faulted=first["file_faulted"],
                     copied=max((m["dirty_after"] - first["dirty_before"]) - (m["anon_after"] - anon_base)
                                for m in ms))
        out.append(w)
    return sorted(out, key=lambda w: w["peak"])


def run_one(folder: Path, executor: str, workers: int) -> dict[str, Any]:
    """One (set, executor) measurement, in this (child) process."""
    from stepscope.analyze.trace.multirank import combine
    from stepscope.executor.dask import DaskExecutor
    from stepscope.executor.local import LocalExecutor
    from stepscope.traces.traceset import mark_duplicate_ranks, rank_jobs, trace_files

    _warm()  # the local pool's workers are forked from this process
    t0 = time.perf_counter()
    ex: Any = DaskExecutor(local_workers=workers) if executor == "dask" else LocalExecutor(workers)
    if executor == "dask":
        ex.client.run(_warm)
    startup = time.perf_counter() - t0
    t1 = time.perf_counter()
    outcomes = ex.map(measured_rank, rank_jobs(trace_files([folder])))
    results = mark_duplicate_ranks([o.value[0] for o in outcomes if o.error is None])
    good = [r.value for r in results if r.error is None]
    s = combine([g["analysis"] for g in good], [r.error for r in results if r.error])
    wall = time.perf_counter() - t1
    ex.close()
    return {"ranks": len(s.ranks), "errors": len(s.errors) + sum(o.error is not None for o in outcomes),
            "wall_s": wall, "startup_s": startup, "client_peak": _peak_rss_bytes(), "load": os.getloadavg()[0],
            "workers": worker_memory([o.value[1] for o in outcomes if o.error is None]),
            "cpu_s": statistics.median(o.value[1]["cpu_ns"] / 1e9 for o in outcomes if o.error is None),
            "table_bytes": max(g["table_bytes"] for g in good)}


def _mb(b: float) -> str:
    return f"{b / 2**20:,.0f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, nargs="+", default=[16, 64, 256])
    ap.add_argument("--events", type=int, default=100_000, help="complete events per rank, at least")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--executors", nargs="+", choices=("local", "dask"), default=["local", "dask"])
    ap.add_argument("--small", action="store_true", help="5,000 events per rank, for a quick run")
    ap.add_argument("--workdir", type=Path, default=None,
                    help="where the sets are built (reused when already there); default: a new temporary folder")
    ap.add_argument("--discard", action="store_true",
                    help="delete each set once it is measured (a set of large ranks takes GBs: see above)")
    ap.add_argument("--json", type=Path, default=None, help="append each measurement to this JSON-lines file")
    ap.add_argument("--table", type=Path, default=None, help="print the table of a --json file, run nothing")
    ap.add_argument("--one", nargs=3, metavar=("FOLDER", "EXECUTOR", "WORKERS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(run_one(Path(args.one[0]), args.one[1], int(args.one[2]))))
        return
    if args.table:
        print(table([json.loads(x) for x in args.table.read_text().splitlines() if x.strip()], args.workers))
        return
    events = 5_000 if args.small else args.events
    work = args.workdir or Path(tempfile.mkdtemp(prefix="trace_scale_"))
    rows = []
    for n in args.ranks:
        folder = work / f"ranks{n}_events{events}"
        per_rank = build_set(folder, n, events)
        size, disk = json_bytes(folder), disk_bytes(folder)
        print(f"{n} ranks x {per_rank:,} events: {(size or 0) / 1e6:,.1f} MB of JSON a rank, "
              f"{disk / 1e9:.2f} GB on disk in {folder}", file=sys.stderr)
        for executor in args.executors:
            proc = subprocess.run([sys.executable, __file__, "--one", str(folder), executor, str(args.workers)],
                                  capture_output=True, text=True, check=True)
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            r.update(set_ranks=n, events=per_rank, executor=executor, json_bytes=size, disk_bytes=disk)
            rows.append(r)
            print(f"{n} ranks x {per_rank:,} events, {executor}: {r['wall_s']:.1f} s, load {r['load']:.1f}",
                  file=sys.stderr)
            if args.json:
                with args.json.open("a") as f:
                    f.write(json.dumps(r) + "\n")
        if args.discard:
            shutil.rmtree(folder)
    print(table(rows, args.workers))


def _cpu(r: dict[str, Any]) -> str:
    return f"{r['cpu_s']:.2f}" if "cpu_s" in r else "—"


def _per_rank(ws: list[dict[str, Any]], table_bytes: int) -> str:
    """The largest growth of one rank over the RSS just before it, over the table: any rank (a worker's first
    included), then only the ranks after each worker's first (its steady state); "—" where not recorded."""
    if not all("later_rank_growth" in w for w in ws):
        return "—"
    first = max(w["rank_growth"] for w in ws) / table_bytes
    return f"{first:.2f}, {max(w['later_rank_growth'] for w in ws) / table_bytes:.2f}"


def _executor_name(row: dict[str, Any]) -> str:
    return "local pool" if row["executor"] == "local" else "Dask LocalCluster"


def _mbs(ws: list[dict[str, Any]], key: str) -> str:
    return " / ".join(f"{w[key] / 2**20:.1f}" for w in ws)


def kinds_table(rows: list[dict[str, Any]]) -> str:
    """Per worker, its growth by kind of memory (MB, over the table): the whole RSS (``worker growth``), anonymous
    memory (what the worker's own data takes: code pages not counted), and anonymous memory plus the pages it
    copied from its parent (what a forked worker adds to the machine's memory); what its first rank left behind."""
    lines = ["| ranks | events/rank | JSON MB/rank | executor | one rank's table MB | worker growth (RSS) MB | "
             "/ table | anonymous growth MB | "
             "/ table | copied from the parent MB | anonymous + copied / table | "
             "left by the first rank MB: anonymous, file-backed | anonymous left after any rank MB |",
             "|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        ws, t = r["workers"], r["table_bytes"]
        if not all("anon_growth" in w for w in ws):
            continue
        where = _executor_name(r)
        left = " / ".join(f"{w['first_anon_left'] / 2**20:.1f}, {w['first_file_faulted'] / 2**20:.1f}" for w in ws)
        size = f"{r['json_bytes'] / 1e6:,.1f}" if r.get("json_bytes") else "—"
        lines.append(f"| {r['set_ranks']} | {r['events']:,} | {size} | {where} | {t / 2**20:.1f} | "
                     f"{_mbs(ws, 'growth')} | "
                     f"{max(w['growth'] for w in ws) / t:.2f} | {_mbs(ws, 'anon_growth')} | "
                     f"{max(w['anon_growth'] for w in ws) / t:.2f} | {_mbs(ws, 'copied')} | "
                     f"{max(w['anon_growth'] + max(w['copied'], 0) for w in ws) / t:.2f} | {left} | "
                     f"{_mbs(ws, 'anon_left')} |")
    return "\n".join(lines)


def table(rows: list[dict[str, Any]], workers: int) -> str:
    lines = ["| ranks | events/rank | executor | wall s (start-up s) | worker-s per rank | task CPU s per rank | "
             "load | client peak MB | worker peak MB | worker growth MB | one-rank growth MB | one rank's table MB | "
             "growth / table | one-rank growth / table: any rank, later ranks |",
             "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        ws, t = r["workers"], r["table_bytes"]
        g = max(w["growth"] for w in ws)
        where = _executor_name(r)
        lines.append(f"| {r['set_ranks']} | {r['events']:,} | {where} | {r['wall_s']:.1f} ({r['startup_s']:.1f}) | "
                     f"{r['wall_s'] * workers / r['set_ranks']:.2f} | {_cpu(r)} | {r['load']:.1f} | "
                     f"{_mb(r['client_peak'])} | "
                     f"{' / '.join(_mb(w['peak']) for w in ws)} | {' / '.join(_mb(w['growth']) for w in ws)} | "
                     f"{_mb(max(w['rank_growth'] for w in ws))} | {t / 2**20:.1f} | {g / t:.2f} | {_per_rank(ws, t)} |")
    lines += ["", kinds_table(rows), ""]
    for executor in ("local", "dask"):
        mine = sorted((r for r in rows if r["executor"] == executor), key=lambda r: r["set_ranks"])
        if not mine:
            continue
        big, small = mine[-1], mine[0]
        per_rank_s = big["wall_s"] * workers / big["set_ranks"]
        per_rank_mem = ((big["client_peak"] - small["client_peak"]) / (big["set_ranks"] - small["set_ranks"])
                        if big is not small else 0.0)
        proj = ", ".join(f"{4096 * per_rank_s / w / 60:,.1f} min on {w}" for w in (2, 16, 64, 256))
        client = big["client_peak"] + max(per_rank_mem, 0.0) * (4096 - big["set_ranks"])
        lines.append(f"Projection, {executor}: 4,096 ranks of {big['events']:,} events need {proj} workers "
                     f"({per_rank_s:.2f} worker-s per rank); client memory ~{_mb(client)} MB "
                     f"({per_rank_mem / 1024:,.0f} KiB per rank result).")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
