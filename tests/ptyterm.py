"""Run a command in a pseudo-terminal of a given size and read what a person would see scroll by.

Rich sees a real terminal (colours, cursor movement, the pty's width), so tests check the output as shown.
``plain`` strips the escape sequences; ``PtyProcess`` reads a long-running command (``stepscope top``) while
it runs."""

from __future__ import annotations

import fcntl
import os
import re
import select
import struct
import subprocess
import termios
import time
from collections.abc import Sequence

_ESC = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[()][0-9A-Za-z]|\x1b[=>78]")


def plain(text: str) -> str:
    """The text without terminal escape sequences (colours, cursor moves) and carriage returns."""
    return _ESC.sub("", text).replace("\r", "")


class PtyProcess:
    """A command whose stdin, stdout and stderr are one pty of ``cols`` x ``rows``."""

    def __init__(self, cmd: Sequence[str], *, cols: int = 80, rows: int = 60,
                 env: dict[str, str] | None = None) -> None:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        full_env = {**os.environ, "COLUMNS": str(cols), "LINES": str(rows), "TERM": "xterm-256color", **(env or {})}
        full_env.pop("NO_COLOR", None)
        self.proc = subprocess.Popen(list(cmd), stdin=slave, stdout=slave, stderr=slave, env=full_env,
                                     close_fds=True, start_new_session=True)
        os.close(slave)
        self._fd = master
        self.raw = b""

    def read(self, seconds: float) -> str:
        """Read for ``seconds`` (less if the command ends); returns the new text, escapes included."""
        end = time.monotonic() + seconds
        new = b""
        while (left := end - time.monotonic()) > 0:
            ready, _, _ = select.select([self._fd], [], [], min(left, 0.2))
            if not ready:
                if self.proc.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(self._fd, 65536)
            except OSError:  # EIO: the other side closed
                break
            if not chunk:
                break
            new += chunk
        self.raw += new
        return new.decode("utf-8", "replace")

    def finish(self, timeout: float = 60) -> int:
        """Read to the end and wait for the command; its exit code."""
        end = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < end:
            self.read(0.5)
        self.read(0.5)
        rc = self.proc.wait(timeout=max(1.0, end - time.monotonic()))
        os.close(self._fd)
        return rc

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        try:
            os.close(self._fd)
        except OSError:
            pass


def run_in_pty(cmd: Sequence[str], *, cols: int = 80, env: dict[str, str] | None = None,
               timeout: float = 120) -> tuple[int, str]:
    """Run to the end in a pty ``cols`` wide: exit code and the output as text without escapes."""
    p = PtyProcess(cmd, cols=cols, env=env)
    rc = p.finish(timeout)
    return rc, plain(p.raw.decode("utf-8", "replace"))
