"""The static dashboard: `stepscope dashboard build -o site/`."""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

from stepscope.cli.common import add_store_args, store_from
from stepscope.errors import UserError
from stepscope.store.store import is_safe_id, shown


class DashboardCommand:
    """Build the dashboard as a static site: a runs list (sortable, filterable by name, branch, tag,
    parameter, status; paginated), for every run name one history page per tracked metric (steps marked, points
    open their run), a regressions page (every detected step, checked as `check` does, with the diff of the runs
    around it), a compare page opening the HTML diff of two runs, and the full HTML report of the newest runs.
    Open <dir>/index.html from disk or publish the folder on any static web server (GitHub Pages, GitLab Pages,
    S3)."""

    name = "dashboard"
    help = "build the static dashboard site: stepscope dashboard build -o site/"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("action", choices=("build",), help="build: write the site")
        parser.add_argument("-o", "--output", default="site", metavar="DIR", help="output folder (default: site)")
        parser.add_argument("--name", help="the run name the pages show first (default: the newest run's name)")
        parser.add_argument("--reports", type=int, default=100, metavar="N",
                            help="render the full report of the N newest runs (default: 100; 0: none)")
        parser.add_argument("--max-regression", default="5%", metavar="PCT",
                            help="smallest change the regressions page lists (default: 5%%, as `check`)")
        add_store_args(parser)

    def run(self, args: argparse.Namespace) -> int:
        from stepscope.cli.check import parse_fraction
        from stepscope.cli.dashboarddata import build_site, diff_pairs
        from stepscope.cli.historydata import render_diff_page, render_report
        from stepscope.report.dashboard import write_site

        t0 = time.perf_counter()
        threshold = parse_fraction(args.max_regression)
        store = store_from(args)
        out = Path(args.output)
        if out.exists() and not out.is_dir():
            raise UserError(f"{out} exists and is not a folder — choose another -o DIR")
        if args.reports < 0:
            raise UserError(f"--reports {args.reports}: give 0 (no reports) or more")
        reports: dict[str, str] = {}
        for row in store.index.runs(limit=args.reports) if args.reports > 0 else []:
            if not is_safe_id(row.id) or store.links_leaving(row.id):
                print(f"dashboard: run {shown(row.id)} has links leaving the store (or a damaged id): its report "
                      "is left out", file=sys.stderr)
                continue
            html = render_report(store, row.id)
            if html is not None:
                reports[row.id] = html
        site = build_site(store, name=args.name, report_ids=set(reports), threshold=threshold)
        diffs = {pair: html for pair in diff_pairs(site)
                 if all(is_safe_id(i) and not store.links_leaving(i) for i in pair)
                 and (html := render_diff_page(store, *pair)) is not None}
        site = replace(site, diff_pairs=frozenset(diffs))
        try:
            written = write_site(site, out, reports, diffs)
        except OSError as e:
            raise UserError(f"cannot write the site to {out}: {e.strerror or e} — choose another -o DIR") from None
        histories = sum(len(v.histories) for v in site.names)
        print(f"{out / 'index.html'}  ({len(written)} files, {len(site.runs)} runs, {len(site.names)} run names, "
              f"{histories} histories, {len(reports)} reports, {len(diffs)} diffs, {time.perf_counter() - t0:.1f} s)",
              file=sys.stdout)
        return 0
