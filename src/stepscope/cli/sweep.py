"""`stepscope sweep`: run a command over a grid of parameters, store each run tagged with its values."""

from __future__ import annotations

import argparse
import itertools
import secrets
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from stepscope.cli.common import StoreLike, add_store_args, as_store, parse_pairs, print_json
from stepscope.cli.run import add_collection_args, options_from
from stepscope.collect.core.options import Options
from stepscope.errors import UserError
from stepscope.model.changes import fill_placeholders, placeholders
from stepscope.store import Store


def parse_grid(specs: list[str] | None) -> dict[str, list[str]]:
    """``--param workers=0,2,4`` (repeatable) -> {"workers": ["0", "2", "4"]}, in the order given."""
    grid: dict[str, list[str]] = {}
    for spec in specs or []:
        name, sep, values = spec.partition("=")
        vals = [v.strip() for v in values.split(",") if v.strip()]
        if not sep or not name.strip() or not vals:
            raise UserError(f"--param {spec!r}: expected NAME=V1,V2,..., e.g. --param workers=0,2,4")
        if name.strip() in grid:
            raise UserError(f"--param {name.strip()} given twice — list every value in one: --param {name.strip()}=a,b")
        grid[name.strip()] = vals
    if not grid:
        raise UserError("no --param given — a sweep needs at least one, e.g. --param workers=0,2,4")
    return grid


def check_placeholders(command: list[str], grid: dict[str, list[str]]) -> None:
    """Every {name} in the command must have a --param (checked before anything runs)."""
    used = placeholders(command)
    missing = sorted(used - set(grid))
    if missing:
        raise UserError(f"the command uses {{{missing[0]}}} but no --param {missing[0]}=... is given — add one, "
                        f"e.g. --param {missing[0]}=1,2 (placeholders: {', '.join(sorted(used))})")


def fill(command: list[str], values: dict[str, str]) -> list[str]:
    return fill_placeholders(command, values)


def sweep_runs(store: Store, group: str) -> list[Any]:
    """The runs of a stored sweep group as analysis inputs."""
    from stepscope.analyze.runs.sweep import SweepRun
    from stepscope.cli.common import ensure_metrics

    rows = [r for r in store.rows() if r.grp == group]
    ensure_metrics(store, rows)
    metrics = store.index.metrics([r.id for r in rows])
    return [SweepRun(r.id, dict(r.params), r.status, metrics.get(r.id, {})) for r in rows]


def run_grid(store: Store, command: list[str], grid: dict[str, list[str]], *, options: Options, repeat: int,
             name: str | None, tags: Mapping[str, str], group: str) -> None:
    """Launch every point x repeat; a failing point is reported and the sweep goes on."""
    from stepscope.cli.finish import finish_run
    from stepscope.collect.startup.launch import launch

    points = [dict(zip(grid, combo, strict=True)) for combo in itertools.product(*grid.values())]
    total = len(points) * repeat
    for i, (values, rep) in enumerate(itertools.product(points, range(repeat)), 1):
        kv = " ".join(f"{k}={v}" for k, v in values.items())
        result = launch(store, fill(command, values), name=name, params=values,
                        tags={**tags, "sweep": group}, options=options, group=group)
        finish_run(store, result.run_id, print_summary=False)
        state = "ok" if result.exit_code == 0 else f"FAILED (exit code {result.exit_code})"
        print(f"sweep {i}/{total}: {kv} repeat {rep + 1} → {result.run_id} {state}", file=sys.stderr)


def _check_heat(heat: tuple[str, ...] | None, grid: dict[str, list[str]], text: str | None) -> None:
    if heat is not None and (len(heat) != 2 or not set(heat) <= set(grid)):
        raise UserError(f"--heatmap {text}: expected two swept parameters ROW,COL out of {', '.join(grid)}")


class SweepCommand:
    """Run a command over a grid of parameters (every combination, --repeat times each); {NAME} in the
    command takes each value of --param NAME=V1,V2,... Each run is stored with its values as parameters
    and tagged sweep=<group>. Shows the chosen metric per setting, a heat map over two parameters and the
    best setting; a failed point is recorded as failed and the sweep goes on. --group shows a stored
    sweep again without running anything."""

    name = "sweep"
    help = "run a command over a grid of parameters: heat map and best setting"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--param", action="append", metavar="NAME=V1,V2", help="a swept parameter (repeatable)")
        parser.add_argument("--repeat", "-r", type=int, default=1, metavar="N", help="runs per setting (default 1)")
        parser.add_argument("--metric", default="samples_per_s", help="metric to compare (default samples_per_s; "
                            "any `stepscope ls --json` metric, e.g. step_time_median_s)")
        parser.add_argument("--heatmap", metavar="ROW,COL", help="heat map parameters (default: first two)")
        parser.add_argument("--group", help="show a stored sweep (its group id) instead of running one")
        parser.add_argument("--name", help="run name (default: the script's name)")
        parser.add_argument("--tag", action="append", metavar="KEY=VALUE", help="a tag of every run")
        parser.add_argument("--json", action="store_true", help="machine-readable output (schema stepscope.sweep/1)")
        parser.add_argument("--html", metavar="FILE", help="also write an HTML report with the heat map")
        add_collection_args(parser)
        add_store_args(parser)
        parser.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- COMMAND ...", help="the command, with {NAME}s")

    def run(self, args: argparse.Namespace) -> int:
        if args.group:
            return sweep(group=args.group, repeat=args.repeat, metric=args.metric, heatmap=args.heatmap,
                         store=args.store, db=args.db, json=args.json, html=args.html)
        cmd = list(args.cmd or [])
        return sweep(cmd[1:] if cmd[:1] == ["--"] else cmd, params=args.param or (), repeat=args.repeat,
                     metric=args.metric, heatmap=args.heatmap, name=args.name, tags=parse_pairs(args.tag, "tag"),
                     options=options_from(args), store=args.store, db=args.db, json=args.json, html=args.html)


def sweep(command: Sequence[str] = (), *, params: Sequence[str] = (), repeat: int = 1, metric: str = "samples_per_s",
          heatmap: str | None = None, group: str | None = None, name: str | None = None,
          tags: Mapping[str, str] | None = None, options: Options | None = None, store: StoreLike = None,
          db: str | None = None, json: bool = False, html: str | Path | None = None) -> int:
    """Run ``command`` over the grid of ``params`` ("NAME=V1,V2"), ``repeat`` times each, and show ``metric``
    per setting; with ``group``, show that stored sweep again without running anything. 1: a point failed."""
    from stepscope.analyze.runs.sweep import analyze_sweep

    if repeat < 1:
        raise UserError(f"--repeat {repeat}: must be 1 or more")
    heat = tuple(p.strip() for p in heatmap.split(",")) if heatmap else None
    if group:
        opened = as_store(store, db)
        spec = next((s for g, _, _, _, s in opened.index.groups("sweep") if g == group), None)
        if spec is None:
            raise UserError(f"no sweep {group!r} in the store — `stepscope ls --tag sweep=...` lists runs")
        grid = {k: spec["grid"][k] for k in spec.get("params", spec["grid"])}
        _check_heat(heat, grid, heatmap)
    else:
        grid, cmd = parse_grid(list(params)), list(command)
        if not cmd:
            raise UserError("no command to run — usage: stepscope sweep --param NAME=V1,V2 -- python train.py "
                            "--flag {NAME}")
        check_placeholders(cmd, grid)
        _check_heat(heat, grid, heatmap)  # before minutes of runs, not after
        from stepscope.collect.startup.launch import check_command

        check_command(fill(cmd, {k: v[0] for k, v in grid.items()}))
        opened, group = as_store(store, db, create=True), "sweep-" + secrets.token_hex(4)
        opened.index.add_group(group, "sweep", name or "", time.time_ns(),
                               {"command": cmd, "grid": grid, "params": list(grid), "repeat": repeat})
        run_grid(opened, cmd, grid, options=options or Options(), repeat=repeat, name=name, tags=tags or {},
                 group=group)
    runs = sweep_runs(opened, group)
    known = sorted({m for r in runs for m in r.metrics})
    if known and metric not in known:
        raise UserError(f"--metric {metric}: no run of the sweep has it — one of {', '.join(known[:12])}, ...")
    result = analyze_sweep(runs, grid, metric=metric, heat=(heat[0], heat[1]) if heat else None)
    if html:
        from stepscope.report.html.scaling import sweep_page

        Path(html).write_text(sweep_page(result), encoding="utf-8")
    if json:
        print_json({"group": group, **result.to_dict()})
    else:
        from stepscope.report.scaling_terminal import sweep_report
        from stepscope.report.terminal import console

        print(f"sweep {group}", file=sys.stderr)
        console().print(sweep_report(result))
    return 0 if not result.failed else 1
