"""Export a run's tables."""

from __future__ import annotations

import argparse
from pathlib import Path

from stepscope.cli.common import add_store_args, store_from


class ExportCommand:
    """Export every table of a run (steps, regions, region_stats, samples, system_stats, metrics, comm,
    ranks) as CSV or Parquet files, or one JSON document, into a folder."""

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
        from stepscope.report.export import run_tables, write_tables

        store = store_from(args)
        data = store.load(args.run)
        if args.format == "perfetto":
            from stepscope.cli.runinputs import load_traces
            from stepscope.report.export.perfetto import write_perfetto

            traces = load_traces(data)
            print(write_perfetto(data, Path(args.output or f"stepscope-{data.run.id}.perfetto.json"), traces.tables))
            return 0
        out = Path(args.output or f"stepscope-export-{data.run.id}")
        paths = write_tables(run_tables(data, summarize_run(data)), args.format, out)
        for p in paths:
            print(p)
        return 0
