"""A throwaway git repository of a tiny training script, and benchmark runs at each of its commits.

The script's step is a ``time.sleep`` inside ``stepscope.region("work")``: fast and stable on a loaded
machine. Commit ``slow_at`` makes the sleep 10% longer; every other commit only changes a harmless line.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = """\
import time
import stepscope

SLEEP_S = {sleep!r}
NOTE = {note!r}  # commits that only add noise change this line

for i in stepscope.steps(range({steps})):
    with stepscope.region("work"):
        time.sleep(SLEEP_S)
"""

BASE_SLEEP_S = 0.025


def git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    full = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
            "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com", **(env or {})}
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True, env=full).stdout.strip()


def make_repo(repo: Path, *, commits: int = 20, slow_at: int = 12, steps: int = 10,
              slow_factor: float = 1.10) -> list[str]:
    """Create the repository; return the commit shas, oldest first. Commit i is dated day i of 2024-03; from
    commit ``slow_at`` on the sleep is ``slow_factor`` times longer."""
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    shas = []
    for i in range(commits):
        sleep = BASE_SLEEP_S * (slow_factor if i >= slow_at else 1.0)
        (repo / "train.py").write_text(SCRIPT.format(sleep=sleep, note=f"tweak {i}", steps=steps))
        git(repo, "add", "train.py")
        subject = f"make work {slow_factor - 1:.0%} slower" if i == slow_at else f"tidy step {i}"
        date = f"2024-03-{i + 1:02d}T12:00:00+00:00"
        git(repo, "commit", "-q", "-m", subject, env={"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date})
        shas.append(git(repo, "rev-parse", "HEAD"))
    git(repo, "tag", "v1.0", shas[0])
    return shas


def bench_at(monkeypatch: pytest.MonkeyPatch, repo: Path, store: Path, sha: str, repeat: int,
             *extra: str) -> int:
    """Check out ``sha`` (detached HEAD) and run `stepscope bench` there in-process."""
    from stepscope.cli import main

    git(repo, "checkout", "-q", sha)
    monkeypatch.chdir(repo)
    return main(["bench", "--store", str(store), "--repeat", str(repeat), "--sample-interval", "0",
                 "--name", "tiny", *extra, "--", sys.executable, "train.py"])


def bench_history(monkeypatch: pytest.MonkeyPatch, repo: Path, store: Path, shas: list[str],
                  repeats: dict[int, int]) -> None:
    """One benchmark per commit (``repeats[i]`` runs at commit i, default 1); ends at the last commit."""
    for i, sha in enumerate(shas):
        assert bench_at(monkeypatch, repo, store, sha, repeats.get(i, 1)) == 0
