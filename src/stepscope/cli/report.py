"""Write a run's HTML report."""

from __future__ import annotations

import argparse
from pathlib import Path

from stepscope.cli.common import StoreLike, add_store_args, load_analysis
from stepscope.errors import UserError


def report(run: str = "latest", *, store: StoreLike = None, db: str | None = None, output: str | Path | None = None,
           open_: bool = False, warmup: int | None = None) -> int:
    """Write run ``run``'s HTML report to ``output`` (default <run dir>/artifacts/report.html), print its path."""
    from stepscope.cli.advise import stored_verifications
    from stepscope.report.html.run_report import render_run_report

    ra = load_analysis(run, store, db=db, warmup=warmup)
    html = render_run_report(ra, stored_verifications(ra.data.run.id, store, db))
    out = Path(output) if output else Path(ra.data.path) / "artifacts" / "report.html"
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(html, encoding="utf-8")
    except OSError as e:
        raise UserError(f"cannot write the report to {out}: {e.strerror or e} — choose another -o FILE") from None
    print(out)
    if open_:
        import webbrowser

        webbrowser.open(out.resolve().as_uri())
    return 0


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
        return report(args.run, store=args.store, db=args.db, output=args.output, open_=args.open,
                      warmup=args.warmup_steps)
