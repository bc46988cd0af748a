"""`--metric step_time_mean` of `diff`, `bench --ab` and `check` on real stores: the verdict is decided on each run's
mean step time (the same measured steps as the median), which follows total time where a minority of slow steps
leaves the median unmoved.

The script (tests/scripts/slow_fifth.py) sleeps STEP_S a step and SLOW_S more on every 5th step; B drops the extra
sleep. The median step is STEP_S on both sides; the mean is STEP_S + SLOW_S / 5 against STEP_S (x0.5), far beyond
what run-to-run noise of a loaded machine moves either."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from stepscope.cli import main
from tests.cli.benchab import bench_ab, geo, per_run
from tests.cli.history_repo import git
from tests.conftest import PY, SCRIPTS

SCRIPT = str(SCRIPTS / "slow_fifth.py")
STEP_S, SLOW_S = 0.01, 0.05
STEPS, WARMUP = 35, 5
"""Measured steps 5..34: 30 steps, every 5th of them (5, 10, ..., 30) slow."""
A = ["--steps", str(STEPS), "--step", str(STEP_S), "--slow", str(SLOW_S)]
B = ["--steps", str(STEPS), "--step", str(STEP_S), "--slow", "0"]


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    rc = main(list(argv))
    return rc, json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def ab_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """One `bench --ab --repeat 6 --metric step_time_mean` study of A vs B, and its JSON."""
    store = tmp_path_factory.mktemp("mean") / "store"
    return store, bench_ab(store, SCRIPT, A, B, repeat=6, warmup=WARMUP, metric="step_time_mean")






def test_bench_ab_decides_on_the_mean(ab_store: tuple[Path, dict[str, Any]]) -> None:
    store, doc = ab_store
    d = doc["diff"]
    assert d["metric"] == "step_time_mean" and d["settings"]["metric"] == "step_time_mean"
    rows = {r["key"]: r for r in d["overview"]}
    mean, median = rows["step_time_mean_ns"], rows["step_time_median_ns"]
    assert d["verdict"] == mean["change"]["verdict"] == "faster"
    assert median["change"]["verdict"] == "no_significant_change"  # the slow steps are a minority: median unmoved
    assert mean["change"]["method"] == "paired_log"
    # the tested values are the geometric means of each run's mean step time, as stored ...
    a = per_run(store, doc["runs"]["A"], "wall", np.mean, warmup=WARMUP)
    b = per_run(store, doc["runs"]["B"], "wall", np.mean, warmup=WARMUP)
    assert mean["baseline"] == pytest.approx(geo(a), rel=1e-9)
    assert mean["experiment"] == pytest.approx(geo(b), rel=1e-9)
    # ... and what the sleeps give: STEP_S + SLOW_S / 5 against STEP_S (a sleep overshoots, never undershoots)
    assert (STEP_S + SLOW_S / 5) * 1e9 <= mean["baseline"] < (STEP_S + SLOW_S / 5) * 1e9 * 1.3
    assert STEP_S * 1e9 <= mean["experiment"] < STEP_S * 1e9 * 1.3
    assert mean["change"]["ci_high"] < 0.75  # x0.5 expected: the interval excludes any small change


def test_diff_metric_step_time_mean(ab_store, capsys) -> None:  # type: ignore[no-untyped-def]
    store, doc = ab_store
    g = doc["group"]
    args = ("diff", f"{g}:A", f"{g}:B", "--store", str(store), "--warmup-steps", str(WARMUP), "--json")
    _, median = run_json(capsys, *args)
    _, mean = run_json(capsys, *args, "--metric", "step_time_mean")
    assert median["metric"] == "step_time" and median["verdict"] == "no_significant_change"
    assert not any(r["key"] == "step_time_mean_ns" for r in median["overview"])  # shown when decided on
    assert mean["metric"] == "step_time_mean" and mean["verdict"] == "faster"
    assert [f["kind"] for f in mean["findings"]][:2] == ["step_time", "step_time_mean"]
    capsys.readouterr()
    assert main([*args[:-1], "--metric", "step_time_mean"]) == 0
    text = capsys.readouterr().out
    assert "FASTER" in text and "mean step time" in text


def test_check_gates_on_the_mean(tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """Two commits: the second adds the slow steps (B then A). `check` on the median step passes; with
    --metric step_time_mean it fails the gate (exit 1) on the mean's regression, about +100%."""
    repo, store = tmp_path / "repo", tmp_path / "store"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    monkeypatch.chdir(repo)
    for i, args in enumerate((B, A)):
        (repo / "args.txt").write_text(" ".join(args))
        git(repo, "add", "args.txt")
        date = f"2024-03-{i + 1:02d}T12:00:00+00:00"
        git(repo, "commit", "-q", "-m", f"c{i}", env={"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date})
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["bench", "--store", str(store), "--repeat", "3", "--sample-interval", "0", "--warmup-steps",
                         str(WARMUP), "--name", "tiny", "--", PY, SCRIPT, *args]) == 0
    base = ("check", "--store", str(store), "--max-regression", "5%", "--json")
    rc, doc = run_json(capsys, *base)
    assert rc == 0, doc
    rc, doc = run_json(capsys, *base, "--metric", "step_time_mean")
    assert rc == 1, doc
    (c,) = [c for c in doc["checks"] if c["against"] == "window"]
    assert c["metric"] == "step_time_mean_s" and c["verdict"] == "regressed"
    assert 0.7 < c["change"] < 1.3, c  # (STEP_S + SLOW_S / 5) / STEP_S - 1 = +100%


def test_check_on_an_old_index_says_reindex(tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """An index made before the mean was kept: one line naming `store reindex`, exit 2; after it, the gate runs."""
    import sqlite3

    repo, store = tmp_path / "repo", tmp_path / "store"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    monkeypatch.chdir(repo)
    for i in range(2):
        date = f"2024-03-{i + 1:02d}T12:00:00+00:00"
        git(repo, "commit", "-q", "--allow-empty", "-m", f"c{i}",
            env={"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date})
        assert main(["run", "--store", str(store), "--quiet", "--sample-interval", "0", "--", PY, SCRIPT, *B]) == 0
    con = sqlite3.connect(store / "index.sqlite")
    n = con.execute("DELETE FROM run_metrics WHERE name = 'step_time_mean_s'").rowcount
    con.commit()
    con.close()
    assert n == 2
    capsys.readouterr()
    rc = main(["check", "--store", str(store), "--min-repeats", "1", "--metric", "step_time_mean"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "store reindex" in err and "Traceback" not in err, err
    assert main(["store", "reindex", "--store", str(store)]) == 0
    capsys.readouterr()
    main(["check", "--store", str(store), "--min-repeats", "1", "--metric", "step_time_mean"])
    assert "store reindex" not in capsys.readouterr().err
