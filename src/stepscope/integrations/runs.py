"""Where a trainer callback records: the launcher's session, or a run it creates (shared by the callbacks).

Under `stepscope run` every observed process already has a session: the callback joins it. Otherwise
rank 0 creates a standalone run (as ``stepscope.session()`` does) and, in a multi-process job, sends
its run directory to the other ranks with the trainer's own broadcast; they join it as rank streams.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from stepscope.collect.core.options import ENV_RUN_DIR, Options
from stepscope.collect.core.session import Session, current, set_current

Broadcast = Callable[[Any], Any]
"""Sends rank 0's object to every rank and returns it (e.g. Lightning's ``strategy.broadcast``)."""


class CallbackRun:
    """The session a callback records into, and whether the callback owns (must end) the run."""

    def __init__(self, session: Session | None, owned: Any = None, joined: bool = False) -> None:
        self.session = session
        self.owned = owned
        """The entered ``stepscope.session()`` context of a run this process created, else None."""
        self.joined = joined
        """True on a non-zero rank that joined rank 0's standalone run (ends its own stream)."""

    def end(self, exc: BaseException | None = None) -> None:
        """End what this callback started; a launcher's session is left to the launcher."""
        s, owned = self.session, self.owned
        self.owned = None
        if s is not None and self.joined:
            s.close("exception" if exc else "exit")
        if owned is not None:
            owned.__exit__(type(exc) if exc else None, exc, exc.__traceback__ if exc else None)


def open_run(*, name: str | None, params: dict[str, Any], tags: dict[str, Any], store: str | None,
             world_size: int = 1, rank: int = 0, broadcast: Broadcast | None = None) -> CallbackRun:
    s = current()
    if s is not None or os.environ.get(ENV_RUN_DIR):
        return CallbackRun(s)  # under `stepscope run` (None: a helper process it does not observe)
    import stepscope

    owned = None
    if world_size <= 1 or rank == 0:
        owned = stepscope.session(name, params=params, tags=tags, store=store)
        s = owned.__enter__()
    if world_size <= 1 or broadcast is None:
        return CallbackRun(s, owned)
    where = broadcast((str(s.run_dir), s.run_id) if s is not None else None)
    if s is None and where is not None:
        return CallbackRun(join_run(Path(where[0]), where[1]), joined=True)
    return CallbackRun(s, owned)


def join_run(run_dir: Path, run_id: str) -> Session:
    """Record this process as a rank stream of an existing run."""
    from stepscope.collect.startup.bootstrap import attach

    s = Session(run_dir, run_id, Options())
    set_current(s)
    attach(s)
    return s
