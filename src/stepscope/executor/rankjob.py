"""One rank's job as a worker runs it: read the file, analyse it, keep only the small result, free the rest.

Reading a rank leaves the allocator holding its parse buffers (freed, but kept by glibc's heap rather than
returned to the system) while the analysis runs on top of them; after the rank the worker would keep them
too. :func:`release_memory` hands free heap memory back between the read and the analysis and after the
rank, so a worker's peak is the table plus the analysis' working set, and its resident size between ranks
drops back to about what it was before the first one (measured in ``benchmarks/trace_scale.py``).

A worker also fixes glibc's mmap threshold at its default 128 KiB (:func:`map_large_blocks`): glibc otherwise
raises the threshold to the size of each large block freed (up to 32 MiB), after which a rank's column-sized
arrays come from the heap, where a freed one is reused only by a block that fits its hole and is handed back
only by the next trim. Kept at 128 KiB, every column-sized array is its own mapping, returned to the system
the moment it is freed, so the resident size follows what is alive: one 107,732-event rank's peak growth goes
from 1.67x to 1.45x its table after the first rank (measured in a fresh process, results identical).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from functools import cache
from typing import Any

from stepscope.errors import TraceError
from stepscope.model.events import EventTable
from stepscope.traces.kineto import read_trace_partial
from stepscope.traces.traceset import RankJob, RankResult


@cache
def _libc_function(name: str) -> Any:
    """A C library function by name from this process' own symbols (None where absent or not loadable). The
    process' namespace (``dlopen(NULL)``) holds the C library it runs with: no ``ctypes.util.find_library``,
    which runs ``ldconfig`` in a child process (~10 ms of start-up)."""
    try:
        return getattr(ctypes.CDLL(None), name)
    except (OSError, AttributeError, TypeError):  # TypeError: Windows takes no None
        return None


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim`` (None elsewhere: musl, macOS, Windows)."""
    fn: Callable[[int], int] | None = _libc_function("malloc_trim")
    return fn


M_MMAP_THRESHOLD = -3
"""glibc's ``mallopt`` parameter (malloc.h)."""
MMAP_THRESHOLD_BYTES = 128 * 1024
"""glibc's default threshold; setting it explicitly turns off its dynamic raising."""


@cache
def map_large_blocks() -> bool:
    """Allocate blocks of 128 KiB and more as their own mappings in this process, from now on (glibc; elsewhere
    nothing is done). Once per process; True where it took effect."""
    mallopt = _libc_function("mallopt")
    return bool(mallopt and mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1)


def release_memory() -> None:
    """Return the heap's free pages to the operating system (glibc; a no-op elsewhere). Costs well under a
    millisecond; no garbage collection (a full one costs tens of ms, and the table holds no cycles)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def run_rank(job: RankJob, fn: Callable[[EventTable], Any]) -> RankResult:
    """Read the job's file (a truncated end tolerated, with a note) and return ``fn`` of its events; the
    table is dropped and memory released before returning, so only ``fn``'s result leaves the worker."""
    map_large_blocks()
    try:
        table, note = read_trace_partial(job.path, rank=job.given_rank)
    except TraceError as exc:
        release_memory()
        return RankResult(job.path, None, error=str(exc))
    try:
        release_memory()  # the read's freed parse buffers, before the analysis allocates its own
        rank = table.meta.rank
        return RankResult(job.path, rank, fn(table), note=note)
    except TraceError as exc:
        return RankResult(job.path, None, error=str(exc))
    finally:
        del table
        release_memory()
