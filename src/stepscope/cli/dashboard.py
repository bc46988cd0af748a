"""The static dashboard: `stepscope dashboard build -o site/`."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from stepscope.cli.common import add_store_args, store_from
from stepscope.errors import UserError
from stepscope.store.store import is_safe_id, shown

if TYPE_CHECKING:
    from stepscope.report.dashboard import Site
    from stepscope.store import Store

RECORD = ".stepscope-dashboard.json"
"""What the last build wrote and from which store state (in the output folder, beside index.html)."""
RECORD_FORMAT = 1


@dataclass(frozen=True, slots=True)
class BuildRecord:
    """The last build of a site folder: the store stamp it was built from, the files it wrote, and the
    stamp of each full report and diff page (see stepscope.cli.dashboarddata)."""

    site: str
    runs: int
    names: int
    pages: tuple[str, ...]
    reports: dict[str, str] = field(default_factory=dict)
    """Run id -> its report stamp (runs/<id>.html)."""
    diffs: dict[str, str] = field(default_factory=dict)
    """'<a>--<b>' -> stamp of the pair (diffs/<a>--<b>.html)."""

    @classmethod
    def read(cls, out: Path) -> BuildRecord | None:
        """The folder's record, or None (no earlier build, another format, or a damaged file)."""
        try:
            doc = json.loads((out / RECORD).read_text(encoding="utf-8"))
            if doc.get("format") != RECORD_FORMAT:
                return None
            rec = cls(site=str(doc["site"]), runs=int(doc["runs"]), names=int(doc["names"]),
                      pages=tuple(str(p) for p in doc["pages"]),
                      reports={str(k): str(v) for k, v in doc["reports"].items()},
                      diffs={str(k): str(v) for k, v in doc["diffs"].items()})
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        # the record names files this build may delete: only plain names inside the folder
        ids = [*rec.reports, *(i for k in rec.diffs for side in k.split("--", 1) for i in side.split(","))]
        pages_ok = all(p and not p.startswith(("/", "\\")) and ".." not in Path(p).parts for p in rec.pages)
        return rec if pages_ok and all(is_safe_id(i) for i in ids) else None

    def files(self) -> list[str]:
        return [*self.pages, *(f"runs/{i}.html" for i in self.reports), *(f"diffs/{k}.html" for k in self.diffs)]

    def write(self, out: Path) -> None:
        doc = {"format": RECORD_FORMAT, "site": self.site, "runs": self.runs, "names": self.names,
               "pages": list(self.pages), "reports": self.reports, "diffs": self.diffs}
        tmp = out / (RECORD + ".tmp")
        tmp.write_text(json.dumps(doc, sort_keys=True), encoding="utf-8")
        tmp.replace(out / RECORD)


class DashboardCommand:
    """Build the dashboard as a static site: a runs list (sortable, filterable by name, branch, tag,
    parameter, status; paginated), for every run name one history page per tracked metric (steps marked, points
    open their run), a regressions page (every detected step, checked as `check` does, with the diff of the runs
    around it), a compare page opening the HTML diff of two runs, and the full HTML report of the newest runs.
    Open <dir>/index.html from disk or publish the folder on any static web server (GitHub Pages, GitLab Pages,
    S3). A build into the folder of an earlier one redoes only what changed: the pages are rewritten only when
    an indexed run or metric changed (or the options or stepscope did), a run's report or a diff only when its
    run's index row or run directory did; nothing changed, nothing is written. Files the earlier build wrote
    and this one does not (a removed run's report) are deleted; --rebuild ignores the earlier build."""

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
        parser.add_argument("--rebuild", action="store_true",
                            help="render every page again, even what the earlier build in DIR still holds")
        add_store_args(parser)

    def run(self, args: argparse.Namespace) -> int:
        from stepscope.cli.check import parse_fraction

        t0 = time.perf_counter()
        threshold = parse_fraction(args.max_regression)
        store = store_from(args)
        out = Path(args.output)
        if out.exists() and not out.is_dir():
            raise UserError(f"{out} exists and is not a folder — choose another -o DIR")
        if args.reports < 0:
            raise UserError(f"--reports {args.reports}: give 0 (no reports) or more")
        try:
            line = build(store, out, name=args.name, reports=args.reports, threshold=threshold,
                         rebuild=args.rebuild)
        except OSError as e:
            raise UserError(f"cannot write the site to {out}: {e.strerror or e} — choose another -o DIR") from None
        print(f"{out / 'index.html'}  ({line}, {time.perf_counter() - t0:.1f} s)", file=sys.stdout)
        return 0


def _pair(key: str) -> tuple[str, str]:
    """('a', 'b') of a diff page's key 'a--b'."""
    a, _, b = key.partition("--")
    return a, b


def _safe(store: Store, side: str) -> bool:
    """Every run of a diff side (a run id, or a commit's runs joined by commas) is safe to render."""
    return all(is_safe_id(i) and not store.links_leaving(i) for i in side.split(","))


def build(store: Store, out: Path, *, name: str | None, reports: int, threshold: float, rebuild: bool) -> str:
    """Build (or bring up to date) the site in ``out``; returns what was done, in words."""
    from stepscope.cli.dashboardstamp import run_stamps, site_stamp

    stamp = site_stamp(store, (name, reports, threshold))
    old = None if rebuild else BuildRecord.read(out)
    if old is not None and not all((out / f).is_file() for f in old.files()):
        old = None  # someone removed files: build everything again

    candidates = []
    for row in store.index.runs(limit=reports) if reports > 0 else []:
        if _safe(store, row.id):
            candidates.append(row.id)
        else:
            print(f"dashboard: run {shown(row.id)} has links leaving the store (or a damaged id): its report "
                  "is left out", file=sys.stderr)
    pair_ids = [i for k in (old.diffs if old is not None and old.site == stamp else {}) for side in k.split("--", 1)
                for i in side.split(",")]
    stamps = run_stamps(store, sorted({*candidates, *pair_ids}))
    report_pages: dict[str, str] = {}
    report_stamps: dict[str, str] = {}
    for run_id in candidates:
        if old is not None and old.reports.get(run_id) == stamps[run_id]:
            report_stamps[run_id] = stamps[run_id]
            continue
        from stepscope.cli.dashboarddata import render_report

        if (html := render_report(store, run_id)) is not None:
            report_pages[run_id], report_stamps[run_id] = html, stamps[run_id]

    same_index = old is not None and old.site == stamp and set(old.reports) == set(report_stamps)
    site = None if same_index else _site(store, name, set(report_stamps), threshold)
    if site is not None:
        from stepscope.cli.dashboarddata import diff_pairs

        pairs = [p for p in diff_pairs(site) if _safe(store, p[0]) and _safe(store, p[1])]
        stamps |= run_stamps(store, sorted({i for p in pairs for side in p for i in side.split(",")} - set(stamps)))
    else:
        assert old is not None
        pairs = [(a, b) for a, b in map(_pair, old.diffs) if _safe(store, a) and _safe(store, b)]
    diff_pages: dict[tuple[str, str], str] = {}
    diff_stamps: dict[str, str] = {}
    for a, b in pairs:
        # the threshold is part of a diff page's stamp: its verdict is decided at it
        key, s = f"{a}--{b}", f"{threshold:g}:" + "+".join(stamps[i] for side in (a, b) for i in side.split(","))
        if old is not None and old.diffs.get(key) == s:
            diff_stamps[key] = s
            continue
        from stepscope.cli.dashboarddata import render_diff_page

        if (html := render_diff_page(store, a, b, threshold=threshold)) is not None:
            diff_pages[(a, b)], diff_stamps[key] = html, s
    if site is None and old is not None and set(diff_stamps) != set(old.diffs):  # a diff no longer renders
        site = _site(store, name, set(report_stamps), threshold)

    if site is not None:
        from stepscope.report.dashboard import write_site

        site = replace(site, diff_pairs=frozenset(map(_pair, diff_stamps)))
        written = write_site(site, out, report_pages, diff_pages)
        runs, names = len(site.runs), len(site.names)
        page_files = tuple(rel for p in written if not (rel := p.relative_to(out).as_posix()).startswith(
            ("runs/", "diffs/")))
    else:
        from stepscope.report.dashboard.site import diff_file, write_files

        assert old is not None
        written = write_files(out, {**{f"runs/{i}.html": h for i, h in report_pages.items()},
                                    **{diff_file(a, b): h for (a, b), h in diff_pages.items()}})
        runs, names, page_files = old.runs, old.names, old.pages
    record = BuildRecord(site=stamp, runs=runs, names=names, pages=page_files, reports=report_stamps,
                         diffs=diff_stamps)
    removed = _remove_stale(out, old.files() if old else [], record.files())
    out.mkdir(parents=True, exist_ok=True)
    record.write(out)
    what = (f"{len(written)} files written" + (f", {removed} removed" if removed else "")
            + ("" if site is not None else ", pages unchanged since the last build"))
    histories = f", {sum(len(v.histories) for v in site.names)} histories" if site is not None else ""
    return (f"{what}, {runs} runs, {names} run names{histories}, {len(report_stamps)} reports "
            f"({len(report_pages)} rendered), {len(diff_stamps)} diffs ({len(diff_pages)} rendered)")


def _site(store: Store, name: str | None, report_ids: set[str], threshold: float) -> Site:
    from stepscope.cli.dashboarddata import build_site

    return build_site(store, name=name, report_ids=report_ids, threshold=threshold)


def _remove_stale(out: Path, before: Iterable[str], now: Iterable[str]) -> int:
    """Delete the files an earlier build wrote that this one does not (only those: nothing else in DIR)."""
    keep = set(now)
    removed = 0
    for rel in before:
        if rel not in keep:
            try:
                (out / rel).unlink()
                removed += 1
            except FileNotFoundError:
                pass
    return removed
