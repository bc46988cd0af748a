"""Run a command N times as one benchmark record: `stepscope bench --repeat 5 -- python train.py`, or an
interleaved A/B comparison: `stepscope bench --ab --repeat 5 -- python base.py -- python exp.py`."""

from __future__ import annotations

import argparse
import secrets
import sys
import time
from typing import Any

from stepscope.cli.common import add_store_args, parse_pairs, print_json, store_from
from stepscope.cli.diff import add_metric_arg
from stepscope.cli.run import add_collection_args, command_from, options_from
from stepscope.errors import UserError
from stepscope.report.progress import progress


class BenchCommand:
    """Run a training command several times, store every run, and group them as one benchmark, so that
    each commit has a distribution of figures rather than one number. Warm-up runs (--warmup-runs) are
    run first and discarded (they fill caches, compile, download). Stops at the first failing run and
    returns its exit code.

    With --ab, two commands (separated by `--`) are run as N interleaved pairs, A B / B A alternately so that
    drift of the machine hits both alike, and compared with a paired test on the per-pair ratios of median
    step time, at 99% (--confidence): the verdict, its interval and the minimum detectable effect are printed
    (`stepscope diff GROUP:A GROUP:B` shows it again, with every table). It exits 0 whatever
    the verdict; with --exit-code 1 when B is slower, 2 when the pairs cannot tell (inconclusive), 0 otherwise. A
    failing run's exit code is returned as is, either way."""

    name = "bench"
    help = "run a command N times as one benchmark, or two commands as interleaved A/B pairs (--ab)"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--repeat", "-r", type=int, default=3, metavar="N",
                            help="measured runs (pairs with --ab) (default: 3)")
        parser.add_argument("--warmup-runs", type=int, default=0, metavar="N", help="discarded runs first (default: 0)")
        parser.add_argument("--ab", action="store_true",
                            help="interleaved A/B: `-- BASE_CMD ... -- EXP_CMD ...`, paired verdict")
        parser.add_argument("--name", help="benchmark and run name (default: the script's name)")
        parser.add_argument("--param", action="append", metavar="KEY=VALUE", help="a parameter of the runs")
        parser.add_argument("--tag", action="append", metavar="KEY=VALUE", help="a tag of the runs")
        parser.add_argument("--json", action="store_true", help="print the benchmark record as JSON")
        parser.add_argument("--wide", action="store_true", help="names whole, not shortened")
        parser.add_argument("--exit-code", action="store_true",
                            help="with --ab: exit 1 when B is slower, 2 when the pairs cannot tell, 0 otherwise")
        parser.add_argument("--threshold", type=float, default=2.0, metavar="PCT",
                            help="with --ab: smallest relative change called a change, in %% (default: 2, as diff)")
        parser.add_argument("--confidence", type=float, default=None, metavar="C",
                            help="with --ab: level of the paired interval (default: 0.99, at most 1 A/A study in "
                                 "100 called faster or slower)")
        add_metric_arg(parser)
        add_collection_args(parser)
        add_store_args(parser)
        parser.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- COMMAND ...", help="the command to run")

    def run(self, args: argparse.Namespace) -> int:
        if args.repeat < 1 or args.warmup_runs < 0:
            raise UserError(f"--repeat {args.repeat} / --warmup-runs {args.warmup_runs}: need at least 1 repeat "
                            "and 0 or more warm-up runs")
        if not 0 <= args.threshold < 100:
            raise UserError(f"--threshold {args.threshold}: must be a percentage in [0, 100), e.g. 2")
        if args.confidence is not None and not 0 < args.confidence < 1:
            raise UserError(f"--confidence {args.confidence}: must be between 0 and 1, e.g. 0.99")
        if args.ab:
            return run_ab(args)
        return run_repeats(args)


def run_repeats(args: argparse.Namespace) -> int:
    from stepscope.analyze.runs.history import pooled, tracked_metrics
    from stepscope.cli.finish import finish_run
    from stepscope.cli.historydata import load_points
    from stepscope.collect.startup.launch import check_command, launch
    from stepscope.report.history import bench_table, console

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
    with progress(args.warmup_runs + args.repeat, "bench runs") as bar:
        for i in range(args.warmup_runs + args.repeat):
            warm = i < args.warmup_runs
            result = launch(store, command, name=args.name, params=params, tags=tags, options=options,
                            group=None if warm else group)
            bar.advance(note=result.run_id)
            if result.exit_code != 0:
                out.print(f"[red]bench: run {result.run_id} failed with exit code {result.exit_code}; stopping[/]")
                return int(result.exit_code)
            if warm:
                store.remove(result.run_id)
                out.print(f"bench: warm-up run {i + 1}/{args.warmup_runs} done (discarded)")
                continue
            finish_run(store, result.run_id, print_summary=False)
            run_ids.append(result.run_id)
            out.print(f"bench: run {len(run_ids)}/{args.repeat} → {result.run_id}")
    points = [p for p in load_points(store) if p.run_id in run_ids]
    from stepscope.analyze.diff.metric import CPU_METRICS, METRICS

    shown = tracked_metrics(points)
    shown[1:1] = [METRICS[c].index_key for c in CPU_METRICS]  # the CPU clocks beside step time, where measured
    rows = [(m, p) for m in shown if (p := pooled(points, m, key=group)) is not None]
    if args.json:
        print_json({"group": group, "runs": run_ids, "metrics": {m: p.to_dict() for m, p in rows}})
    else:
        console(file=sys.stdout).print(bench_table(group, rows))
    return 0


def split_ab(cmd: list[str]) -> tuple[list[str], list[str]]:
    """`-- BASE ... -- EXP ...` (the first `--` optional) into the two commands."""
    parts = list(cmd)
    if parts and parts[0] == "--":
        parts = parts[1:]
    if "--" not in parts:
        raise UserError("--ab needs two commands: stepscope bench --ab --repeat N -- python base.py -- python exp.py")
    i = parts.index("--")
    base, exp = parts[:i], parts[i + 1:]
    if not base or not exp:
        raise UserError("--ab: a command is empty — stepscope bench --ab --repeat N -- BASE_CMD ... -- EXP_CMD ...")
    return base, exp


def ab_order(pairs: int) -> list[tuple[int, str]]:
    """(pair, side) in run order: A B, B A, A B, ... (alternating, so a drift of the machine hits both)."""
    out: list[tuple[int, str]] = []
    for i in range(pairs):
        out += [(i, "A"), (i, "B")] if i % 2 == 0 else [(i, "B"), (i, "A")]
    return out


def run_ab(args: argparse.Namespace) -> int:
    from stepscope.cli.finish import finish_run
    from stepscope.collect.startup.launch import check_command, launch
    from stepscope.report.history import console

    base, exp = split_ab(args.cmd)
    for c in (base, exp):
        check_command(c)
    params, tags = parse_pairs(args.param, "param"), parse_pairs(args.tag, "tag")
    options = options_from(args)
    store = store_from(args, create=True)
    group = "bench-" + secrets.token_hex(4)
    store.index.add_group(group, "bench-ab", args.name or "", time.time_ns(),
                          {"command": base, "experiment_command": exp, "repeat": args.repeat,
                           "warmup_runs": args.warmup_runs, "ab": True})
    out = console(file=sys.stderr)
    commands = {"A": base, "B": exp}
    for i in range(args.warmup_runs):
        for side in ("A", "B"):
            result = launch(store, commands[side], name=args.name, params=params, tags=tags, options=options)
            if result.exit_code != 0:
                out.print(f"[red]bench: warm-up run of {side} failed with exit code {result.exit_code}; stopping[/]")
                return int(result.exit_code)
            store.remove(result.run_id)
        out.print(f"bench: warm-up pair {i + 1}/{args.warmup_runs} done (discarded)")
    ids: dict[str, list[str]] = {"A": [""] * args.repeat, "B": [""] * args.repeat}
    with progress(2 * args.repeat, "bench A/B runs") as bar:
        for pair, side in ab_order(args.repeat):
            result = launch(store, commands[side], name=args.name, params=params,
                            tags={**tags, "ab": side, "ab_pair": str(pair)}, options=options, group=group)
            bar.advance(note=f"{side} {result.run_id}")
            if result.exit_code != 0:
                out.print(f"[red]bench: run {result.run_id} ({side}) failed with exit code {result.exit_code}; "
                          "stopping[/]")
                return int(result.exit_code)
            finish_run(store, result.run_id, print_summary=False)
            ids[side][pair] = result.run_id
            out.print(f"bench: pair {pair + 1}/{args.repeat} {side} → {result.run_id}")
    return report_ab(store, group, ids, args)


def ab_settings(args: argparse.Namespace, metric: str) -> Any:
    """The verdict settings of an interleaved study: paired, at ``BENCH_CONFIDENCE`` unless --confidence says
    otherwise (a 95% interval calls 1 A/A study in 20; benchmarks/ab_coverage.py)."""
    from stepscope.analyze.diff import DiffSettings
    from stepscope.analyze.diff.significance import BENCH_CONFIDENCE

    confidence = getattr(args, "confidence", None)
    return DiffSettings(paired=True, metric=metric, threshold=getattr(args, "threshold", 2.0) / 100,
                        confidence=BENCH_CONFIDENCE if confidence is None else confidence)


def report_ab(store: Any, group: str, ids: dict[str, list[str]], args: argparse.Namespace) -> int:
    """The paired diff of the A and B runs, printed (verdict first) or as JSON."""
    from stepscope.analyze.diff import DiffSide, diff
    from stepscope.cli.diff import checked_metric, verdict_exit
    from stepscope.report.diff_terminal import overview, verdict_panel
    from stepscope.report.terminal import console

    a = [store.load(r) for r in ids["A"]]
    b = [store.load(r) for r in ids["B"]]
    metric = checked_metric(getattr(args, "metric", "step_time"), [*a, *b])
    result = diff(DiffSide(f"{group}:A", data=a[0], repeats=tuple(a[1:])),
                  DiffSide(f"{group}:B", data=b[0], repeats=tuple(b[1:])),
                  settings=ab_settings(args, metric))

    code = verdict_exit(result) if args.exit_code else 0
    if args.json:
        print_json({"group": group, "runs": ids, "diff": result.to_dict()})
        return code
    from rich.console import Group
    from rich.text import Text

    out = console()
    metric_flag = "" if metric == "step_time" else f" --metric {metric}"
    if result.settings.threshold != 0.02:
        metric_flag += f" --threshold {100 * result.settings.threshold:g}"
    from stepscope.analyze.diff.significance import BENCH_CONFIDENCE

    if result.settings.confidence != BENCH_CONFIDENCE:  # diff decides interleaved pairs at bench's level
        metric_flag += f" --confidence {result.settings.confidence:g}"
    drift = result.drift.message() if result.drift is not None else None
    out.print(Group(verdict_panel(result), overview(result.overview),
                    *([Text(drift, style="yellow")] if drift else []),
                    Text(f"all tables: stepscope diff {group}:A {group}:B{metric_flag}", style="bold")))
    return code
