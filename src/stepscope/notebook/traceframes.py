"""DataFrame accessors over per-rank trace analyses, shared by a stored run and a bare trace set."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stepscope.errors import UserError
from stepscope.notebook.frames import events_frame, table_frame

if TYPE_CHECKING:
    from stepscope.analyze.trace.analysis import TraceAnalysis
    from stepscope.model.events import EventTable


class TraceFrames:
    """Mixin: ``kernels_df()``, ``components_df()``, ``operators_df()``, ``modules_df()``, ``temporal_df()``,
    ``idle_df()``, ``overlap_df()``, ``utilization_df()``, ``trace_steps_df()`` and ``events_df(rank)``. The
    class provides ``rank_analyses()`` (rank -> TraceAnalysis) and ``event_tables`` (rank -> EventTable)."""

    def rank_analyses(self) -> dict[int, TraceAnalysis]:
        raise NotImplementedError

    @property
    def event_tables(self) -> dict[int, EventTable]:
        raise NotImplementedError

    def _trace_tables(self) -> dict[str, dict[str, list[Any]]]:
        cache: dict[str, dict[str, list[Any]]] | None = self.__dict__.get("_trace_tables_cache")
        if cache is None:
            from stepscope.report.export.trace_tables import trace_tables

            analyses = self.rank_analyses()
            cache = trace_tables(analyses[r] for r in sorted(analyses))
            self.__dict__["_trace_tables_cache"] = cache
        return cache

    def _trace_df(self, name: str) -> Any:
        return table_frame(name, self._trace_tables()[name])

    def kernels_df(self) -> Any:
        """GPU kernels (memcpy/memset included) by name per rank: count, sum/mean/min/max/std ns, % of GPU time."""
        return self._trace_df("kernels")

    def components_df(self) -> Any:
        """GPU time by component (computation, communication, memory, ...) per rank, as ``kernels_df``."""
        return self._trace_df("components")

    def operators_df(self) -> Any:
        """Host operators per rank: calls, CPU total and self time, GPU time they launched (self and total)."""
        return self._trace_df("operators")

    def modules_df(self) -> Any:
        """nn.Module paths per rank (tree order): calls, CPU time, GPU time launched inside."""
        return self._trace_df("modules")

    def temporal_df(self) -> Any:
        """One row per rank with GPU work: window, busy, idle, compute, non-compute, communication, memory."""
        return self._trace_df("temporal")

    def idle_df(self) -> Any:
        """One row per GPU stream and rank: idle time by cause (host wait, kernel wait, other)."""
        return self._trace_df("idle")

    def overlap_df(self) -> Any:
        """One row per rank with communication kernels: communication hidden under computation, exposed."""
        return self._trace_df("overlap")

    def utilization_df(self) -> Any:
        """One row per rank with GPU work: utilisation, estimated SM efficiency and achieved occupancy (%)."""
        return self._trace_df("utilization")

    def trace_steps_df(self) -> Any:
        """One row per ProfilerStep and rank: start (trace clock), duration and its breakdown by category
        (kernel, memcpy, memset, communication, runtime, dataloader, cpu, other; they add up to dur_ns)."""
        return self._trace_df("trace_steps")

    def events_df(self, rank: int = 0) -> Any:
        """Every complete event of ``rank``'s trace, names decoded (see frames.events_frame)."""
        tables = self.event_tables
        if rank not in tables:
            have = ", ".join(map(str, sorted(tables))) or "none"
            raise UserError(f"no trace of rank {rank} — ranks with a trace: {have}")
        return events_frame(tables[rank])
