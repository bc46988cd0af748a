"""`stepscope history` on real runs: per-commit points, dirty and no-commit runs, JSON / CSV, bad input."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from stepscope.cli import main
from tests.cli.history_repo import bench_at, git, make_repo


def test_history_commits_dirty_and_no_commit(tmp_path: Path, monkeypatch, capsys) -> None:
    repo, store = tmp_path / "repo", tmp_path / "store"
    shas = make_repo(repo, commits=3, slow_at=2, steps=8)
    for sha in shas:
        assert bench_at(monkeypatch, repo, store, sha, 1) == 0
    (repo / "train.py").write_text((repo / "train.py").read_text() + "\n# local edit\n")  # dirty tree at HEAD
    assert bench_at(monkeypatch, repo, store, shas[2], 1) == 0
    git(repo, "checkout", "-q", "--", "train.py")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "train.py").write_text((repo / "train.py").read_text())
    monkeypatch.chdir(outside)
    assert main(["run", "--store", str(store), "--name", "tiny", "--quiet", "--sample-interval", "0", "--",
                 sys.executable, "train.py"]) == 0
    monkeypatch.chdir(repo)
    capsys.readouterr()
    assert main(["history", "--store", str(store), "-m", "work", "--json", "--baseline", "v1.0"]) == 0
    h = json.loads(capsys.readouterr().out)["histories"][0]
    assert h["metric"] == "region.work.p50_s" and h["baseline"] == shas[0]
    keys = [p["key"] for p in h["points"]]
    assert keys == [shas[0], shas[1], shas[2], shas[2] + "+dirty"]
    assert h["points"][0]["relative"] == 1.0
    base = h["points"][0]["median"]
    for p in h["points"]:
        assert p["relative"] == pytest.approx(p["median"] / base)
        assert p["ci_low"] <= p["median"] <= p["ci_high"] and len(p["run_ids"]) == len(p["values"]) == 1
    assert h["no_commit"]["key"] == "(no commit)" and len(h["no_commit"]["values"]) == 1

    assert main(["history", "--store", str(store), "-m", "step_time", "--csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("metric,commit,dirty") and len(lines) == 1 + 5
    assert sum(1 for ln in lines if f",{shas[2]},1," in ln) == 1

    assert main(["history", "--store", str(store), "--last", "2"]) == 0
    out = capsys.readouterr().out
    assert "outside a git work tree" in out and "+dirty" in out and "region.work.p50_s" in out


def test_history_bad_input(tmp_path: Path, monkeypatch, capsys) -> None:
    repo, store = tmp_path / "repo", tmp_path / "store"
    shas = make_repo(repo, commits=1, slow_at=5, steps=4)
    assert bench_at(monkeypatch, repo, store, shas[0], 1) == 0
    capsys.readouterr()
    assert main(["history", "--store", str(store), "-m", "step_tme"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "closest:" in err and "step_time_median_s" in err
    assert main(["history", "--store", str(store), "--baseline", "nope"]) == 2
    assert "baseline 'nope'" in capsys.readouterr().err
    assert main(["history", "--store", str(store), "--name", "tiyn"]) == 2
    assert "closest: tiny" in capsys.readouterr().err
    assert main(["history", "--store", str(store), "--since", "yesterday"]) == 2
    assert main(["history", "--store", str(store), "--last", "-1"]) == 2
    assert "--last -1" in capsys.readouterr().err
    assert main(["serve", "--store", str(store), "--port", "99999"]) == 2  # out of range: one line, no traceback
    assert "cannot listen on 127.0.0.1:99999" in capsys.readouterr().err
    assert main(["history", "--store", str(store), "--since", "30d", "--json"]) == 0
