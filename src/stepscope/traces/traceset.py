"""A set of per-rank traces (a folder, or files): find them, then load one rank at a time or in workers.

Ranks are mapped and reduced one by one, so a folder of many large ranks never needs more than one
rank's events in memory per worker. A bad file is reported by name while the others are still analysed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from stepscope.errors import TraceError
from stepscope.traces.kineto import RANK_IN_NAME, read_trace
from stepscope.traces.xla import profile_files

T = TypeVar("T")
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
class RankResult:
    """What one worker returns for one file: a value, or the one-line error that stopped it."""

    path: str
    rank: int | None
    value: Any = None
    error: str | None = None


def _run_one(job: tuple[str, int | None, Callable[[Any], Any]]) -> RankResult:
    path, given, fn = job
    try:
        table = read_trace(path, rank=given)
        return RankResult(path, table.meta.rank, fn(table))
    except TraceError as exc:
        return RankResult(path, None, error=str(exc))


def map_ranks(files: Sequence[Path], fn: Callable[[Any], T], *, workers: int = 1) -> Iterator[RankResult]:
    """Load each file and apply ``fn`` (a picklable top-level function for workers > 1) rank by rank.

    Results come back in file order; a file that fails yields a RankResult with ``error`` set.
    """
    jobs = [(str(f), i if len(files) > 1 else None, fn) for i, f in enumerate(files)]
    if workers <= 1 or len(files) <= 1:
        yield from map(_run_one, jobs)
        return
    with ProcessPoolExecutor(max_workers=workers) as pool:
        yield from pool.map(_run_one, jobs)


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
