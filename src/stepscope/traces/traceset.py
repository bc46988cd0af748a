"""A set of per-rank traces (a folder, or files): find them, and read one rank for a per-rank job.

The pools that run the jobs live in :mod:`stepscope.executor`; here is only what one job does: read a
rank's file and apply a function to its events, so a worker never holds more than one rank's table and
only the function's (small) result leaves it. A bad file becomes a one-line error naming it, while the
other ranks are still analysed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stepscope.errors import TraceError
from stepscope.model.events import EventTable
from stepscope.traces.kineto import RANK_IN_NAME, read_trace_partial
from stepscope.traces.xla import profile_files

TRACE_SUFFIXES = (".json", ".json.gz", ".pt.trace.json", ".pt.trace.json.gz")
_RANK_HEAD = re.compile(rb'"distributedInfo"\s*:\s*\{[^}]*?"rank"\s*:\s*(\d+)')


def trace_files(paths: Sequence[str | Path]) -> list[Path]:
    """Trace files named directly or found (non-recursively) in the given folders, sorted."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir() and (profile := profile_files(p)) is not None:
            out.extend(profile)  # a TensorFlow / JAX profiler log dir
        elif p.is_dir():
            out.extend(sorted(f for f in p.iterdir() if f.is_file() and f.name.endswith((".json", ".json.gz"))))
        elif p.is_file():
            out.append(p)
        else:
            raise TraceError(f"{p}: no such file or folder — give trace files or a folder of them")
    if not out:
        raise TraceError(f"{', '.join(map(str, paths))}: no .json or .json.gz traces (nor a TensorFlow/JAX "
                         "profile with .xplane.pb files) found — check the path")
    return out


@dataclass(frozen=True, slots=True)
class RankJob:
    """One file to read: its path, and the rank to use when neither the file nor its name tells one."""

    path: str
    given_rank: int | None


def rank_jobs(files: Sequence[Path]) -> list[RankJob]:
    """One job per file, in file order (a file's position is its fallback rank when there are several)."""
    return [RankJob(str(f), i if len(files) > 1 else None) for i, f in enumerate(files)]


@dataclass(frozen=True, slots=True)
class RankResult:
    """What one job returns for one file: a value, or the one-line error that stopped it.

    note: set when the value was computed from part of the file (a trace truncated mid-write: its events
    up to the last whole one).
    """

    path: str
    rank: int | None
    value: Any = None
    error: str | None = None
    note: str | None = None


def run_rank_job(job: RankJob, fn: Callable[[EventTable], Any]) -> RankResult:
    """Read the job's file (tolerating a truncated end) and apply ``fn`` to its events."""
    try:
        table, note = read_trace_partial(job.path, rank=job.given_rank)
        return RankResult(job.path, table.meta.rank, fn(table), note=note)
    except TraceError as exc:
        return RankResult(job.path, None, error=str(exc))


def mark_duplicate_ranks(results: list[RankResult]) -> list[RankResult]:
    """Second and later files claiming an already seen rank become errors naming both files."""
    seen: dict[int, str] = {}
    out = []
    for r in results:
        rank = r.rank
        if r.error is None and rank is not None:
            if rank in seen:
                r = RankResult(r.path, rank, error=f"{r.path}: rank {rank} already read from {seen[rank]} "
                               "— keep one trace per rank in the folder")
            else:
                seen[rank] = r.path
        out.append(r)
    return out


def rank_hint(path: Path) -> int | None:
    """Rank from the file name (used before reading, e.g. to order files)."""
    m = RANK_IN_NAME.search(path.name)
    return int(m.group(1)) if m else None
