"""List stored runs, newest first."""

from __future__ import annotations

import argparse
from datetime import datetime

from rich.table import Table

from stepscope.cli.common import add_store_args, ensure_metrics, print_json, store_from
from stepscope.report import format as f
from stepscope.report.terminal import STATUS_STYLE, console


class LsCommand:
    """List stored runs, newest first, with their headline numbers."""

    name = "ls"
    help = "list stored runs"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-n", "--limit", type=int, default=30, help="show at most N runs (default 30; 0: all)")
        parser.add_argument("--name", help="only runs with this name")
        parser.add_argument("--tag", action="append", metavar="KEY=VALUE", help="only runs with this tag")
        parser.add_argument("--json", action="store_true", help="machine-readable output")
        add_store_args(parser)

    def run(self, args: argparse.Namespace) -> int:
        from stepscope.cli.common import parse_pairs

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
            print_json([{**{k: getattr(r, k) for k in r.__dataclass_fields__}, "metrics": metrics.get(r.id, {})}
                        for r in rows])
            return 0
        t = Table(show_edge=False, pad_edge=False)
        for c in ("id", "name", "status", "started", "duration", "ranks", "steps", "step p50", "samples/s", "commit"):
            t.add_column(c, justify="left" if c in ("id", "name", "status", "started", "commit") else "right",
                         no_wrap=True, overflow="ellipsis" if c == "name" else "fold")
        for r in rows:
            m = metrics.get(r.id, {})
            started = datetime.fromtimestamp(r.start_ns / 1e9).strftime("%Y-%m-%d %H:%M")
            dur = (r.end_ns - r.start_ns) if r.end_ns else None
            p50 = m.get("step_time_median_s")
            t.add_row(r.id, r.name, f"[{STATUS_STYLE.get(r.status, '')}]{r.status}[/]", started, f.duration_ns(dur),
                      str(r.world_size), f.number(m.get("steps")), f.duration_ns(p50 * 1e9 if p50 else None),
                      f.rate(m.get("samples_per_s"), "").replace(" /s", ""),
                      (r.git_commit or "")[:8] + ("*" if r.git_dirty else ""))
        out = console()
        if not rows:
            out.print(f"no runs in {store.root}")
        else:
            out.print(t)
        return 0
