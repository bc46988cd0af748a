"""`stepscope scaling`: weak / strong scaling of a group of runs at several world sizes."""

from __future__ import annotations

import argparse
import fnmatch
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from stepscope.cli.common import StoreLike, add_store_args, as_store, parse_pairs, print_json, width
from stepscope.errors import UserError
from stepscope.model.tables import RunData
from stepscope.store import Store


def parse_target(text: str | None):  # type: ignore[no-untyped-def]
    """``loss=0.5`` -> Target; a one-line error otherwise."""
    from stepscope.analyze.runs.scaling import Target

    if text is None:
        return None
    name, sep, value = text.partition("=")
    try:
        return Target(name.strip(), float(value)) if sep and name.strip() else _bad_target(text)
    except ValueError:
        return _bad_target(text)


def _bad_target(text: str) -> None:
    raise UserError(f"--target {text!r}: expected METRIC=VALUE with a number, e.g. --target loss=0.5")


def _check_target_metric(runs: list[RunData], metric: str) -> None:
    """A --target metric no run logged is a typo, not 'never reached'."""
    known = sorted({str(n) for d in runs for r in d.ranks for n in r.metrics.names})
    if metric not in known:
        raise UserError(f"--target {metric}=...: no selected run logged a metric {metric!r} — logged: "
                        f"{', '.join(known[:12]) or 'none'}")


def select_runs(store: Store, refs: list[str], tags: dict[str, str], pattern: str | None) -> list[str]:
    """Run ids: the listed runs, else every run with the tags and whose name matches the pattern."""
    if refs:
        return [store.resolve(r) for r in refs]
    if not tags and not pattern:
        raise UserError("no runs given — list runs (stepscope scaling RUN1 RUN2 ...), or select them with "
                        "--tag KEY=VALUE or --name PATTERN")
    rows = [r for r in store.rows() if all(r.tags.get(k) == v for k, v in tags.items())]
    if pattern:
        rows = [r for r in rows if fnmatch.fnmatchcase(r.name, pattern)]
    if not rows:
        what = " ".join([f"--tag {k}={v}" for k, v in tags.items()] + ([f"--name {pattern}"] if pattern else []))
        raise UserError(f"no run matches {what} — `stepscope ls` lists runs with their tags")
    return [r.id for r in reversed(rows)]


class ScalingCommand:
    """Scaling of a group of runs at several world sizes: samples, total time, per-rank and total
    throughput (mean ± std), ideal lines from the smallest size, efficiency; first vs later epochs where
    epochs exist; communication share; time to a target metric value. Weak or strong (inferred from the
    samples unless --mode is given)."""

    name = "scaling"
    help = "weak / strong scaling of runs at several world sizes"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("runs", nargs="*", metavar="RUN", help="runs of the study (or select with --tag / --name)")
        parser.add_argument("--tag", action="append", metavar="KEY=VALUE", help="runs with this tag (repeatable)")
        parser.add_argument("--name", metavar="PATTERN", help="runs whose name matches (shell pattern, e.g. 'ddp-*')")
        parser.add_argument("--mode", choices=("weak", "strong"), help="scaling mode (default: inferred)")
        parser.add_argument("--target", metavar="METRIC=VALUE", help="time to reach a metric value, e.g. loss=0.5")
        parser.add_argument("--warmup-steps", type=int, metavar="N", help="steps to exclude (default: automatic)")
        parser.add_argument("--json", action="store_true", help="machine-readable output (schema stepscope.scaling/1)")
        parser.add_argument("--html", metavar="FILE", help="also write an HTML report with the plots")
        parser.add_argument("--width", type=width, help="terminal width for the tables")
        add_store_args(parser)

    def run(self, args: argparse.Namespace) -> int:
        return scaling(args.runs, store=as_store(args.store, args.db), tags=parse_pairs(args.tag, "tag"),
                       name=args.name, mode=args.mode, target_spec=args.target, warmup=args.warmup_steps,
                       json=args.json, html=args.html, width=args.width)


def scaling(runs: Sequence[str] = (), *, store: StoreLike = None, tags: Mapping[str, str] | None = None,
            name: str | None = None, mode: str | None = None, target_spec: str | None = None,
            warmup: int | None = None, json: bool = False, html: str | Path | None = None,
            width: int | None = None) -> int:
    """The scaling study of ``runs`` (or of the runs with ``tags`` / whose name matches ``name``)."""
    from stepscope.analyze.runs.scaling import analyze_scaling

    target = parse_target(target_spec)
    opened = as_store(store)
    ids = select_runs(opened, list(runs), dict(tags or {}), name)
    loaded = [opened.load(i) for i in ids]
    if target is not None:
        _check_target_metric(loaded, target.metric)
    result = analyze_scaling(loaded, mode=mode, target=target, warmup=warmup)
    if len(result.sizes) < 2:
        sizes = ", ".join(map(str, result.sizes)) or "none"
        raise UserError(f"the {len(ids)} run(s) selected have a single world size ({sizes}) — a scaling study "
                        "needs runs at two or more sizes, e.g. torchrun --nproc-per-node 1, 2 and 4")
    if html:
        from stepscope.report.html.scaling import scaling_page

        Path(html).write_text(scaling_page(result), encoding="utf-8")
    if json:
        for w in result.warnings:
            print(f"stepscope: warning: {w}", file=sys.stderr)
        print_json(result.to_dict())
        return 0
    from stepscope.report.scaling_terminal import scaling_report
    from stepscope.report.terminal import console

    console(width=width).print(scaling_report(result))
    return 0
