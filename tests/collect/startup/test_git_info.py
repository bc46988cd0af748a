"""The git state a run records, read from real repositories made here (the git processes run side by side)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from stepscope.collect.startup.metadata import git_info

ENV = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
       "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_AUTHOR_DATE": "1700000000 +0000",
       "GIT_COMMITTER_DATE": "1700000000 +0000"}


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=ENV, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    r = tmp_path / "repo"
    r.mkdir()
    git(r, "init", "-q", "-b", "trunk")
    (r / "a.py").write_text("x = 1\n")
    git(r, "add", "a.py")
    git(r, "commit", "-q", "-m", "first: the subject")
    return r


def test_a_clean_work_tree(repo: Path) -> None:
    g = git_info(repo / ".")
    assert g is not None
    assert g.commit == git(repo, "rev-parse", "HEAD") and len(g.commit) == 40
    assert g.branch == "trunk" and not g.dirty and not g.shallow
    assert g.subject == "first: the subject" and g.commit_time_s == 1_700_000_000.0
    assert g.describe == g.commit[:len(g.describe or "")] and g.describe


def test_dirty_tagged_detached_and_from_a_subfolder(repo: Path) -> None:
    git(repo, "tag", "v1.0")
    (repo / "a.py").write_text("x = 2\n")
    sub = repo / "pkg"
    sub.mkdir()
    g = git_info(sub)
    assert g is not None and g.dirty and g.describe == "v1.0-dirty"
    git(repo, "checkout", "-q", "--detach")
    g = git_info(repo)
    assert g is not None and g.branch is None and g.commit == git(repo, "rev-parse", "HEAD")


def test_outside_a_work_tree_and_before_the_first_commit(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    assert git_info(plain) is None
    git(plain, "init", "-q")
    assert git_info(plain) is None
