"""Export a run's tables."""

from __future__ import annotations

import argparse
from pathlib import Path

from stepscope.cli.common import StoreLike, add_store_args, load_analysis
from stepscope.errors import UserError


def export(run: str = "latest", *, store: StoreLike = None, db: str | None = None, format: str = "csv",
           output: str | Path | None = None, warmup: int | None = None) -> int:
    """Write run ``run``'s tables in ``format`` (csv, json, parquet; perfetto: one Chrome-trace file) and print
    each path written."""
    from stepscope.report.export import WRITERS, run_tables, write_tables

    formats = sorted([*WRITERS, "perfetto"])
    if format not in formats:  # before the run is loaded and its traces analysed
        raise UserError(f"unknown format {format!r} — choose one of {', '.join(formats)}")
    ra = load_analysis(run, store, db=db, warmup=warmup)
    data = ra.data
    if format == "perfetto":
        from stepscope.report.export.perfetto import write_perfetto

        print(write_perfetto(data, Path(output or f"stepscope-{data.run.id}.perfetto.json"), ra.traces.tables))
        return 0
    out = Path(output or f"stepscope-export-{data.run.id}")
    tables = run_tables(data, ra.summary)
    if ra.trace_set is not None:  # trace tables when the run has readable traces; none (not an error) otherwise
        from stepscope.report.export.trace_tables import trace_tables

        tables.update(trace_tables(ra.trace_set))
    for p in write_tables(tables, format, out):
        print(p)
    return 0


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
        return export(args.run, store=args.store, db=args.db, format=args.format, output=args.output)
