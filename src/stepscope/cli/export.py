"""Export a run's tables."""

from __future__ import annotations

import argparse
from pathlib import Path

from stepscope.cli.common import add_store_args, store_from
from stepscope.errors import UserError
from stepscope.model.tables import RunData


class ExportCommand:
    """Export every table of a run (steps, regions, region_stats, samples, system_stats, metrics, comm,
    ranks; and components, kernels, operators, modules when a window was profiled) as CSV or Parquet
    files, or one JSON document, into a folder; or the timeline as one Perfetto / Chrome-trace file."""

    name = "export"
    help = "export a run's tables (csv, json, parquet)"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        from stepscope.report.export import WRITERS

        parser.add_argument("run", nargs="?", default="latest", help="the run (default: latest)")
        formats = ", ".join(sorted([*WRITERS, "perfetto"]))
        parser.add_argument("--format", "-f", default="csv", help=f"one of: {formats} (default csv); perfetto: one "
                            "Chrome-trace JSON file (-o FILE) for ui.perfetto.dev")
        parser.add_argument("-o", "--output", default=None, help="output folder (default: ./stepscope-export-<run id>)")
        add_store_args(parser)

    def run(self, args: argparse.Namespace) -> int:
        from stepscope.analyze.summary import summarize_run
        from stepscope.report.export import WRITERS, run_tables, write_tables

        formats = sorted([*WRITERS, "perfetto"])
        if args.format not in formats:  # before the run is loaded and its traces analysed
            raise UserError(f"unknown format {args.format!r} — choose one of {', '.join(formats)}")
        store = store_from(args)
        data = store.load(args.run)
        if args.format == "perfetto":
            from stepscope.app.runtraces import load_traces
            from stepscope.report.export.perfetto import write_perfetto

            traces = load_traces(data)
            print(write_perfetto(data, Path(args.output or f"stepscope-{data.run.id}.perfetto.json"), traces.tables))
            return 0
        out = Path(args.output or f"stepscope-export-{data.run.id}")
        tables = run_tables(data, summarize_run(data))
        tables.update(_trace_tables(data))
        paths = write_tables(tables, args.format, out)
        for p in paths:
            print(p)
        return 0


def _trace_tables(data: RunData) -> dict[str, dict[str, list[object]]]:
    """Trace tables when the run has traces; none (not an error) otherwise."""
    from stepscope.cli.views.traces import run_trace_files

    try:
        files = run_trace_files(data)
    except UserError:
        return {}
    from stepscope.executor.traceset import analyze_traceset
    from stepscope.report.export.trace_tables import trace_tables

    return trace_tables(analyze_traceset([str(f) for f in files]))
