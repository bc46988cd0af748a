"""`stepscope tune -- CMD`: find a faster setting of threads, DataLoader workers, pin_memory, prefetch and named
command-line parameters with interleaved A/B pairs and early stopping (the search: analyze/runs/tune.py)."""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import shlex
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from stepscope.analyze.runs.tune import MAX_PAIRS, MIN_PAIRS, SCREEN_PAIRS, Comparison, Dimension, TuneResult, search
from stepscope.cli.childout import children_output
from stepscope.cli.common import add_store_args, parse_pairs, print_json, store_from
from stepscope.cli.run import add_collection_args, options_from
from stepscope.cli.sweep import parse_grid
from stepscope.errors import UserError
from stepscope.model.changes import OVERRIDES_ENV, Change, apply_changes

AUTO = ("threads", "workers", "pin_memory", "prefetch")
"""Settings stepscope can change without the user's code (--settings), besides named --param's."""


@dataclass(frozen=True, slots=True)
class Knob:
    """A dimension of the search and how one of its values becomes a Change (None: leave as recorded)."""

    dim: Dimension
    kind: str
    key: str
    label: str
    unset: str | None = None
    """The value that means "as the program does by itself" (no change applied): the recorded one."""

    def change(self, value: str) -> Change | None:
        if value == self.unset:
            return None
        typed: str | int | bool = value
        if self.kind in ("threads",) or (self.kind == "loader" and self.key != "pin_memory"):
            typed = int(value)
        elif self.kind == "loader":
            typed = value == "true"
        return Change(self.kind, self.key, typed, f"{self.label}={value}")  # type: ignore[arg-type]


@dataclass(slots=True)
class Runner:
    """Runs the command at a setting and returns its metric (the search's ``measure``)."""

    store: Any
    command: list[str]
    knobs: dict[str, Knob]
    metric: str
    group: str
    options: Any
    name: str | None
    tags: dict[str, str]
    show_output: bool
    run_ids: list[str] = field(default_factory=list)
    last_failure: tuple[int, str] | None = None
    seen: list[str] = field(default_factory=list)
    """The metrics of the latest successful run."""

    def child(self, setting: Mapping[str, str]) -> tuple[dict[str, str], list[str], list[Change]]:
        """The environment additions and command line of ``setting``."""
        changes = [c for k, v in setting.items() if (c := self.knobs[k].change(v)) is not None]
        base = {OVERRIDES_ENV: os.environ[OVERRIDES_ENV]} if os.environ.get(OVERRIDES_ENV) else {}
        try:
            env, argv = apply_changes(changes, base, self.command)
        except ValueError as e:
            raise UserError(str(e)) from None
        return env, argv, changes

    def __call__(self, setting: Mapping[str, str], note: str) -> float | None:
        from stepscope.cli.finish import finish_run
        from stepscope.collect.startup.launch import launch

        env, argv, _ = self.child(setting)
        label = " ".join(f"{k}={v}" for k, v in setting.items()) or "as recorded"
        with _captured(not self.show_output) as log:
            result = launch(self.store, argv, name=self.name, params=dict(setting), extra_env=env,
                            tags={**self.tags, "tune": self.group, "setting": label}, options=self.options,
                            group=self.group)
        self.run_ids.append(result.run_id)
        value: float | None = None
        if result.exit_code == 0:
            finish_run(self.store, result.run_id, print_summary=False)
            metrics = self.store.index.metrics([result.run_id]).get(result.run_id, {})
            self.seen = [k for k, v in metrics.items() if v is not None]
            if self.metric == "auto":  # the headline throughput; steps/s where the batch size is unknown
                self.metric = "samples_per_s" if metrics.get("samples_per_s") is not None else "steps_per_s"
            got = metrics.get(self.metric)
            if self.metric == "steps_per_s" and got is None and metrics.get("step_time_median_s"):
                got = 1.0 / float(metrics["step_time_median_s"] or 0)
            value = float(got) if got is not None else None
            shown = f"{self.metric} {value:.4g}" if value is not None else f"no {self.metric}"
        else:
            self.last_failure = (result.exit_code, _last_line(log))
            shown = f"FAILED (exit code {result.exit_code})"
        print(f"tune run {len(self.run_ids)}: {label} ({note}) → {result.run_id} {shown}", file=sys.stderr)
        return value


@contextlib.contextmanager
def _captured(quiet: bool) -> Iterator[Path | None]:
    """The children's stdout and stderr into a file (their last line names a failure) while ``quiet``: a search's
    dozens of runs would bury its progress lines."""
    if not quiet:
        yield None
        return
    with tempfile.NamedTemporaryFile(prefix="stepscope-tune-", suffix=".log", delete=False) as f:
        path = Path(f.name)
    with children_output(path, fds=(1, 2)):
        yield path


def _last_line(path: Path | None) -> str:
    if path is None:
        return ""
    try:
        lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    finally:
        path.unlink(missing_ok=True)
    return lines[-1] if lines else ""


def _ladder(cores: int, start: int, low: int, first: int = 1) -> tuple[str, ...]:
    """low, first, 2 x first, ... up to the cores, and the start value, in order."""
    values = {low, start, cores}
    n = first
    while n < cores:
        values.add(n)
        n *= 2
    return tuple(str(v) for v in sorted(v for v in values if v >= low))


def auto_knobs(summary: Any, wanted: Sequence[str]) -> tuple[list[Knob], list[str]]:
    """The settings of ``wanted`` that apply to the program the first run observed, and a line for each that
    does not (and why)."""
    cores = int(summary.run.host.cpu_cores_logical or os.cpu_count() or 1)
    fw = summary.framework or {}
    tf = fw.get("name") == "tensorflow" or (fw.get("name") == "keras" and fw.get("backend") == "tensorflow")
    loaders = [d for r in summary.ranks[:1] for d in r.dataloaders]
    knobs: list[Knob] = []
    notes: list[str] = []
    if "threads" in wanted and tf:
        for key, env in (("inter", "TF_NUM_INTEROP_THREADS"), ("intra", "TF_NUM_INTRAOP_THREADS")):
            set_by_program = int(fw.get(f"{key}_op_threads") or 0)
            if set_by_program:
                notes.append(f"threads: the program sets TensorFlow's {key}-op threads itself ({set_by_program}), "
                             f"which {env} cannot override — make it a --param of the command")
                continue
            values = (*_ladder(cores, 1, 1)[:-1], "default")  # TensorFlow's default is about the cores
            knobs.append(Knob(Dimension(env, values, "default"), "env", env, env, unset="default"))
    elif "threads" in wanted and loaders:
        start = int(loaders[0].get("torch_threads") or cores)
        knobs.append(Knob(Dimension("torch_threads", _ladder(cores, start, 1), str(start)), "threads", "intra",
                          "torch intra-op threads", unset=str(start)))
    elif "threads" in wanted:
        notes.append("threads: neither TensorFlow nor a torch DataLoader was seen in the first run")
    if loaders:
        first = loaders[0]
        workers = int(first.get("num_workers") or 0)
        if "workers" in wanted:
            # one worker only moves a loader's wait to another process: the ladder skips it (0, 2, 4, ...)
            ladder = _ladder(cores, workers, 0, first=2)
            knobs.append(Knob(Dimension("num_workers", ladder, str(workers)), "loader", "num_workers",
                              "DataLoader num_workers", unset=str(workers)))
        if "pin_memory" in wanted:
            if summary.run.host.gpus:
                pin = "true" if first.get("pin_memory") else "false"
                knobs.append(Knob(Dimension("pin_memory", ("false", "true"), pin), "loader", "pin_memory",
                                  "DataLoader pin_memory", unset=pin))
            else:
                notes.append("pin_memory: no GPU on this host, nothing to pin for")
        if "prefetch" in wanted:
            if workers:
                pf = int(first.get("prefetch_factor") or 2)
                knobs.append(Knob(Dimension("prefetch_factor", tuple(str(v) for v in sorted({2, 4, 8, pf})),
                                            str(pf)), "loader", "prefetch_factor", "DataLoader prefetch_factor",
                                  unset=str(pf)))
            else:
                notes.append("prefetch: the DataLoader has no workers (prefetch_factor needs num_workers > 0)")
    elif set(wanted) & {"workers", "pin_memory", "prefetch"}:
        notes.append("workers, pin_memory, prefetch: no torch DataLoader was seen in the first run")
    return knobs, notes


def _settings(text: str | None, has_params: bool) -> list[str]:
    if text is None:
        return [] if has_params else list(AUTO)
    names = [s.strip() for s in text.split(",") if s.strip()]
    if names == ["none"]:
        return []
    bad = [n for n in names if n not in AUTO]
    if bad or not names:
        raise UserError(f"--settings {text}: expected none, or some of {','.join(AUTO)}")
    return names


class TuneCommand:
    """Search for a faster setting of a training command: thread pools (torch intra-op threads, or TensorFlow's
    inter/intra-op pools through TF_NUM_*_THREADS), DataLoader num_workers, pin_memory (with a GPU) and
    prefetch_factor, applied without editing the code, and any command-line parameter named with --param
    NAME=V1,V2,... ({NAME} in the command, or its --NAME option). Two stages. The screen, a compass search from
    the recorded setting (a --param's first value): each round runs the current setting and the neighbouring
    values of every setting as --screen-pairs interleaved blocks and moves to the best on a lax paired verdict
    (one-sided 90%, on the spread of all the screen's pairs); a wrong move only costs runs. The confirmation:
    the screen's best against the start on fresh interleaved pairs, sequential looks from --min-pairs to
    --max-pairs at 99% (bench --ab's level); only it claims a gain, so a program no setting speeds up keeps its
    start in 99 searches of 100 (docs/advice.md). At most --budget runs.
    Ends with the best setting, its gain over the start with the confirmation's interval (or why the start is
    kept, and the pairs that would tell), the runs used, and the command line and environment that reproduce it;
    every run is stored in one group (tags tune=GROUP, setting=...)."""

    name = "tune"
    help = "search threads, DataLoader settings and --param values for the fastest, with interleaved pairs"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--param", action="append", metavar="NAME=V1,V2",
                            help="a command-line parameter to tune, values in order (repeatable)")
        parser.add_argument("--settings", metavar="LIST", help=f"settings to tune besides --param: none or some of "
                            f"{','.join(AUTO)} (default: all that apply without --param, none with it)")
        parser.add_argument("--budget", type=int, default=40, metavar="N", help="runs in total (default: 40)")
        parser.add_argument("--screen-pairs", type=int, default=SCREEN_PAIRS, metavar="N",
                            help=f"pairs a screened candidate gets (default: {SCREEN_PAIRS})")
        parser.add_argument("--min-pairs", type=int, default=MIN_PAIRS, metavar="N",
                            help=f"confirmation pairs before its first look (default: {MIN_PAIRS})")
        parser.add_argument("--max-pairs", type=int, default=MAX_PAIRS, metavar="N",
                            help=f"confirmation pairs after which it cannot tell (default: {MAX_PAIRS})")
        parser.add_argument("--threshold", type=float, default=0.02, metavar="F",
                            help="smallest change that counts, 0.02 = 2%% (default: 0.02)")
        parser.add_argument("--metric", default="auto",
                            help="metric to improve (default: samples_per_s, or steps_per_s = 1 / "
                                 "step_time_median_s where the batch size is unknown; any `stepscope ls --json` "
                                 "metric)")
        parser.add_argument("--name", help="run name (default: the script's name)")
        parser.add_argument("--tag", action="append", metavar="KEY=VALUE", help="a tag of every run")
        parser.add_argument("--show-output", action="store_true", help="pass the runs' output through")
        parser.add_argument("--json", action="store_true", help="machine-readable output (schema stepscope.tune/1)")
        add_collection_args(parser)
        add_store_args(parser)
        parser.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- COMMAND ...", help="the command")

    def run(self, args: argparse.Namespace) -> int:
        return tune(args)


def tune(args: argparse.Namespace) -> int:
    from stepscope.analyze.runs.sweep import higher_is_better
    from stepscope.collect.startup.launch import check_command

    cmd = list(args.cmd or [])
    cmd = cmd[1:] if cmd[:1] == ["--"] else cmd
    if not cmd:
        raise UserError("no command to run — usage: stepscope tune [--param NAME=V1,V2] -- python train.py")
    least = 2 * (args.screen_pairs + args.min_pairs)  # one screened candidate and the confirmation's first look
    if args.screen_pairs < 2 or args.min_pairs < 2 or args.max_pairs < args.min_pairs or args.budget < least \
            or not 0 < args.threshold < 1:
        raise UserError(f"--budget {args.budget} --screen-pairs {args.screen_pairs} --min-pairs {args.min_pairs} "
                        f"--max-pairs {args.max_pairs} --threshold {args.threshold}: need screen-pairs >= 2, "
                        f"2 <= min-pairs <= max-pairs, a budget of {max(least, 8)} or more (2 x (screen-pairs + "
                        "min-pairs)), and a threshold between 0 and 1")
    grid = parse_grid(args.param) if args.param else {}
    wanted = _settings(args.settings, bool(grid))
    if not grid and not wanted:
        raise UserError("nothing to tune: give --param NAME=V1,V2 or --settings")
    knobs = {n: Knob(Dimension(n, tuple(v), v[0]), "param", n, n) for n, v in grid.items()}
    options = options_from(args)
    group = "tune-" + secrets.token_hex(4)
    runner = Runner(None, cmd, knobs, args.metric, group, options, args.name, parse_pairs(args.tag, "tag"),
                    args.show_output)
    _, first_argv, _ = runner.child({n: k.dim.start for n, k in knobs.items()})  # a param the command lacks
    check_command(first_argv)
    runner.store = store_from(args, create=True)
    notes: list[str] = []
    probe_runs = 0
    if wanted:  # what applies depends on the program: one run as recorded shows its framework and loaders
        value = runner({n: k.dim.start for n, k in knobs.items()}, "first run, as recorded")
        probe_runs = 1
        _fail_first(runner)
        if value is None:
            raise _no_metric(runner, args.metric)
        from stepscope.app import RunAnalysis
        from stepscope.store.rundir import read_run

        found, notes = auto_knobs(RunAnalysis(read_run(runner.store.run_path(runner.run_ids[0]))).summary, wanted)
        knobs.update({k.dim.name: k for k in found})
        if not knobs:
            print_notes(notes)
            raise UserError("nothing to tune for this program: " + "; ".join(notes))
    higher = args.metric == "auto" or higher_is_better(args.metric)
    result = search([k.dim for k in knobs.values()], runner, budget=args.budget - probe_runs, metric=args.metric,
                    higher_is_better=higher, screen_pairs=args.screen_pairs, min_pairs=args.min_pairs,
                    max_pairs=args.max_pairs, threshold=args.threshold)
    if result.start_failed:
        _fail_first(runner)
        raise _no_metric(runner, args.metric)
    result = replace(result, metric=runner.metric)
    env, argv, changes = runner.child(result.best)
    spec = {"command": cmd, "metric": args.metric, "budget": args.budget,
            "space": {n: list(k.dim.values) for n, k in knobs.items()}, "runs": runner.run_ids,
            "result": result.to_dict(), "notes": notes}
    runner.store.index.add_group(group, "tune", args.name or "", time.time_ns(), spec)
    runs = result.runs + probe_runs
    if args.json:
        print_json({"group": group, **result.to_dict(), "runs": runs, "run_ids": runner.run_ids, "notes": notes,
                    "command": argv, "env": env, "changes": [c.to_dict() for c in changes]})
        return 0
    print_notes(notes)
    print(render(result, runs, group, env, argv, changes))
    return 0


def _fail_first(runner: Runner) -> None:
    """The first run failed: nothing is kept, and the error names its exit code and last line of output."""
    if runner.last_failure is None or len(runner.run_ids) != 1:
        return
    code, line = runner.last_failure
    runner.store.remove(runner.run_ids[0])
    raise UserError(f"the command failed on its first run (exit code {code})" + (f": {line}" if line else "") +
                    " — run it alone to see why; nothing was stored")


def _no_metric(runner: Runner, metric: str) -> UserError:
    runner.store.remove(runner.run_ids[0])
    return UserError(f"the first run gave no {metric} — choose --metric from what it had: "
                     f"{', '.join(sorted(runner.seen)[:12]) or 'none'}; nothing was stored")


def print_notes(notes: Sequence[str]) -> None:
    for n in notes:
        print(f"tune: {n}", file=sys.stderr)


def render(r: TuneResult, runs: int, group: str, env: Mapping[str, str], argv: Sequence[str],
           changes: Sequence[Change]) -> str:
    """The answer in a few lines: the screen's comparisons, the confirmation, the best setting with its gain and
    interval (or why the start is kept), runs used, how to reproduce."""
    best = " ".join(f"{k}={v}" for k, v in r.best.items())
    lines = [f"tune {group}: {runs} runs (budget {r.budget + runs - r.runs}; screen {r.screen_runs}, "
             f"confirmation {r.runs - r.screen_runs})"
             + ("; the budget ran out before the search ended" if r.budget_exhausted else "")]
    for c in r.comparisons:
        cand = " ".join(f"{k}={v}" for k, v in c.candidate.items() if c.current.get(k) != v)
        lines.append(f"  screen: {cand} vs current: {_figures(r.metric, c)} — {c.outcome}")
    screened = " ".join(f"{k}={v}" for k, v in r.screen_best.items())
    conf = r.confirmation
    if conf is not None:
        lines.append(f"  confirmation: {screened} vs the start on fresh pairs: {_figures(r.metric, conf)} — "
                     f"{conf.outcome}")
    if r.gain is not None and conf is not None:
        level = f"{conf.confidence:.2%} interval " if conf.confidence else "interval "
        ci = f", {level}[{(r.gain_low or 0) - 1:+.1%}, {(r.gain_high or 0) - 1:+.1%}]" \
            if r.gain_low and r.gain_high else ""
        lines.append(f"best setting: {best}: {r.metric} {(r.gain - 1) * 100:+.1f}% over the start{ci} "
                     "(the confirmation's pairs)")
    elif conf is None:
        why = "the budget left no room for a confirmation" if r.screen_best != r.start else \
            "the screen found no setting better"
        lines.append(f"best setting: {best} (the start: {why}; no gain claimed)")
    else:
        why = {"worse": "it was slower than the start", "no gain": "it was not faster than the start",
               "failed": "its run failed", "unfinished": "the budget ran out before the confirmation decided"}.get(
            str(conf.outcome), "the confirmation could not tell it from the start")
        lines.append(f"best setting: {best} (the start kept: the screen picked {screened}, but {why}; no gain "
                     "claimed)" + (f"; {conf.note}" if conf.note else ""))
    shown_env = {k: v for k, v in env.items() if k != OVERRIDES_ENV}
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in shown_env.items())
    lines.append("reproduce: " + (prefix + " " if prefix else "") + shlex.join(argv))
    code = [c.label for c in changes if c.kind in ("loader", "threads")]
    if code:
        over = shlex.quote(env.get(OVERRIDES_ENV, ""))
        lines.append(f"  in the code: {', '.join(code)} (or under stepscope: {OVERRIDES_ENV}={over} stepscope run "
                     f"-- {shlex.join(argv)})")
    return "\n".join(lines)


def _figures(metric: str, c: Comparison) -> str:
    ratio = f"{c.ratio:.3f}" if c.ratio else "—"
    ci = f" [{c.ci_low:.3f}, {c.ci_high:.3f}]" if c.ci_low and c.ci_high else ""
    return f"{metric} x{ratio}{ci} over {c.pairs} pairs"
