"""``RunAnalysis``: one run, loaded once; its summary, traces, per-rank trace analyses and advice computed
on first use and kept. Every consumer (show, report, advise, export, diff, dashboard, index metrics, MLflow,
the notebook API) reads a run through this object, so each figure is computed once, in one place."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from stepscope.analyze.advisor import Advice, AdvisorInput, advise
from stepscope.analyze.quality import Quality, measurement_quality
from stepscope.analyze.summary import RunSummary, summarize_run
from stepscope.app.runtraces import RunTraces, load_traces
from stepscope.model.tables import RunData

if TYPE_CHECKING:
    from stepscope.analyze.trace.analysis import TraceAnalysis
    from stepscope.store import Store


class RunAnalysis:
    """The analysis of one stored run. Nothing is computed until asked for; each part is computed once."""

    def __init__(self, data: RunData, *, warmup: int | None = None) -> None:
        self.data = data
        self.warmup = warmup
        """Steps excluded from the measured figures; None: detected automatically."""

    @classmethod
    def from_store(cls, store: Store, ref: str = "latest", *, warmup: int | None = None) -> RunAnalysis:
        """The run `ref` (id, id prefix, name, `latest`, `latest~N`) of `store`."""
        return cls(store.load(ref), warmup=warmup)

    @cached_property
    def summary(self) -> RunSummary:
        return summarize_run(self.data, warmup=self.warmup)

    @cached_property
    def traces(self) -> RunTraces:
        """The run's profiled-window traces by rank, with one line per trace that is missing or unreadable."""
        return load_traces(self.data)

    @cached_property
    def trace_analyses(self) -> dict[int, TraceAnalysis]:
        """Every trace-engine analysis of each rank's trace (the figures `trace analyze` prints)."""
        from stepscope.analyze.trace.analysis import analyze_trace

        return {rank: analyze_trace(t) for rank, t in self.traces.tables.items()}

    @cached_property
    def advisor_input(self) -> AdvisorInput:
        t = self.traces
        return AdvisorInput(summary=self.summary, traces=t.facts, trace_problems=t.problems, comm=t.comm)

    @cached_property
    def advice(self) -> Advice:
        return advise(self.advisor_input)

    @cached_property
    def quality(self) -> Quality:
        return measurement_quality(self.data, warmup=self.summary.headline.warmup_steps)
