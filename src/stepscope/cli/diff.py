"""Compare two runs, or trace sets: `stepscope diff BASE EXP [--html FILE] [--json]`."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stepscope.cli.common import StoreLike, add_store_args, as_store, load_analysis, print_json, width
from stepscope.errors import UserError
from stepscope.model.tables import RunData

if TYPE_CHECKING:
    from stepscope.app import RunAnalysis
    from stepscope.store import Store


def diff(baseline: str, experiment: str, *, store: StoreLike = None, db: str | None = None, json: bool = False,
         paired: bool = False, html: str | Path | None = None, threshold: float = 2.0, confidence: float | None = None,
         warmup: int | None = None, all_rows: bool = False, width: int | None = None,
         exit_code: bool = False, metric: str = "step_time") -> int:
    """Compare ``experiment`` with ``baseline`` (runs, run lists, benchmarks, run directories or trace folders)
    and print the comparison; ``threshold`` in %; ``metric``: the clock the verdict is decided on (step_time,
    step_cpu_time, process_cpu_time). The store is opened only if a side names one of its runs.
    Returns 0, or with ``exit_code`` the verdict's code (``verdict_exit``)."""
    from stepscope.analyze.diff import DiffSettings
    from stepscope.analyze.diff import diff as diff_sides

    if confidence is not None and not 0 < confidence < 1:
        raise UserError(f"--confidence {confidence}: must be between 0 and 1, e.g. 0.95")
    if not 0 <= threshold < 100:
        raise UserError(f"--threshold {threshold}: must be a percentage in [0, 100), e.g. 2")
    lazy = _StoreArgs(store, db)
    base = load_side(lazy, baseline, warmup=warmup)
    exp = load_side(lazy, experiment, warmup=warmup)
    paired = paired or _ab_pair(baseline, experiment)
    if confidence is None:  # interleaved pairs decide at bench --ab's level, so both print one verdict
        from stepscope.analyze.diff.significance import BENCH_CONFIDENCE

        confidence = BENCH_CONFIDENCE if paired else 0.95
    settings = DiffSettings(confidence=confidence, threshold=threshold / 100, paired=paired,
                            metric=checked_metric(metric, [*base.runs, *exp.runs]))
    floor = store_noise_floor(lazy, [*base.runs, *exp.runs]) if base.runs and exp.runs else None
    result = diff_sides(base, exp, settings=settings, noise_floor=floor)
    if html:
        from stepscope.report.html.diff import render_diff

        try:
            Path(html).write_text(render_diff(result), encoding="utf-8")
        except OSError as e:
            raise UserError(f"cannot write {html}: {e.strerror or e} — choose another --html FILE") from None
    code = verdict_exit(result) if exit_code else 0
    if json:
        print_json(result.to_dict())
        return code
    from stepscope.report.diff_terminal import diff_report
    from stepscope.report.terminal import console

    out = console(width=width)
    out.print(diff_report(result, limit=None if all_rows else 15))
    if html:
        out.print(f"HTML diff written to {html}")
    return code


def checked_metric(name: str, runs: list[RunData]) -> str:
    """``name`` when it is a clock every compared run measured; a one-line UserError (exit 2) otherwise: a run
    recorded before the CPU clocks has no CPU figure to decide on ("not measured", never a zero)."""
    from stepscope.analyze.diff.metric import METRICS, not_measured_message, unmeasured

    if name not in METRICS:
        raise UserError(f"--metric {name}: expected one of {', '.join(METRICS)}")
    missing = unmeasured(METRICS[name], runs)
    if missing:
        raise UserError(not_measured_message(METRICS[name], missing))
    return name


def add_metric_arg(parser: argparse.ArgumentParser) -> None:
    """--metric of `diff` and `bench --ab`: the clock the verdict is decided on."""
    from stepscope.analyze.diff.metric import METRICS

    parser.add_argument("--metric", choices=list(METRICS), default="step_time",
                        help="decide the verdict on wall-clock step time (default: the median step), the mean step "
                             "(step_time_mean: total time, where a few slow steps matter; they also make it "
                             "noisier), the training thread's CPU time per step (step_cpu_time: finds CPU-side "
                             "changes on a busy host; blind to GPU waits, I/O and other threads' work) or the "
                             "process's (process_cpu_time)")


def verdict_exit(result: Any) -> int:
    """A diff's verdict as an exit code, as `check`'s: 1 slower, 2 cannot tell (inconclusive, or nothing to
    compare), 0 otherwise (faster, or no significant change: a change of the threshold's size would have shown)."""
    from stepscope.analyze.diff import Verdict

    v = result.verdict
    return 1 if v is Verdict.SLOWER else 2 if v is None or v is Verdict.INCONCLUSIVE else 0


def pair_diff(store: Store, base_ids: list[str], exp_ids: list[str], *, settings: Any = None,
              load: Callable[[str], RunAnalysis] | None = None) -> Any:
    """The verdict of a pair of stored sides (each one run or a commit's runs), as `stepscope diff a,b c,d` gives
    it: default settings, the noise floor learned from the store. The dashboard's diff pages and the regressions
    page's links go through here, so a pair reads the same everywhere."""
    from stepscope.analyze.diff import DiffSettings, DiffSide
    from stepscope.analyze.diff import diff as diff_sides

    def analysis(i: str) -> RunAnalysis:
        return load(i) if load is not None else load_analysis(i, store)

    sides = []
    for ids in (base_ids, exp_ids):
        first = side_of_run(analysis(ids[0]))
        rest = tuple(analysis(i).data for i in ids[1:])
        sides.append(DiffSide(label=",".join(ids) if rest else first.label, data=first.data, traces=first.traces,
                              trace_note=first.trace_note, warmup=first.warmup, repeats=rest))
    floor = store_noise_floor(store, [*sides[0].runs, *sides[1].runs])
    return diff_sides(sides[0], sides[1], settings=settings or DiffSettings(), noise_floor=floor)


class DiffCommand:
    """Compare an experiment with a baseline: the measurement quality and the step-time verdict first (run-level:
    one value per run, Welch t on logs for repeats, paired t for `bench --ab` pairs; one run a side is
    inconclusive unless beyond the between-run noise floor), then where the time moved: phases, regions, and
    from profiled windows the module tree, operators and kernels.

    BASE and EXP are runs (id, id prefix, name, `latest`, `latest~N`, or a run directory), several runs of one
    side joined by commas (`a,b,c`), a benchmark (`bench-1a2b3c4d`: its runs; `bench-...:A` / `:B`: one side of
    an interleaved `bench --ab`, compared paired), or trace sets (a folder of per-rank Kineto traces, or one
    trace file), in any mix.

    Exit status: 0 whatever the verdict (diff reports, as `git diff` does); with --exit-code 1 when slower, 2 when
    the data cannot tell (inconclusive), 0 when faster or no significant change. 2 also for a mistake in the
    command (one line says which). The CI gate is `stepscope check`, which exits 0 / 1 / 2 by default."""

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
        parser.add_argument("--confidence", type=float, default=None, metavar="C",
                            help="confidence level of the tests (default: 0.95; 0.99 for interleaved pairs, "
                                 "as bench --ab decides)")
        parser.add_argument("--warmup-steps", type=int, metavar="N", help="steps to exclude (default: automatic)")
        parser.add_argument("--all", action="store_true", help="every row of the long tables")
        parser.add_argument("--exit-code", action="store_true",
                            help="exit 1 when slower, 2 when the data cannot tell (inconclusive), 0 otherwise")
        parser.add_argument("--width", type=width, help="terminal width for the tables")
        parser.add_argument("--wide", action="store_true", help="names whole, not shortened")
        add_metric_arg(parser)
        add_store_args(parser)

    def run(self, args: argparse.Namespace) -> int:
        return diff(args.baseline, args.experiment, store=args.store, db=args.db, json=args.json,
                    paired=args.paired, html=args.html, threshold=args.threshold, confidence=args.confidence,
                    warmup=args.warmup_steps, all_rows=args.all, width=args.width, exit_code=args.exit_code,
                    metric=args.metric)


class _StoreArgs:
    """--store / --db, opened only when a side names a run of the store (run directories and trace folders
    need none)."""

    def __init__(self, store: StoreLike, db: str | None) -> None:
        self.store, self.db = store, db

    def open(self) -> Store:
        return as_store(self.store, self.db)


def _open(store: StoreLike | _StoreArgs) -> Store:
    return store.open() if isinstance(store, _StoreArgs) else as_store(store)


def _is_run_dir(path: Path) -> bool:
    return path.is_dir() and (path / "manifest.json").is_file()


def _ab_pair(base: str, exp: str) -> bool:
    """Both sides are the two halves of one `bench --ab` group (`bench-x:A`, `bench-x:B`)."""
    return base.partition(":")[0] == exp.partition(":")[0] and base.startswith("bench-") and ":" in base \
        and ":" in exp


def group_runs(store: StoreLike | _StoreArgs, ref: str) -> list[RunData] | None:
    """The runs of a benchmark reference (`bench-id`, or `bench-id:A` / `:B` for one side of an A/B
    benchmark), in run order; None when ``ref`` is not a benchmark id."""
    gid, _, side = ref.partition(":")
    if not gid.startswith("bench-"):
        return None
    opened = _open(store)
    rows = opened.index.runs("grp = ?", (gid,), order="start_ns")
    if side:
        rows = [r for r in rows if r.tags.get("ab") == side.upper()]
    if not rows:
        raise UserError(f"{ref}: no runs in this benchmark{' side' if side else ''} — see `stepscope ls`")
    return [opened.load(r.id) for r in rows]


def store_noise_floor(store: StoreLike | _StoreArgs, compared: list[RunData]) -> Any:
    """The between-run noise of the compared command(s), learned from repeats in the store (groups of runs of
    the same command, host, code and benchmark), the compared runs themselves left out; None when the store
    holds no such repeats (the diff then uses the stated default)."""
    from stepscope.analyze.stats import pooled_noise_floor
    from stepscope.errors import StepscopeError

    try:
        opened = _open(store)
    except StepscopeError:  # run directories outside any store: no history to learn from
        return None
    commands = {" ".join(d.run.command) for d in compared}
    hosts = {d.run.host.hostname for d in compared}
    skip = {d.run.id for d in compared}
    rows = [r for r in opened.index.runs() if r.command in commands and r.host in hosts and r.id not in skip
            and r.status == "completed"]
    metrics = opened.index.metrics([r.id for r in rows])
    groups: dict[tuple[Any, ...], list[float]] = {}
    for r in rows:
        v = metrics.get(r.id, {}).get("step_time_median_s")
        if v:
            key = (r.grp, r.command, r.host, r.git_commit, r.git_dirty,
                   tuple(sorted(r.params.items())))
            groups.setdefault(key, []).append(float(v))
    return pooled_noise_floor(list(groups.values()), what="runs of this command (repeats, same code and host)")


def load_side(store: StoreLike | _StoreArgs, ref: str, *, warmup: int | None = None) -> Any:
    """A DiffSide from a run reference, comma-separated runs, a benchmark id, a run directory, or a trace
    folder / file."""
    from stepscope.analyze.diff import DiffSide

    runs = group_runs(store, ref)
    if runs is None and "," in ref:
        runs = [_load_one(store, r, warmup).data for r in ref.split(",") if r]
    if runs:
        from stepscope.app import RunAnalysis

        first = side_of_run(RunAnalysis(runs[0], warmup=warmup))
        label = ref if len(runs) > 1 else first.label
        return DiffSide(label=label, data=first.data, traces=first.traces, trace_note=first.trace_note,
                        warmup=warmup, repeats=tuple(runs[1:]))
    path = Path(ref)
    if len(ref) <= 4096 and all(len(part.encode()) <= 255 for part in path.parts) and path.exists() \
            and not _is_run_dir(path):
        from stepscope.traces.traceset import trace_files

        return DiffSide(label=str(path), traces=load_window(trace_files([path])), warmup=warmup)
    return side_of_run(_load_one(store, ref, warmup))


def _load_one(store: StoreLike | _StoreArgs, ref: str, warmup: int | None) -> RunAnalysis:
    if len(ref) <= 4096 and _is_run_dir(Path(ref)):
        return load_analysis(ref, warmup=warmup)
    return load_analysis(ref, _open(store), warmup=warmup)


def side_of_run(ra: RunAnalysis) -> Any:
    """A DiffSide of a stored run, with its profiled window (the lowest rank with a readable trace) analysed
    when it has one."""
    from stepscope.analyze.diff import DiffSide
    from stepscope.analyze.diff.engine import analyze_window

    data, tables = ra.data, ra.traces.tables
    traces = analyze_window(tables[min(tables)]) if tables else None
    note = None
    asked = data.run.options.get("profile_steps")
    if not tables and ra.trace_notes:
        note = ra.trace_notes[0]
    elif not tables and isinstance(asked, int) and asked > 0:
        note = (f"a window of {asked} steps was asked for, but no trace was saved (did the run end before "
                "the window?) — run with more steps or a smaller --profile-skip")
    return DiffSide(label=f"{data.run.id} {data.run.name}", data=data, traces=traces, trace_note=note,
                    warmup=ra.warmup)


def load_window(files: list[Path]) -> Any:
    """The trace engine's analysis of the lowest rank's trace among a trace folder's ``files`` (a diff
    compares one rank's window per side)."""
    from stepscope.analyze.diff.engine import analyze_window
    from stepscope.traces.kineto import read_trace
    from stepscope.traces.traceset import rank_hint

    def rank_key(p: Path) -> tuple[int, str]:
        r = rank_hint(p)
        return (r if r is not None else 1 << 30, p.name)

    return analyze_window(read_trace(min(files, key=rank_key)))
