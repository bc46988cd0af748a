"""Extra views of `stepscope show`, one module each, found through VIEWS (flag -> "module:function").

A view function takes ``(ra: RunAnalysis, *, json: bool, width: int | None) -> int`` and renders to the
terminal, or as JSON when ``json`` is set.
"""

from __future__ import annotations

import argparse
import importlib
from typing import Any

from stepscope.errors import UserError

VIEWS: dict[str, tuple[str, str]] = {
    # flag: (module:function, help)
    "traces": ("stepscope.cli.views.traces:show_traces", "kernel and operator analyses of the profiled window"),
    "ranks": ("stepscope.cli.views.ranks:show_ranks", "per-rank table, stragglers and POP metrics"),
    "host": ("stepscope.cli.views.host:show_host", "hottest Python functions per region and phase (--sample-stacks)"),
    "comm_matrix": ("stepscope.cli.views.comm_matrix:show_comm_matrix", "rank x rank communication bytes and time"),
}


def add_view_args(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("views (instead of the summary)")
    for flag, (_, help_text) in VIEWS.items():
        g.add_argument(f"--{flag.replace('_', '-')}", action="store_true", help=help_text)


def chosen_view(args: argparse.Namespace) -> str | None:
    """The view flag given on the command line (its VIEWS key), None for the summary."""
    return next((flag for flag in VIEWS if getattr(args, flag, False)), None)


def view_function(view: str) -> Any:
    flag = view.replace("-", "_")
    if flag not in VIEWS:
        raise UserError(f"unknown view {view!r} — choose one of {', '.join(sorted(VIEWS))}")
    module, func = VIEWS[flag][0].split(":")
    try:
        return getattr(importlib.import_module(module), func)
    except (ImportError, AttributeError):
        raise UserError(f"--{flag.replace('_', '-')} is not available in this build of stepscope") from None
