"""Show a run's recommendations; with --verify, measure them (cli/verify.py)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING

from stepscope.cli.common import StoreLike, add_store_args, as_store, load_analysis, print_json, width
from stepscope.errors import UserError

if TYPE_CHECKING:
    from stepscope.analyze.advisor.verify import Outcome


def advise(run: str = "latest", *, store: StoreLike = None, db: str | None = None, warmup: int | None = None,
           json: bool = False, width: int | None = None) -> int:
    """Print run ``run``'s recommendations (terminal tables, or JSON schema stepscope.advice/1), and the stored
    verifications of them (``advise --verify``)."""
    ra = load_analysis(run, store, db=db, warmup=warmup)
    verified = stored_verifications(ra.data.run.id, store, db)
    if json:
        print_json({"run": ra.data.run.id, **ra.advice.to_dict(),
                    "verifications": [{"group": g, "outcomes": [o.to_dict() for o in outs]} for g, outs in verified]})
        return 0
    from stepscope.report.advice import advice_view, verification_view
    from stepscope.report.terminal import console

    out = console(width=width)
    out.print(advice_view(ra.advice))
    for group, outs in verified[-1:]:
        out.print(verification_view(ra.data.run.id, group, outs))
    return 0


def stored_verifications(run_id: str, store: StoreLike, db: str | None) -> list[tuple[str, list[Outcome]]]:
    """The run's stored `advise --verify` results, oldest first (none when the store cannot be opened)."""
    from stepscope.cli.verify import stored_outcomes

    try:
        return stored_outcomes(as_store(store, db), run_id)
    except UserError:  # a run directory given without a store: no verification to show
        return []


def verify_advice(run: str = "latest", *, store: StoreLike = None, db: str | None = None, repeat: int = 10,
                  together: bool = False, rule: str | None = None, changes: Sequence[str] = (), json: bool = False,
                  quiet_runs: bool = False, width: int | None = None, metric: str = "step_time") -> int:
    """Re-run run ``run``'s command as up to ``repeat`` interleaved A/B pairs per suggestion (B: the suggestion
    applied; sequential: it stops once the verdict is decided) and print predicted against realised savings
    with their verdicts, decided on ``metric`` (diff/metric.py: the median step time by default). A run that
    cannot be re-run is a one-line UserError (exit 2) before anything is stored."""
    from stepscope.analyze.diff.metric import METRICS
    from stepscope.cli.verify import parse_change, plan, recorded, verify

    if repeat < 2:
        raise UserError(f"--repeat {repeat}: a verdict needs at least 2 A/B pairs")
    if metric not in METRICS:
        raise UserError(f"--metric {metric}: expected one of {', '.join(METRICS)}")
    st = as_store(store, db)
    extra = [parse_change(c) for c in changes]
    rec = recorded(st, run)
    todo, code = plan(st, rec, rule=rule, extra=extra)
    from stepscope.report.advice import verification_view
    from stepscope.report.terminal import console

    if not todo:
        lines = "; ".join(code) if code else "no rule fired"
        console(width=width).print(f"advise --verify: nothing to verify for run {rec.run_id} — no suggestion is a "
                                   f"setting stepscope can apply ({lines})")
        return 0
    group, outcomes = verify(st, rec, todo, repeat=repeat, together=together,
                             children_out="null" if quiet_runs else "stderr" if json else "inherit", metric=metric)
    if json:
        from stepscope.analyze.advisor.verify import VERIFY_SCHEMA

        print_json({"schema": VERIFY_SCHEMA, "run": rec.run_id, "group": group, "metric": metric,
                    "outcomes": [o.to_dict() for o in outcomes], "not_tried": code})
        return 0
    out = console(width=width)
    out.print(verification_view(rec.run_id, group, outcomes))
    for line in code:
        out.print(line, style="dim")
    return 0


class AdviseCommand:
    """Recommendations for a stored run: each rule that fired, with its evidence (the numbers), its
    threshold, the change it suggests and the time it could save, most valuable first. Rules that need
    kernels read the run's profiled window (stepscope run --profile-steps N).

    --verify measures the suggestions that are settings (DataLoader workers, thread counts, environment
    variables, a --param of the command): the run's command is re-run in its working directory as interleaved
    A/B pairs per suggestion, A as recorded and B with the suggestion applied, 3 pairs first and more until the
    verdict is decided or --repeat pairs are spent (each look at its share of a 1% error: docs/advice.md), and
    each gets its predicted saving, the realised one with its interval, and a verdict: confirmed, not
    confirmed, worse, or cannot tell (with the MDE and the pairs that would tell). --all then tries the
    confirmed ones together. The runs are stored as one group, tagged verify=RUN. Suggestions that need a code
    change are listed, not tried. Exits 0 whatever the verdicts; 2 when the run cannot be re-run (killed,
    running, gone, no command)."""

    name = "advise"
    help = "what to change to make a run faster, with the evidence; --verify measures it"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("run", nargs="?", default="latest", help="the run (default: latest)")
        parser.add_argument("--json", action="store_true", help="machine-readable (schema stepscope.advice/1)")
        parser.add_argument("--warmup-steps", type=int, metavar="N", help="steps to exclude (default: automatic)")
        parser.add_argument("--width", type=width, help="terminal width")
        parser.add_argument("--wide", action="store_true", help="names whole, not shortened")
        parser.add_argument("--verify", action="store_true",
                            help="re-run the command as A/B pairs, each suggestion applied, and give verdicts")
        parser.add_argument("--repeat", "-r", type=int, default=10, metavar="N",
                            help="with --verify: at most this many A/B pairs per suggestion; it stops at 3, 5 "
                                 "or 8 once the verdict is decided (default: 10)")
        parser.add_argument("--all", action="store_true", dest="together",
                            help="with --verify: then the confirmed suggestions together")
        parser.add_argument("--rule", metavar="ID", help="with --verify: only this rule's suggestion")
        parser.add_argument("--change", action="append", metavar="KIND:KEY=VALUE",
                            help="with --verify: try this setting instead of the advice's (repeatable; with "
                                 "--rule, besides that rule's): env:OMP_NUM_THREADS=2, loader:num_workers=4, "
                                 "threads:intra=2, param:batch_size=64")
        from stepscope.analyze.diff.metric import METRICS

        parser.add_argument("--metric", choices=list(METRICS), default=None,
                            help="with --verify: the clock the verdicts are decided on, as diff's --metric: the "
                                 "median step (step_time, the default: robust), the mean step (step_time_mean: "
                                 "total time, what the advisor's per-step savings are estimated on; it finds a "
                                 "saving on a few slow steps that leaves the median unmoved, and needs more pairs "
                                 "on a busy host) or a CPU clock")
        parser.add_argument("--quiet-runs", action="store_true",
                            help="with --verify: the re-runs' standard output is not shown (with --json it goes "
                                 "to stderr)")
        add_store_args(parser)

    def run(self, args: argparse.Namespace) -> int:
        if args.verify:
            return verify_advice(args.run, store=args.store, db=args.db, repeat=args.repeat,
                                 together=args.together, rule=args.rule, changes=args.change or (), json=args.json,
                                 quiet_runs=args.quiet_runs, width=args.width, metric=args.metric or "step_time")
        if args.together or args.rule or args.change or args.quiet_runs or args.metric:
            raise UserError("--all, --rule, --change, --metric and --quiet-runs go with --verify: stepscope advise RUN "
                            "--verify")
        return advise(args.run, store=args.store, db=args.db, warmup=args.warmup_steps, json=args.json,
                      width=args.width)
