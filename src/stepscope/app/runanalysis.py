"""``RunAnalysis``: one run, loaded once; its summary, traces, per-rank trace analyses, advisor facts, advice
and index metrics computed on first use and kept. Every consumer (show, report, advise, export, diff, the
dashboard, index metrics, MLflow, the notebook API) reads a run through this object, so each figure is
computed once, in one place."""

from __future__ import annotations

import sys
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from stepscope.analyze.run.quality import Quality, measurement_quality
from stepscope.analyze.run.summary import RunSummary, index_metrics, summarize_run
from stepscope.app.runtraces import RunTraces, load_traces, trace_files
from stepscope.model.tables import RunData

if TYPE_CHECKING:  # the advisor is imported where advice is asked for: the end-of-run summary needs none of it
    from stepscope.analyze.advisor import Advice, AdvisorInput, CommFacts, TraceFacts
    from stepscope.analyze.trace.analysis import TraceAnalysis
    from stepscope.analyze.trace.critical_path import CriticalPath
    from stepscope.analyze.trace.multirank import TraceSetAnalysis
    from stepscope.store import Store


class RunAnalysis:
    """The analysis of one stored run. Nothing is computed until asked for; each part is computed once."""

    def __init__(self, data: RunData, *, warmup: int | None = None, read_traces: bool = True) -> None:
        self.data = data
        self.warmup = warmup
        """Steps excluded from the measured figures; None: detected automatically."""
        self.read_traces = read_traces
        """False: the run's traces are left unread (a running run's live view: records only)."""

    @classmethod
    def from_store(cls, store: Store, ref: str = "latest", *, warmup: int | None = None) -> RunAnalysis:
        """The run `ref` (id, id prefix, name, `latest`, `latest~N`) of `store`."""
        return cls(store.load(ref), warmup=warmup)

    @classmethod
    def from_dir(cls, path: str | Path, *, warmup: int | None = None) -> RunAnalysis:
        """The run stored in the run directory ``path`` (outside any store)."""
        from stepscope.store.rundir import read_run

        return cls(read_run(Path(path)), warmup=warmup)

    @cached_property
    def summary(self) -> RunSummary:
        return summarize_run(self.data, warmup=self.warmup)

    @cached_property
    def traces(self) -> RunTraces:
        """The run's profiled-window traces by rank, with one line per trace that is missing or unreadable."""
        return load_traces(self.data) if self.read_traces else RunTraces(tables={}, problems=())

    @property
    def trace_files(self) -> list[Path]:
        """The run's trace files that exist (rank order); a one-line UserError when it has none."""
        return trace_files(self.data)

    @property
    def trace_notes(self) -> tuple[str, ...]:
        """One line per trace artifact that is missing or unreadable: what every consumer prints as a note."""
        return self.traces.problems

    @cached_property
    def trace_analyses(self) -> dict[int, TraceAnalysis]:
        """Every trace-engine analysis of each rank's trace (the figures `trace analyze` prints)."""
        if not self.traces.tables:
            return {}  # (the trace engine is not even imported for a run without traces)
        from stepscope.analyze.trace.analysis import analyze_trace

        return {rank: analyze_trace(t) for rank, t in self.traces.tables.items()}

    @cached_property
    def critical_paths(self) -> dict[int, CriticalPath | None]:
        """Each rank's critical path of its whole trace (None: no host operators or runtime calls), computed once
        for every consumer (the report's timelines, path tables and cross-rank wait): the report of many ranks
        renders without analysing. Not part of ``trace_analyses``: a path costs about half a rank's analysis, and
        show, advise and the index need none."""
        if not self.traces.tables:
            return {}
        from stepscope.analyze.trace.critical_path import critical_path

        return {rank: a.critical_path if (a := self.trace_analyses.get(rank)) is not None and a.critical_path
                is not None else critical_path(t) for rank, t in self.traces.tables.items()}

    @cached_property
    def trace_set(self) -> TraceSetAnalysis | None:
        """The ranks' analyses side by side (slowest rank, spreads); None when no trace could be read."""
        if not self.trace_analyses:
            return None
        from stepscope.analyze.trace.multirank import combine

        return combine(list(self.trace_analyses.values()), self.trace_notes)

    @cached_property
    def trace_facts(self) -> tuple[TraceFacts, ...]:
        """The advisor's facts of each rank: projections of ``trace_analyses`` (rank order)."""
        from stepscope.analyze.advisor.tracefacts import facts_of

        return tuple(facts_of(a) for _, a in sorted(self.trace_analyses.items()))

    @cached_property
    def comm(self) -> CommFacts | None:
        """The run's torch.distributed calls over its analysed steps (None: none recorded)."""
        from stepscope.analyze.advisor import comm_facts

        return comm_facts(self.data, warmup=self.warmup)

    @cached_property
    def advisor_input(self) -> AdvisorInput:
        from stepscope.analyze.advisor import AdvisorInput

        return AdvisorInput(summary=self.summary, traces=self.trace_facts, trace_problems=self.trace_notes,
                            comm=self.comm)

    @cached_property
    def advice(self) -> Advice:
        from stepscope.analyze.advisor import advise

        return advise(self.advisor_input)

    @cached_property
    def quality(self) -> Quality:
        return measurement_quality(self.data, warmup=self.summary.headline.warmup_steps)

    @cached_property
    def index_metrics(self) -> dict[str, float]:
        """Everything the index keeps for the run (and MLflow logs): the summary's figures plus, for a profiled
        run, its traces' (``trace.*``, analyze/trace/metrics.py)."""
        metrics = index_metrics(self.summary)
        if self.trace_set is not None:
            from stepscope.analyze.trace.metrics import trace_index_metrics

            metrics.update(trace_index_metrics(self.trace_set))
        return metrics

    def print_notes(self, file: TextIO | None = None) -> None:
        """The trace notes on stderr, one ``stepscope: note:`` line each (every command prints the same)."""
        for line in self.trace_notes:
            print(f"stepscope: note: {line}", file=file or sys.stderr)
