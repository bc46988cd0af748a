"""How many record lines a run lost: those its writer could not write (a full disk: the session's note) and those
the reader skipped as damaged (store.rundir's note). A run that lost any is *partial*: its figures are computed from
what was kept, and every listing says so beside its status."""

from __future__ import annotations

import re
from collections.abc import Iterable

_NOT_WRITTEN = re.compile(r"^(\d+) record line\(s\) could not be written")
"""collect.session's note when lines were given up at the end of a run (disk still full)."""
_DAMAGED = re.compile(r": (\d+) damaged record line\(s\) skipped")
"""store.rundir's note for the lines of a rank file it could not read."""


def records_lost(notes: Iterable[str]) -> int:
    """Record lines lost, from one or more ranks' notes (0: none)."""
    lost = 0
    for note in notes:
        m = _NOT_WRITTEN.match(note) or _DAMAGED.search(note)
        if m:
            lost += int(m.group(1))
    return lost


def partial_label(status: str, lost: int | float | None) -> str:
    """The status as listings show it: ``completed, partial (7 records lost)`` for a run that lost records."""
    n = int(lost or 0)
    return f"{status}, partial ({n} record{'s' if n != 1 else ''} lost)" if n > 0 else status
