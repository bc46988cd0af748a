"""The console every terminal report prints to (its own module: ``stepscope trace`` needs it without the run
report's renderers, which load the run analyses)."""

from __future__ import annotations

import sys

from rich.console import Console


def console(file: object = None, width: int | None = None) -> Console:
    """A console for reports: the terminal's width, or 160 columns when output goes to a file or pipe."""
    stream = file if file is not None else sys.stdout
    if width is None and not (hasattr(stream, "isatty") and stream.isatty()):
        width = 160
    return Console(file=file, width=width, highlight=False, soft_wrap=False)  # type: ignore[arg-type]
