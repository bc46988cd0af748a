"""Run a command N times as one benchmark record: `stepscope bench --repeat 5 -- python train.py`."""

from __future__ import annotations

import argparse
import secrets
import sys
import time

from stepscope.cli.common import add_store_args, parse_pairs, print_json, store_from
from stepscope.cli.run import add_collection_args, command_from, options_from
from stepscope.errors import UserError


class BenchCommand:
    """Run a training command several times, store every run, and group them as one benchmark, so that
    each commit has a distribution of figures rather than one number. Warm-up runs (--warmup-runs) are
    run first and discarded (they fill caches, compile, download). Stops at the first failing run and
    returns its exit code."""

    name = "bench"
    help = "run a command N times as one benchmark (repeats for history and check)"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--repeat", "-r", type=int, default=3, metavar="N", help="measured runs (default: 3)")
        parser.add_argument("--warmup-runs", type=int, default=0, metavar="N", help="discarded runs first (default: 0)")
        parser.add_argument("--name", help="benchmark and run name (default: the script's name)")
        parser.add_argument("--param", action="append", metavar="KEY=VALUE", help="a parameter of the runs")
        parser.add_argument("--tag", action="append", metavar="KEY=VALUE", help="a tag of the runs")
        parser.add_argument("--json", action="store_true", help="print the benchmark record as JSON")
        add_collection_args(parser)
        add_store_args(parser)
        parser.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- COMMAND ...", help="the command to run")

    def run(self, args: argparse.Namespace) -> int:
        from stepscope.analyze.history import pooled, tracked_metrics
        from stepscope.cli.finish import finish_run
        from stepscope.cli.historydata import load_points
        from stepscope.collect.launch import check_command, launch
        from stepscope.report.history import bench_table, console

        if args.repeat < 1 or args.warmup_runs < 0:
            raise UserError(f"--repeat {args.repeat} / --warmup-runs {args.warmup_runs}: need at least 1 repeat "
                            "and 0 or more warm-up runs")
        command = command_from(args)
        params, tags = parse_pairs(args.param, "param"), parse_pairs(args.tag, "tag")
        options = options_from(args)
        check_command(command)
        store = store_from(args, create=True)
        group = "bench-" + secrets.token_hex(4)
        store.index.add_group(group, "bench", args.name or "", time.time_ns(),
                              {"command": command, "repeat": args.repeat, "warmup_runs": args.warmup_runs})
        out = console(file=sys.stderr)
        run_ids: list[str] = []
        for i in range(args.warmup_runs + args.repeat):
            warm = i < args.warmup_runs
            result = launch(store, command, name=args.name, params=params, tags=tags, options=options,
                            group=None if warm else group)
            if result.exit_code != 0:
                out.print(f"[red]bench: run {result.run_id} failed with exit code {result.exit_code}; stopping[/]")
                return result.exit_code
            if warm:
                store.remove(result.run_id)
                out.print(f"bench: warm-up run {i + 1}/{args.warmup_runs} done (discarded)")
                continue
            finish_run(store, result.run_id, print_summary=False)
            run_ids.append(result.run_id)
            out.print(f"bench: run {len(run_ids)}/{args.repeat} → {result.run_id}")
        points = [p for p in load_points(store) if p.run_id in run_ids]
        rows = [(m, p) for m in tracked_metrics(points) if (p := pooled(points, m, key=group)) is not None]
        if args.json:
            print_json({"group": group, "runs": run_ids, "metrics": {m: p.to_dict() for m, p in rows}})
        else:
            console(file=sys.stdout).print(bench_table(group, rows))
        return 0
