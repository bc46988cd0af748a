"""Write a run's HTML report."""

from __future__ import annotations

import argparse
from pathlib import Path

from stepscope.cli.common import add_store_args, store_from
from stepscope.errors import UserError


class ReportCommand:
    """Write a self-contained HTML report of a run (overview and recommendations, speed, time, system,
    memory, kernels, model, logged metrics) that opens offline from disk, and print its path."""

    name = "report"
    help = "write a run's HTML report (default: <run dir>/artifacts/report.html)"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("run", nargs="?", default="latest", help="the run (default: latest)")
        parser.add_argument("-o", "--output", metavar="FILE", help="where to write the report")
        parser.add_argument("--open", action="store_true", help="open it in the default web browser")
        parser.add_argument("--warmup-steps", type=int, metavar="N", help="steps to exclude (default: automatic)")
        add_store_args(parser)

    def run(self, args: argparse.Namespace) -> int:
        from stepscope.app import RunAnalysis
        from stepscope.report.html.run_report import render_run_report

        ra = RunAnalysis.from_store(store_from(args), args.run, warmup=args.warmup_steps)
        data = ra.data
        html = render_run_report(ra)
        out = Path(args.output) if args.output else Path(data.path) / "artifacts" / "report.html"
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(html, encoding="utf-8")
        except OSError as e:
            raise UserError(f"cannot write the report to {out}: {e.strerror or e} — choose another -o FILE") from None
        print(out)
        if args.open:
            import webbrowser

            webbrowser.open(out.resolve().as_uri())
        return 0
