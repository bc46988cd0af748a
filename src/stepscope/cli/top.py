"""Live terminal view of a running run: `stepscope top [RUN]`."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from rich.console import RenderableType

from stepscope.cli.common import add_store_args, store_from, width
from stepscope.errors import UserError
from stepscope.model.run import RunStatus
from stepscope.store.tail import RunTail


class TopCommand:
    """Watch a run while it trains, refreshed every second: step count and rate, the last step time and
    the median of the last 10, the run's median, phases, data wait, system and GPU utilisation, every
    rank's progress with a straggler flag (docs/metrics.md, "Live view"), and the advisor's findings on
    the records so far. The rank files are read incrementally (only what was appended since the last
    refresh). On a finished run, or when the run finishes, it shows the final state and exits. Ctrl-C
    quits. --once prints one frame and exits (for scripts)."""

    name = "top"
    help = "live view of a running run: steps, phases, system, ranks and stragglers, advice"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("run", nargs="?", default="latest", help="the run (default: latest)")
        parser.add_argument("--once", action="store_true", help="print one frame and exit")
        parser.add_argument("--interval", type=float, default=1.0, metavar="S",
                            help="seconds between refreshes (default: 1)")
        parser.add_argument("--width", type=width, help="terminal width")
        add_store_args(parser)

    def run(self, args: argparse.Namespace) -> int:
        if not 0.1 <= args.interval <= 3600:
            raise UserError(f"--interval {args.interval:g}: give seconds between 0.1 and 3600")
        store = store_from(args)
        try:
            run_dir = store.run_path(store.resolve(args.run))
        finally:
            store.close()
        return top(run_dir, once=args.once, interval_s=args.interval, width=args.width)


def frame(tail: RunTail, interval_s: float) -> tuple[RenderableType, RunStatus]:
    """Read what the run appended and render one frame; the run's status."""
    from stepscope.analyze.run.live import live_state
    from stepscope.app import RunAnalysis
    from stepscope.report.live_terminal import live_view

    data = tail.poll()
    ra = RunAnalysis(data, read_traces=False)  # the records so far; traces come after the run
    summary = ra.summary
    now = data.run.end_ns or time.time_ns()  # a finished run: as it was at its end
    elapsed = now - data.run.start_ns
    view = live_view(live_state(data, now_ns=now), summary, ra.advice,
                     elapsed_ns=elapsed, interval_s=interval_s)
    return view, data.run.status


def top(run_dir: Path, *, once: bool = False, interval_s: float = 1.0, width: int | None = None) -> int:
    """Show the run in ``run_dir`` until it finishes (or one frame with ``once``)."""
    from rich.live import Live

    from stepscope.report.terminal import console

    out = console(width=width)
    tail = RunTail(run_dir)
    view, status = frame(tail, interval_s)
    if once or status != RunStatus.RUNNING:
        out.print(view)
        return 0
    try:
        with Live(view, console=out, auto_refresh=False, transient=False) as live:
            while status == RunStatus.RUNNING:
                time.sleep(interval_s)
                view, status = frame(tail, interval_s)
                live.update(view, refresh=True)
    except KeyboardInterrupt:
        pass
    return 0
