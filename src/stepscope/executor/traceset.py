"""Read and analyse a set of per-rank traces on any executor (local pool by default, or Dask).

Each rank is one job (:func:`stepscope.executor.rankjob.run_rank`): read its file and analyse it where the
job runs, so only the small per-rank result (a :class:`TraceAnalysis`, or a :class:`RankComm`) travels
back, never an event table, and the worker frees the table before its next rank. The pure reductions
(:func:`stepscope.analyze.trace.multirank.combine`, :func:`stepscope.analyze.trace.comm.comm_matrix`) then
run here. A rank that fails, or whose worker is lost, is named in the result's errors; the rest are analysed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from functools import partial
from pathlib import Path
from typing import Any

from stepscope.analyze.ranks.commmatrix import CommMatrix
from stepscope.analyze.trace.analysis import TraceAnalysis, analyze_trace
from stepscope.analyze.trace.comm import RankComm, comm_matrix, trace_comm_calls
from stepscope.analyze.trace.multirank import TraceSetAnalysis, combine
from stepscope.errors import TraceError
from stepscope.executor.base import Executor, OnDone
from stepscope.executor.local import LocalExecutor
from stepscope.executor.rankjob import run_rank
from stepscope.model.events import EventTable
from stepscope.traces.traceset import RankResult, mark_duplicate_ranks, rank_jobs, trace_files


def _analyze(table: EventTable) -> TraceAnalysis:
    return analyze_trace(table)


def map_trace_set(paths: Sequence[str | Path], fn: Callable[[EventTable], Any], *, executor: Executor,
                  label: str, progress: bool = False) -> list[RankResult]:
    """Apply ``fn`` (picklable, top-level) to each rank's events on ``executor``; one result per file, in file
    order, duplicate ranks and lost workers turned into errors naming the file.

    Raises:
        TraceError: no trace files found.
    """
    files = trace_files(paths)
    jobs = rank_jobs(files)
    with _progress(len(jobs), label, progress) as on_done:
        outcomes = executor.map(partial(run_rank, fn=fn), jobs, on_done=on_done)
    results: list[RankResult] = [
        o.value if o.error is None and isinstance(o.value, RankResult) else
        RankResult(j.path, None, error=f"{j.path}: {o.error or 'no result'}")
        for j, o in zip(jobs, outcomes, strict=True)]
    return mark_duplicate_ranks(results)


@contextmanager
def _progress(total: int, label: str, shown: bool) -> Iterator[OnDone | None]:
    if not shown:
        yield None
        return
    from stepscope.report.progress import progress

    with progress(total, label) as bar:
        yield lambda: bar.advance()


def _split(results: list[RankResult], files: int) -> tuple[list[Any], list[str], list[str]]:
    good = [r.value for r in results if r.error is None]
    errors = [r.error for r in results if r.error is not None]
    if not good:
        raise TraceError(errors[0] if len(errors) == 1 else f"none of {files} traces could be read; first: "
                         f"{errors[0]}")
    return good, errors, [r.note for r in results if r.error is None and r.note]


def analyze_traceset(paths: Sequence[str | Path], *, workers: int | None = None, executor: Executor | None = None,
                     progress: bool = False, options: Mapping[str, Any] | None = None) -> TraceSetAnalysis:
    """Analyse every trace in the given files / folders, one rank per job.

    Args:
        paths: trace files, or folders of them (not recursive).
        workers: processes of the default local pool (1: in this process; None: half the CPUs). Ignored
            when ``executor`` is given.
        executor: where the jobs run (:func:`stepscope.executor.executor_for`); the caller closes it.
        progress: show a progress bar on stderr (a terminal only), advanced per rank finished.
        options: keyword options of :func:`analyze_trace` (kernel-sequence lengths), the same for every rank.

    Raises:
        TraceError: no trace files found, or none of them could be analysed.
    """
    with nullcontext(executor) if executor is not None else _closing(LocalExecutor(workers)) as ex:
        fn = partial(analyze_trace, **options) if options else _analyze
        results = map_trace_set(paths, fn, executor=ex, label="analysing ranks", progress=progress)
    good, errors, notes = _split(results, len(results))
    return combine(good, errors, notes)


def comm_matrix_from_traces(paths: Sequence[str | Path], *, workers: int | None = None, top: int = 5,
                            executor: Executor | None = None, progress: bool = False) -> CommMatrix:
    """The rank x rank communication matrix of a set of per-rank traces, one rank per job (arguments as
    :func:`analyze_traceset`; ``top``: busiest pairs listed).

    Raises:
        TraceError: no trace files, or none could be read.
    """
    return comm_matrix_and_unread(paths, workers=workers, top=top, executor=executor, progress=progress)[0]


def comm_matrix_and_unread(paths: Sequence[str | Path], *, workers: int | None = None, top: int = 5,
                           executor: Executor | None = None,
                           progress: bool = False) -> tuple[CommMatrix, list[str], int]:
    """:func:`comm_matrix_from_traces`, the error line of each trace that could not be read (the matrix's
    ``errors`` also hold the notes of traces read in part) and the number of traces."""
    with nullcontext(executor) if executor is not None else _closing(LocalExecutor(workers)) as ex:
        results = map_trace_set(paths, trace_comm_calls, executor=ex, label="reading ranks", progress=progress)
    good, errors, notes = _split(results, len(results))
    per_rank: list[RankComm] = good
    return comm_matrix(per_rank, errors=[*errors, *notes], top=top), errors, len(results)


@contextmanager
def _closing(ex: Executor) -> Iterator[Executor]:
    try:
        yield ex
    finally:
        ex.close()


__all__ = ["analyze_traceset", "comm_matrix_and_unread", "comm_matrix_from_traces", "map_trace_set"]
