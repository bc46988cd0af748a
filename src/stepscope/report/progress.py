"""Progress display for long commands: a rich bar on stderr when it is a terminal, nothing otherwise.

Commands wrap work that can take more than a couple of seconds (a trace set, a dashboard build, bench
repeats). The bar appears only after `delay_s`, so quick runs print nothing extra, and never on a pipe or a
file, so scripted output stays clean.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol


class Progress(Protocol):
    def advance(self, n: int = 1, *, note: str | None = None) -> None: ...


class _Silent:
    def advance(self, n: int = 1, *, note: str | None = None) -> None:
        return None


class _Bar:
    def __init__(self, total: int | None, label: str, delay_s: float) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as RichProgress

        self._start = time.monotonic()
        self._delay = delay_s
        self._shown = False
        self._rich = RichProgress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("{task.fields[note]}"), console=Console(stderr=True), transient=True,
        )
        self._task = self._rich.add_task(label, total=total, note="")

    def advance(self, n: int = 1, *, note: str | None = None) -> None:
        if note is None:
            self._rich.update(self._task, advance=n)
        else:
            self._rich.update(self._task, advance=n, note=note)
        if not self._shown and time.monotonic() - self._start >= self._delay:
            self._rich.start()
            self._shown = True

    def close(self) -> None:
        if self._shown:
            self._rich.stop()


@contextmanager
def progress(total: int | None, label: str, *, delay_s: float = 2.0) -> Iterator[Progress]:
    """A progress bar of `total` items (None: unknown) on stderr, shown once the work has taken `delay_s`."""
    if not sys.stderr.isatty():
        yield _Silent()
        return
    bar = _Bar(total, label, delay_s)
    try:
        yield bar
    finally:
        bar.close()
