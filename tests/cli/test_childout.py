"""children_output: a child started inside the block writes where the block points, and this process's own
stdout and stderr are back afterwards (real subprocesses, real file descriptors)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from stepscope.cli.childout import children_output

CHILD = [sys.executable, "-c", "import sys; print('out-line'); print('err-line', file=sys.stderr)"]


def _fd_target(fd: int) -> tuple[int, int]:
    st = os.fstat(fd)
    return st.st_dev, st.st_ino


def test_a_file_takes_both_streams_and_the_descriptors_come_back(tmp_path: Path) -> None:
    before = _fd_target(1), _fd_target(2)
    log = tmp_path / "runs.log"
    with children_output(log, fds=(1, 2)):
        subprocess.run(CHILD, check=True)
    assert (_fd_target(1), _fd_target(2)) == before
    assert log.read_text().split() == ["out-line", "err-line"]


def test_null_drops_stdout_only_and_none_leaves_both(tmp_path: Path) -> None:
    err = tmp_path / "err.log"
    with children_output(err, fds=(2,)), children_output("null"):
        subprocess.run(CHILD, check=True)
    assert err.read_text().split() == ["err-line"]  # stdout went to /dev/null, stderr to the file
    before = _fd_target(1)
    with children_output(None):
        assert _fd_target(1) == before  # None: nothing moved
    null = os.stat(os.devnull)
    assert _fd_target(1) == before != (null.st_dev, null.st_ino)
