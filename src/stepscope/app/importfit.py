"""Does a trace recorded elsewhere fit the run it is being attached to (``stepscope import``)?

A trace that does not fit (another job's world size, a rank the run does not have, GPU work on a run that saw
no GPU, another GPU model, or wall-clock timestamps outside the run) would have its figures read as the run's:
its idle time turned into advice for a run that never had a GPU. ``misfits`` names each mismatch in words;
the import refuses them unless the user accepts them explicitly, and the note stored beside the trace says so
to every later reader.
"""

from __future__ import annotations

from pathlib import Path

from stepscope.model.events import EventTable
from stepscope.model.run import Run

EPOCH_NS_MIN = 10**18
"""Timestamps at or past this many ns are wall-clock (after September 2001); below it they count from a
process-local origin (a monotonic clock) and cannot be placed against the run's wall-clock window."""
TIME_SLACK_NS = 60 * 10**9
"""Clock skew allowed between the profiled host and the run's record (one minute)."""
NOTE_SUFFIX = ".misfit.txt"
"""Stored beside an accepted misfit trace: ``rank<R>.misfit.txt`` holds the note."""


def _run_gpus(run: Run) -> list[str]:
    names = [g.name for g in run.host.gpus]
    names += [g.name for s in run.streams for g in s.gpus]
    return [n for n in names if n]


def _same_model(a: str, b: str) -> bool:
    x, y = a.lower().replace("nvidia", "").strip(), b.lower().replace("nvidia", "").strip()
    return bool(x) and bool(y) and (x in y or y in x)


def misfits(run: Run, table: EventTable, rank: int) -> list[str]:
    """What about this trace (attached as ``rank``) contradicts the run; empty when it fits."""
    meta, out = table.meta, []
    if meta.world_size is not None and meta.world_size != run.world_size:
        out.append(f"the trace's job had world size {meta.world_size}, the run {run.world_size}")
    if rank >= run.world_size:
        out.append(f"rank {rank} is not a rank of the run (0 to {run.world_size - 1})")
    gpus = _run_gpus(run)
    if table.has_gpu and not gpus:
        out.append("the trace has GPU work, the run saw no GPU")
    elif gpus and meta.devices:
        theirs = sorted({d.name for d in meta.devices if d.name})
        if theirs and not any(_same_model(t, g) for t in theirs for g in gpus):
            out.append(f"the trace ran on {', '.join(theirs)}, the run on {', '.join(sorted(set(gpus)))}")
    ts = table["ts_ns"]
    if ts.size and int(ts.min()) >= EPOCH_NS_MIN:
        first, last = int(ts.min()), int(table.end_ns.max())
        end = run.end_ns if run.end_ns is not None else max([run.start_ns, *(s.end_ns or s.start_ns
                                                                             for s in run.streams)])
        if last < run.start_ns - TIME_SLACK_NS:
            out.append(f"the trace's clock ends {_gap(run.start_ns - last)} before the run started")
        elif first > end + TIME_SLACK_NS:
            out.append(f"the trace's clock starts {_gap(first - end)} after the run ended")
    return out


def _gap(ns: int) -> str:
    return f"{ns / 86_400e9:.1f} days" if ns >= 86_400 * 10**9 else f"{ns / 1e9:,.0f} s"


def note_path(trace_path: Path) -> Path:
    """Where the note of an accepted misfit lives (beside ``rank<R>.json.gz``)."""
    return trace_path.with_name(trace_path.name.split(".")[0] + NOTE_SUFFIX)


def misfit_note(rank: int, source: str, reasons: list[str]) -> str:
    return (f"rank {rank}: imported from {source} although it does not fit the run ({'; '.join(reasons)}) — its "
            "figures describe that trace's job, not this run")
