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
    """Compare an experiment with a baseline: the verdict on step time and throughput first (Mann-Whitney U
    and a bootstrap interval of the median ratio, warm-up excluded, with a practical threshold), then where
    the time moved: phases, regions, and from profiled windows the module tree, operators and kernels.

    BASE and EXP are runs (id, id prefix, name, `latest`, `latest~N`, or a run directory) or trace sets (a
    folder of per-rank Kineto traces, or one trace file), in any mix."""

    name = "diff"
    help = "compare two runs (or trace sets): what changed, and is it real"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("baseline", help="the baseline: a run or a trace folder / file")
        parser.add_argument("experiment", help="the experiment: a run or a trace folder / file")
        parser.add_argument("--json", action="store_true", help="machine-readable (schema stepscope.diff/1)")
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
        settings = DiffSettings(confidence=args.confidence, threshold=args.threshold / 100)
        base = load_side(args, args.baseline)
        exp = load_side(args, args.experiment)
        result = diff(base, exp, settings=settings)
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


def load_side(args: argparse.Namespace, ref: str) -> Any:
    """A DiffSide from a run reference, a run directory, or a trace folder / file."""
    from stepscope.analyze.diff import DiffSide

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
    if _is_run_dir(path):
        from stepscope.store.rundir import read_run

        data = read_run(path)
    else:
        data = store_from(args).load(ref)
    return side_of_run(data, warmup=args.warmup_steps)


def side_of_run(data: RunData, *, warmup: int | None = None) -> Any:
    """A DiffSide of a stored run, with its profiled window analysed when it has one."""
    from stepscope.analyze.diff import DiffSide
    from stepscope.cli.runinputs import expected_traces

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
