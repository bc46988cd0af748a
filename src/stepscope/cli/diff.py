"""Compare two runs, or trace sets: `stepscope diff BASE EXP [--html FILE] [--json]`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from stepscope.cli.common import add_store_args, print_json, store_from, width
from stepscope.errors import UserError
from stepscope.model.tables import RunData

TRACE_SUFFIXES = (".json", ".json.gz")


class DiffCommand:
    """Compare an experiment with a baseline: the measurement quality and the step-time verdict first (run-level:
    one value per run, Welch t on logs for repeats, paired t for `bench --ab` pairs; one run a side is
    inconclusive unless beyond the between-run noise floor), then where the time moved: phases, regions, and
    from profiled windows the module tree, operators and kernels.

    BASE and EXP are runs (id, id prefix, name, `latest`, `latest~N`, or a run directory), several runs of one
    side joined by commas (`a,b,c`), a benchmark (`bench-1a2b3c4d`: its runs; `bench-...:A` / `:B`: one side of
    an interleaved `bench --ab`, compared paired), or trace sets (a folder of per-rank Kineto traces, or one
    trace file), in any mix."""

    name = "diff"
    help = "compare two runs (or trace sets): what changed, and is it real"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("baseline", help="the baseline: a run or a trace folder / file")
        parser.add_argument("experiment", help="the experiment: a run or a trace folder / file")
        parser.add_argument("--json", action="store_true", help="machine-readable (schema stepscope.diff/2)")
        parser.add_argument("--paired", action="store_true",
                            help="the sides' runs are interleaved A/B pairs, in order (automatic for bench --ab)")
        parser.add_argument("--html", metavar="FILE", help="also write a self-contained HTML diff page")
        parser.add_argument("--threshold", type=float, default=2.0, metavar="PCT",
                            help="smallest relative change called a change, in %% (default: 2)")
        parser.add_argument("--confidence", type=float, default=0.95, metavar="C",
                            help="confidence level of the tests (default: 0.95)")
        parser.add_argument("--warmup-steps", type=int, metavar="N", help="steps to exclude (default: automatic)")
        parser.add_argument("--all", action="store_true", help="every row of the long tables")
        parser.add_argument("--width", type=width, help="terminal width for the tables")
        add_store_args(parser)

    def run(self, args: argparse.Namespace) -> int:
        from stepscope.analyze.diff import DiffSettings, diff

        if not 0 < args.confidence < 1:
            raise UserError(f"--confidence {args.confidence}: must be between 0 and 1, e.g. 0.95")
        if not 0 <= args.threshold < 100:
            raise UserError(f"--threshold {args.threshold}: must be a percentage in [0, 100), e.g. 2")
        base = load_side(args, args.baseline)
        exp = load_side(args, args.experiment)
        paired = args.paired or _ab_pair(args.baseline, args.experiment)
        settings = DiffSettings(confidence=args.confidence, threshold=args.threshold / 100, paired=paired)
        floor = store_noise_floor(args, [*base.runs, *exp.runs]) if base.runs and exp.runs else None
        result = diff(base, exp, settings=settings, noise_floor=floor)
        if args.html:
            from stepscope.report.html.diff import render_diff

            try:
                Path(args.html).write_text(render_diff(result), encoding="utf-8")
            except OSError as e:
                raise UserError(f"cannot write {args.html}: {e.strerror or e} — choose another --html FILE") from None
        if args.json:
            print_json(result.to_dict())
            return 0
        from stepscope.report.diff_terminal import diff_report
        from stepscope.report.terminal import console

        out = console(width=args.width)
        out.print(diff_report(result, limit=None if args.all else 15))
        if args.html:
            out.print(f"HTML diff written to {args.html}")
        return 0


def _trace_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    return sorted(p for p in path.iterdir() if p.is_file() and p.name.endswith(TRACE_SUFFIXES))


def _is_run_dir(path: Path) -> bool:
    return path.is_dir() and (path / "manifest.json").is_file()


def _ab_pair(base: str, exp: str) -> bool:
    """Both sides are the two halves of one `bench --ab` group (`bench-x:A`, `bench-x:B`)."""
    return base.partition(":")[0] == exp.partition(":")[0] and base.startswith("bench-") and ":" in base \
        and ":" in exp


def group_runs(args: argparse.Namespace, ref: str) -> list[RunData] | None:
    """The runs of a benchmark reference (`bench-id`, or `bench-id:A` / `:B` for one side of an A/B
    benchmark), in run order; None when ``ref`` is not a benchmark id."""
    gid, _, side = ref.partition(":")
    if not gid.startswith("bench-"):
        return None
    store = store_from(args)
    rows = store.index.runs("grp = ?", (gid,), order="start_ns")
    if side:
        rows = [r for r in rows if r.tags.get("ab") == side.upper()]
    if not rows:
        raise UserError(f"{ref}: no runs in this benchmark{' side' if side else ''} — see `stepscope ls`")
    return [store.load(r.id) for r in rows]


def store_noise_floor(args: argparse.Namespace, compared: list[RunData]) -> Any:
    """The between-run noise of the compared command(s), learned from repeats in the store (groups of runs of
    the same command, host, code and benchmark), the compared runs themselves left out; None when the store
    holds no such repeats (the diff then uses the stated default)."""
    from stepscope.analyze.stats import pooled_noise_floor
    from stepscope.errors import StepscopeError

    try:
        store = store_from(args)
    except StepscopeError:  # run directories outside any store: no history to learn from
        return None
    commands = {" ".join(d.run.command) for d in compared}
    hosts = {d.run.host.hostname for d in compared}
    skip = {d.run.id for d in compared}
    rows = [r for r in store.index.runs() if r.command in commands and r.host in hosts and r.id not in skip
            and r.status == "completed"]
    metrics = store.index.metrics([r.id for r in rows])
    groups: dict[tuple[Any, ...], list[float]] = {}
    for r in rows:
        v = metrics.get(r.id, {}).get("step_time_median_s")
        if v:
            key = (r.grp, r.command, r.host, r.git_commit, r.git_dirty,
                   tuple(sorted(r.params.items())))
            groups.setdefault(key, []).append(float(v))
    return pooled_noise_floor(list(groups.values()), what="runs of this command (repeats, same code and host)")


def load_side(args: argparse.Namespace, ref: str) -> Any:
    """A DiffSide from a run reference, comma-separated runs, a benchmark id, a run directory, or a trace
    folder / file."""
    from stepscope.analyze.diff import DiffSide

    runs = group_runs(args, ref)
    if runs is None and "," in ref:
        runs = [_load_one(args, r) for r in ref.split(",") if r]
    if runs:
        first = side_of_run(runs[0], warmup=args.warmup_steps)
        label = ref if len(runs) > 1 else first.label
        return DiffSide(label=label, data=first.data, traces=first.traces, trace_note=first.trace_note,
                        warmup=args.warmup_steps, repeats=tuple(runs[1:]))
    path = Path(ref)
    if len(ref) > 4096 or any(len(part.encode()) > 255 for part in path.parts):  # cannot be a path: a run id
        return side_of_run(store_from(args).load(ref), warmup=args.warmup_steps)
    if path.exists() and not _is_run_dir(path):
        files = _trace_files(path)
        if not files:
            raise UserError(f"{ref}: no .json or .json.gz trace in this folder — give a run or a folder of "
                            "Kineto traces")
        traces, note = load_window(files)
        return DiffSide(label=str(path), traces=traces, trace_note=note, warmup=args.warmup_steps)
    return side_of_run(_load_one(args, ref), warmup=args.warmup_steps)


def _load_one(args: argparse.Namespace, ref: str) -> RunData:
    path = Path(ref)
    if _is_run_dir(path):
        from stepscope.store.rundir import read_run

        return read_run(path)
    return store_from(args).load(ref)


def side_of_run(data: RunData, *, warmup: int | None = None) -> Any:
    """A DiffSide of a stored run, with its profiled window analysed when it has one."""
    from stepscope.analyze.diff import DiffSide
    from stepscope.app.runtraces import expected_traces

    paths = (Path(data.path) / rel for _, rel in sorted(expected_traces(data).items()))
    files = [p for p in paths if p.is_file()]
    traces, note = load_window(files) if files else (None, None)
    asked = data.run.options.get("profile_steps")
    if not files and isinstance(asked, int) and asked > 0:
        note = (f"a window of {asked} steps was asked for, but no trace was saved (did the run end before "
                "the window?) — run with more steps or a smaller --profile-skip")
    return DiffSide(label=f"{data.run.id} {data.run.name}", data=data, traces=traces, trace_note=note,
                    warmup=warmup)


def load_window(files: list[Path]) -> tuple[Any, str | None]:
    """The trace engine's analysis of the lowest rank's trace among ``files`` (a diff compares one rank's
    window per side), or None and why."""
    from stepscope.analyze.diff.engine import analyze_window
    from stepscope.traces.kineto import RANK_IN_NAME, read_trace

    def rank_key(p: Path) -> tuple[int, str]:
        m = RANK_IN_NAME.search(p.name)
        return (int(m.group(1)) if m else 1 << 30, p.name)

    first = min(files, key=rank_key)
    return analyze_window(read_trace(first)), None
