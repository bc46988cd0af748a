"""The one undo list of every hook stepscope installs (torch, Keras / TensorFlow, mpi4py): each install appends the
function that restores what it changed; ``remove_all`` runs them newest first (tests prove nothing is left behind)."""

from __future__ import annotations

from collections.abc import Callable

UNDO: list[Callable[[], None]] = []


def remove_all() -> None:
    """Undo every hook; an undo that fails is skipped (the others still run)."""
    while UNDO:
        undo = UNDO.pop()
        try:
            undo()
        except Exception:
            pass


def installed() -> int:
    """How many undo entries are held (0: nothing of stepscope is installed)."""
    return len(UNDO)
