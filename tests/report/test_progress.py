"""The progress bar: silent off a terminal, drawn on stderr when it is one."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

SCRIPT = """
import time
from stepscope.report.progress import progress
with progress(3, "analysing ranks", delay_s=0.0) as p:
    for i in range(3):
        time.sleep(0.05)
        p.advance(note=f"rank {i}")
print("done")
"""


def test_silent_when_stderr_is_not_a_terminal() -> None:
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True)
    assert r.stdout == "done\n"
    assert r.stderr == ""


def test_drawn_on_a_terminal() -> None:
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT], stdin=follower, stdout=follower, stderr=follower)
    os.close(follower)
    out = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    assert proc.wait(timeout=60) == 0
    text = out.decode(errors="replace")
    assert "analysing ranks" in text
    assert "done" in text
