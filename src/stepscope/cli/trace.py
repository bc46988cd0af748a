"""`stepscope trace`: analyse Kineto / PyTorch-profiler traces (files or folders of per-rank traces)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

import orjson
from rich.console import Console

from stepscope.analyze.trace.kernels import KernelStats
from stepscope.analyze.trace.multirank import TraceSetAnalysis
from stepscope.analyze.trace.ops import OP_SORT_KEYS
from stepscope.analyze.trace.rankdist import (
    as_distributions,
    kernel_distributions,
    operator_distributions,
    traceset_distributions,
)
from stepscope.errors import UserError
from stepscope.executor import executor_for
from stepscope.executor.dask import CONNECT_TIMEOUT_S
from stepscope.executor.traceset import analyze_traceset
from stepscope.report import ranks_terminal
from stepscope.report import trace_terminal as view
from stepscope.report.console import console as report_console
from stepscope.traces.components import ComponentRules
from stepscope.traces.kineto import RANK_IN_NAME

UNREAD_EXIT = 3
"""Exit status of `trace analyze` / `kernels` / `ops` when some ranks could not be read (the others' figures are
printed); none readable is exit 2 (a one-line TraceError)."""


def unread_status(errors: Sequence[str], total: int) -> int:
    """0 when every trace was read; else one line on stderr naming the ranks (or files) that were not, and
    :data:`UNREAD_EXIT`."""
    if not errors:
        return 0
    names = []
    for e in errors:
        name = Path(e.split(": ", 1)[0]).name  # each error line starts with its file
        m = RANK_IN_NAME.search(name)
        names.append(f"rank {m.group(1)}" if m else name)
    shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
    print(f"stepscope: error: {len(errors)} of {total} traces could not be read ({shown}): the figures are of "
          f"the others (exit status {UNREAD_EXIT})", file=sys.stderr, flush=True)
    return UNREAD_EXIT


def _sequence_options(args: argparse.Namespace) -> dict[str, int | bool | None]:
    """analyze_trace's kernel-sequence options from ``trace analyze``'s flags (none for other subcommands)."""
    if args.trace_command != "analyze":
        return {}
    lo, hi, top = args.seq_min, args.seq_max, args.seq_top
    if not 1 <= lo <= hi <= 64 or top < 1:
        raise UserError(f"--seq-min {lo} --seq-max {hi} --seq-top {top}: need 1 <= min <= max <= 64 and top >= 1")
    step = args.critical_path_step
    if step is not None and step < 0:
        raise UserError(f"--critical-path-step {step}: the first ProfilerStep is 0")
    return {"sequence_min": lo, "sequence_max": hi, "sequence_top": top, "with_critical_path": args.critical_path,
            "critical_path_step": step}


def _emit_json(data: Any) -> None:
    sys.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode() + "\n")


def _executor_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workers", type=int, default=None, help="local processes for multi-rank folders "
                   "(default: half the CPUs)")
    p.add_argument("--dask", metavar="ADDRESS", default=None, help="run the per-rank analyses on a Dask cluster: "
                   "a scheduler address (tcp://host:8786) or local:N for a LocalCluster of N processes")
    p.add_argument("--dask-timeout", metavar="SECONDS", type=float, default=CONNECT_TIMEOUT_S,
                   help=f"give up when the scheduler does not answer within this (default {CONNECT_TIMEOUT_S:g})")


class TraceCommand:
    """Analyse profiler traces: GPU time breakdown, idle causes, kernels by component, operators.

      stepscope trace analyze traces/            every analysis, ranks side by side (distributions past 64)
      stepscope trace analyze traces/ --dask tcp://sched:8786   the same on a Dask cluster (or --dask local:4)
      stepscope trace kernels traces/ --top 20 --by component
      stepscope trace ops traces/ --sort device_self
      stepscope trace comm-matrix traces/         rank x rank bytes and time of communication kernels
      stepscope trace rules [--explain NAME]      the component rules in effect

    Exit status: 0; 3 when some traces could not be read (named on stderr; the figures are of the others);
    2 when none could, or the Dask cluster could not start or be reached (one line).
    """

    name = "trace"
    help = "analyse Kineto / PyTorch-profiler traces"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        sub = parser.add_subparsers(dest="trace_command", metavar="ACTION", required=True)
        for action, text in (("analyze", "every analysis of each rank"), ("kernels", "GPU time by kernel"),
                             ("ops", "CPU operators with attributed GPU time")):
            p = sub.add_parser(action, help=text)
            p.add_argument("paths", nargs="+", help="trace files (.json, .json.gz) or folders of them")
            p.add_argument("--json", action="store_true", help="print JSON instead of tables")
            p.add_argument("--wide", action="store_true", help="names whole, not shortened")
            p.add_argument("--top", type=int, default=30, help="rows per table (default 30)")
            _executor_options(p)
            if action == "kernels":
                p.add_argument("--by", choices=("component", "kernel"), default="component")
            if action == "ops":
                p.add_argument("--sort", choices=OP_SORT_KEYS, default="device_total")
            if action == "analyze":  # the frequent kernel sequences: lengths and how many of each
                p.add_argument("--seq-min", type=int, default=3, metavar="N", help="shortest kernel sequence (3)")
                p.add_argument("--seq-max", type=int, default=5, metavar="N", help="longest kernel sequence (5)")
                p.add_argument("--seq-top", type=int, default=10, metavar="N",
                               help="kernel sequences kept per length (10)")
            if action == "analyze":
                p.add_argument("--critical-path", action="store_true",
                               help="add each rank's critical path and, for several ranks, whom the longest one "
                               "waited for at collectives (a worker's memory: about 1.9 times its rank's table, "
                               "1.4 without)")
                p.add_argument("--critical-path-step", type=int, metavar="N",
                               help="the critical path of the N-th ProfilerStep only (0: the first, HTA's default "
                               "window) instead of the whole trace")
                p.add_argument("--all", action="store_true", help="every row of the roofline and collectives "
                               "tables (default: the 20 largest)")
        c = sub.add_parser("comm-matrix", help="rank x rank bytes and time of the communication kernels")
        c.add_argument("paths", nargs="+", help="per-rank trace files (.json, .json.gz) or folders of them")
        c.add_argument("--json", action="store_true", help="print JSON (schema stepscope.comm_matrix/1)")
        c.add_argument("--top", type=int, default=5, help="busiest pairs listed (default 5)")
        _executor_options(c)
        r = sub.add_parser("rules", help="print the component rules in effect")
        r.add_argument("--explain", metavar="NAME", help="say which rule names NAME's component")
        r.add_argument("--json", action="store_true")

    def run(self, args: argparse.Namespace) -> int:
        if getattr(args, "top", 1) < 1:
            raise UserError(f"--top {args.top}: must be 1 or more")
        console = report_console()
        if args.trace_command == "rules":
            return self._rules(args, console)
        if args.trace_command == "comm-matrix":
            return self._comm_matrix(args, console)
        with closing(executor_for(dask=args.dask, workers=args.workers, timeout_s=args.dask_timeout)) as ex:
            result = analyze_traceset(args.paths, executor=ex, progress=True, options=_sequence_options(args))
        if args.trace_command == "analyze":
            status = self._analyze(result, args, console)
        elif args.trace_command == "kernels":
            status = self._kernels(result, args, console)
        else:
            status = self._ops(result, args, console)
        return status or unread_status(result.errors, len(result.ranks) + len(result.errors))

    def _rules(self, args: argparse.Namespace, console: Console) -> int:
        rules = ComponentRules.for_project()
        if args.explain is not None:
            e = rules.explain(args.explain)
            _emit_json(e.to_dict()) if args.json else console.print(view.explain_view(e))
        else:
            _emit_json([r.to_dict() for r in rules.rules]) if args.json else console.print(view.rules_view(rules))
        return 0

    def _comm_matrix(self, args: argparse.Namespace, console: Console) -> int:
        from stepscope.executor.traceset import comm_matrix_and_unread
        from stepscope.report.commmatrix import comm_matrix_view

        with closing(executor_for(dask=args.dask, workers=args.workers, timeout_s=args.dask_timeout)) as ex:
            m, unread, total = comm_matrix_and_unread(args.paths, top=args.top, executor=ex, progress=True)
        if len(m.ranks) < 2:
            raise UserError(f"{', '.join(args.paths)}: the traces name only rank {m.ranks[0]} — a communication "
                            "matrix needs the traces of two or more ranks (or collectives naming their group)")
        _emit_json(m.to_dict()) if args.json else console.print(comm_matrix_view(m))
        return unread_status(unread, total)

    def _analyze(self, result: TraceSetAnalysis, args: argparse.Namespace, console: Console) -> int:
        if args.json:
            _emit_json(result.to_dict())
            return 0
        from stepscope.report.roofline_terminal import ROOFLINE_TOP, collectives_view, roofline_view

        top = None if args.all else ROOFLINE_TOP
        if as_distributions(len(result.ranks)):
            console.print(ranks_terminal.traceset_distribution_view(result, traceset_distributions(result)))
            if result.collectives is not None:  # across many ranks, who arrives last matters most
                console.print(collectives_view(result.collectives, top=top))
            return 0
        for a in result.ranks:
            console.print(view.summary_view(a))
            if a.roofline is not None and a.roofline.ops:
                console.print(roofline_view(a.roofline, rank=a.rank, top=top))
        console.print(view.traceset_view(result))
        console.print(ranks_terminal.traceset_extras(result))
        if result.collectives is not None:
            console.print(collectives_view(result.collectives, top=top))
        return 0

    def _kernels(self, result: TraceSetAnalysis, args: argparse.Namespace, console: Console) -> int:
        def rows(a: Any) -> tuple[KernelStats, ...]:
            return a.kernels.by_component if args.by == "component" else a.kernels.by_kernel  # type: ignore[no-any-return]
        if args.json:
            _emit_json({str(a.rank): [s.to_dict() for s in rows(a)[:args.top]] for a in result.ranks})
            return 0
        if as_distributions(len(result.ranks)):
            from stepscope.cli.views.traces import shortened  # (it loads the run-store application layer)

            console.print(ranks_terminal.distribution_table(
                f"{len(result.ranks)} ranks: GPU time by {args.by} across ranks (top {args.top} by total)",
                shortened(kernel_distributions(result, by=args.by, top=args.top))))
            return 0
        for a in result.ranks:
            console.print(view.kernel_view(rows(a), top=args.top, title=f"rank {a.rank}: GPU time by {args.by}"))
        return 0

    def _ops(self, result: TraceSetAnalysis, args: argparse.Namespace, console: Console) -> int:
        key = f"{args.sort}_ns" if args.sort != "calls" else "calls"
        ranked = {a.rank: sorted(a.operators, key=lambda o: -getattr(o, key)) for a in result.ranks}
        if args.json:
            _emit_json({str(rank): [o.to_dict() for o in ops[:args.top]] for rank, ops in ranked.items()})
            return 0
        if as_distributions(len(result.ranks)):
            from stepscope.cli.views.traces import shortened

            console.print(ranks_terminal.distribution_table(
                f"{len(result.ranks)} ranks: operators' {args.sort.replace('_', ' ')} across ranks "
                f"(top {args.top} by total)", shortened(operator_distributions(result, sort=args.sort, top=args.top))))
            return 0
        for ops in ranked.values():
            console.print(view.ops_view(ops, top=args.top))
        return 0
