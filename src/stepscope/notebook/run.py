"""``NotebookRun``: a RunAnalysis with DataFrame accessors and an inline HTML overview, and ``load``."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stepscope.app.runanalysis import RunAnalysis
from stepscope.errors import NotFoundError
from stepscope.notebook.frames import require_pandas, table_frame
from stepscope.notebook.html import run_overview
from stepscope.notebook.traceframes import TraceFrames

if TYPE_CHECKING:
    from stepscope.analyze.trace.analysis import TraceAnalysis
    from stepscope.model.events import EventTable
    from stepscope.notebook.diff import DiffView


class NotebookRun(RunAnalysis, TraceFrames):
    """One stored run for a notebook: everything RunAnalysis holds (``data``, ``summary``, ``traces``,
    ``trace_analyses``, ``advice``, ``quality``), each table a report shows as a DataFrame (``*_df()``), and
    its overview inline in Jupyter. The frames have the columns of ``stepscope export`` (docs/api.md)."""

    @cached_property
    def _run_tables(self) -> dict[str, dict[str, list[Any]]]:
        """The run's own tables (the trace tables come from ``trace_analyses``)."""
        from stepscope.report.export.schema import TRACE_TABLES
        from stepscope.report.export.tables import run_tables

        return {k: v for k, v in run_tables(self.data, self.summary).items() if k not in TRACE_TABLES}

    def table_names(self) -> list[str]:
        """Every table this run has a ``*_df()`` for (also the names ``df(name)`` takes)."""
        return [*self._run_tables, *self._trace_tables()]

    def df(self, name: str) -> Any:
        """Table ``name`` (see ``table_names()``) as a DataFrame."""
        if name in self._run_tables:
            return table_frame(name, self._run_tables[name])
        if name in self._trace_tables():
            return self._trace_df(name)
        raise NotFoundError(f"no table {name!r} — choose one of {', '.join(self.table_names())}")

    def steps_df(self) -> Any:
        """One row per step and rank: rank, index, start/end (ns and UTC datetime), phase ("train" /
        "validation"), epoch, measured phases (ns and s; NaN: not measured), duration (ns and s)."""
        return self.df("steps")

    def regions_df(self) -> Any:
        """One row per region instance: rank, path, step, start, duration, depth."""
        return self.df("regions")

    def region_stats_df(self) -> Any:
        """Per region path and rank (warm-up excluded): count, total/mean/p50/p95/std/min/max ns, share of steps."""
        return self.df("region_stats")

    def samples_df(self) -> Any:
        """System samples: rank, time, one column per metric (NaN: not readable on that rank)."""
        return self.df("samples")

    def system_stats_df(self) -> Any:
        """Per metric and rank: mean, peak, min, last value, samples."""
        return self.df("system_stats")

    def metrics_df(self) -> Any:
        """Values logged with ``stepscope.log``: rank, name, step, time, value."""
        return self.df("metrics")

    def comm_df(self) -> Any:
        """torch.distributed / mpi4py calls: rank, op, step, start, duration, bytes, peer, group size, seq."""
        return self.df("comm")

    def ranks_df(self) -> Any:
        """One row per rank: role, host, steps, step time p50/p95, throughput, data-wait share, peak RSS."""
        return self.df("ranks")

    def advice_df(self) -> Any:
        """Every finding of the advisor (largest estimated saving first)."""
        pd = require_pandas()
        cols = ("rule_id", "title", "saving_s_per_step", "saving_s_total", "source", "suggestion", "threshold")
        return pd.DataFrame([{c: getattr(f, c) for c in cols} for f in self.advice.findings], columns=list(cols))

    @property
    def event_tables(self) -> dict[int, EventTable]:
        return self.traces.tables

    def rank_analyses(self) -> dict[int, TraceAnalysis]:
        return self.trace_analyses

    def diff(self, other: RunAnalysis, **settings: Any) -> DiffView:
        """This run (baseline) against ``other`` (experiment), as ``stepscope diff`` compares them;
        ``settings``: DiffSettings fields (confidence, threshold, paired)."""
        from stepscope.notebook.diff import diff_runs

        return diff_runs(self, other, **settings)

    def _repr_html_(self) -> str:
        return run_repr_html(self)

    def __repr__(self) -> str:
        r = self.data.run
        return f"<NotebookRun {r.id} {r.name!r} {r.status.value}, {len(self.data.ranks)} rank(s)>"


def run_repr_html(ra: RunAnalysis) -> str:
    """The inline Jupyter view of any RunAnalysis (bind it as ``RunAnalysis._repr_html_``): identity, headline
    numbers, the top advice and the traces' problems."""
    return run_overview(ra.summary, ra.advice, ra.traces.problems, caveat=ra.quality.caveat())


def load(run: str | Path = "latest", store: str | Path | None = None, *, warmup: int | None = None) -> NotebookRun:
    """A stored run for a notebook. ``run``: a run reference (id, id prefix, name, ``latest``, ``latest~N``)
    in ``store`` (default: the CLI's, ``./.stepscope`` or ``STEPSCOPE_HOME``), or the path of a run directory,
    or the path of a store (its latest run). ``warmup``: steps to exclude (default: detected)."""
    from stepscope.store import open_store
    from stepscope.store.rundir import MANIFEST, read_run

    path = Path(run)
    if path.is_dir() and (path / MANIFEST).is_file():
        return NotebookRun(read_run(path), warmup=warmup)
    ref = str(run)
    if store is None and path.is_dir() and (path / "store.json").is_file():
        store, ref = path, "latest"
    st = open_store(store)
    try:
        return NotebookRun(st.load(ref), warmup=warmup)
    finally:
        st.close()
