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
        parser.add_argument("--format", "-f", default="csv", help=f"one of: {', '.join(sorted(WRITERS))} (default csv)")
        parser.add_argument("-o", "--output", default=None, help="output folder (default: ./stepscope-export-<run id>)")
        add_store_args(parser)

    def run(self, args: argparse.Namespace) -> int:
        from stepscope.analyze.summary import summarize_run
        from stepscope.report.export import run_tables, write_tables

        store = store_from(args)
        data = store.load(args.run)
        out = Path(args.output or f"stepscope-export-{data.run.id}")
        paths = write_tables(run_tables(data, summarize_run(data)), args.format, out)
        for p in paths:
            print(p)
        return 0
