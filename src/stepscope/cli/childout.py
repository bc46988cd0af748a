"""Where the output of the runs a command starts goes: they inherit this process's file descriptors, so pointing
fd 1 (and 2) elsewhere for a block sends their output there without touching how they are launched."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def children_output(target: str | Path | None, *, fds: tuple[int, ...] = (1,)) -> Iterator[None]:
    """Point ``fds`` at ``target`` for the block: a file (truncated), ``"null"`` (/dev/null) or ``"stderr"`` (this
    process's fd 2); None leaves them as they are. Python's own buffers are flushed on both sides of the switch."""
    if target is None:
        yield
        return
    sys.stdout.flush()
    sys.stderr.flush()
    if target == "stderr":
        dest = os.dup(2)
    elif target == "null":
        dest = os.open(os.devnull, os.O_WRONLY)
    else:
        dest = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    saved = [os.dup(fd) for fd in fds]
    try:
        for fd in fds:
            os.dup2(dest, fd)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, old in zip(fds, saved, strict=True):
            os.dup2(old, fd)
            os.close(old)
        os.close(dest)
