"""List stored runs, newest first."""

from __future__ import annotations

import argparse
from datetime import datetime

from stepscope.analyze.run.lost import partial_label
from stepscope.cli.common import add_store_args, ensure_metrics, parse_pairs, print_json, store_from
from stepscope.report import format as f
from stepscope.report.runs_list import RunLine, runs_view
from stepscope.report.terminal import console
from stepscope.store.index import RunRow


class LsCommand:
    """List stored runs, newest first, with their headline numbers. On a narrow terminal run ids and
    status words stay whole: the name is shortened, then columns are left out (named below the table)."""

    name = "ls"
    help = "list stored runs"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-n", "--limit", type=int, default=30, help="show at most N runs (default 30; 0: all)")
        parser.add_argument("--name", help="only runs with this name")
        parser.add_argument("--tag", action="append", metavar="KEY=VALUE", help="only runs with this tag")
        parser.add_argument("--json", action="store_true", help="machine-readable output")
        add_store_args(parser)

    def run(self, args: argparse.Namespace) -> int:
        store = store_from(args)
        rows = store.rows()
        if args.name:
            rows = [r for r in rows if r.name == args.name]
        for k, v in parse_pairs(args.tag, "tag").items():
            rows = [r for r in rows if r.tags.get(k) == v]
        if args.limit:
            rows = rows[: args.limit]
        computed = ensure_metrics(store, rows)
        metrics: dict[str, dict[str, float | None]] = {**store.index.metrics([r.id for r in rows]), **computed}
        if args.json:
            print_json([{**{k: getattr(r, k) for k in r.__dataclass_fields__}, **_partial(metrics.get(r.id, {})),
                         "metrics": metrics.get(r.id, {})} for r in rows])
            return 0
        lines = [run_line(r, metrics.get(r.id, {})) for r in rows]
        out = console()
        if not rows:
            out.print(f"no runs in {store.root}")
        else:
            out.print(runs_view(lines, width=out.width))
        return 0


def _partial(metrics: dict[str, float | None]) -> dict[str, object]:
    """``partial`` (the run lost records) and how many, for ``ls --json``."""
    lost = int(metrics.get("records_lost") or 0)
    return {"partial": lost > 0, "records_lost": lost}


def run_line(r: RunRow, metrics: dict[str, float | None]) -> RunLine:
    """The `ls` cells of an index row and its indexed metrics."""
    p50 = metrics.get("step_time_median_s")
    return RunLine(
        id=r.id, name=r.name, status=partial_label(r.status, metrics.get("records_lost")),
        started=datetime.fromtimestamp(r.start_ns / 1e9).strftime("%Y-%m-%d %H:%M"),
        duration=f.duration_ns(r.end_ns - r.start_ns if r.end_ns else None), ranks=str(r.world_size),
        steps=f.number(metrics.get("steps")), step_p50=f.duration_ns(p50 * 1e9 if p50 else None),
        samples_per_s=f.rate(metrics.get("samples_per_s"), "").replace(" /s", ""),
        commit=(r.git_commit or "")[:8] + ("*" if r.git_dirty else ""))
