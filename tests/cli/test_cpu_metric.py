"""`--metric step_cpu_time` of `diff`, `bench --ab` and `check` on real stores: the verdict is decided on the
training thread's CPU time per step, and a store recorded before the CPU clocks says "not measured" (exit 2).

The script (tests/scripts/cpu_or_sleep.py) trades sleep for work: B does 4x A's Python work per step and sleeps
0 ms instead of 80 ms, so B is slower on the CPU clock and faster on the wall clock, each by far more than run
to run noise of a loaded machine moves either: the two metrics must give opposite verdicts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from stepscope.cli import main
from tests.cli.benchab import bench_ab, geo, per_run
from tests.cli.history_repo import git
from tests.conftest import PY, SCRIPTS

SCRIPT = str(SCRIPTS / "cpu_or_sleep.py")
A = ["--steps", "16", "--work", "40000", "--sleep", "0.08"]
B = ["--steps", "16", "--work", "160000", "--sleep", "0"]
WARMUP = 2


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    rc = main(list(argv))
    return rc, json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def ab_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """One `bench --ab --repeat 5 --metric step_cpu_time` study of A vs B, and its JSON (5 pairs: at bench's 99% the
    interval of 3 pairs, t with 2 df, left the wall clock's ×0.6 "inconclusive" under load)."""
    store = tmp_path_factory.mktemp("cpu") / "store"
    return store, bench_ab(store, SCRIPT, A, B, repeat=5, warmup=WARMUP, metric="step_cpu_time")






def test_bench_ab_decides_on_cpu_time(ab_store: tuple[Path, dict[str, Any]]) -> None:
    store, doc = ab_store
    d = doc["diff"]
    assert d["metric"] == "step_cpu_time" and d["settings"]["metric"] == "step_cpu_time"
    rows = {r["key"]: r for r in d["overview"]}
    cpu, wall = rows["step_cpu_time_median_ns"], rows["step_time_median_ns"]
    assert d["verdict"] == cpu["change"]["verdict"] == "slower"
    assert wall["change"]["verdict"] == "faster"  # the wall clock says the opposite, shown beside it
    # the tested values are the geometric means of each run's median thread CPU time, as stored
    a, b = (per_run(store, doc["runs"][s], "thread_cpu_ns", np.median, warmup=WARMUP) for s in "AB")
    assert cpu["baseline"] == pytest.approx(geo(a), rel=1e-9)
    assert cpu["experiment"] == pytest.approx(geo(b), rel=1e-9)
    assert cpu["change"]["method"] == "paired_log"
    assert "process_cpu_time_median_ns" in rows


def test_diff_metric_switches_the_headline(ab_store, capsys) -> None:  # type: ignore[no-untyped-def]
    store, doc = ab_store
    g = doc["group"]
    args = ("diff", f"{g}:A", f"{g}:B", "--store", str(store), "--warmup-steps", str(WARMUP), "--json")
    _, wall = run_json(capsys, *args)
    _, cpu = run_json(capsys, *args, "--metric", "step_cpu_time")
    assert wall["metric"] == "step_time" and wall["verdict"] == "faster"
    assert cpu["metric"] == "step_cpu_time" and cpu["verdict"] == "slower"
    assert [f["kind"] for f in cpu["findings"]][:2] == ["step_time", "step_cpu_time"]
    capsys.readouterr()
    assert main([*args[:-1], "--metric", "step_cpu_time", "--exit-code"]) == 1  # slower on the CPU clock
    text = capsys.readouterr().out
    assert "SLOWER" in text and "step CPU time, training thread" in text
    assert main([*args[:-1], "--exit-code"]) == 0  # faster on the wall clock


def _strip_cpu_columns(store: Path) -> None:
    """Rewrite every rank file as a stepscope without the CPU clocks wrote it: steps records lack the columns."""
    for f in (store / "runs").glob("*/ranks/*"):
        lines = []
        for line in f.read_text().splitlines():
            rec = json.loads(line)
            if rec.get("kind") == "steps":
                rec["cols"].pop("thread_cpu_ns")
                rec["cols"].pop("process_cpu_ns")
            lines.append(json.dumps(rec))
        f.write_text("\n".join(lines) + "\n")


@pytest.fixture
def old_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, list[str]]:
    """A git repository of two commits with one run of the script at each, then the store rewritten as before the
    CPU clocks (and reindexed): (repo, store, run ids)."""
    from stepscope.store import open_store

    repo, store = tmp_path / "repo", tmp_path / "store"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    monkeypatch.chdir(repo)
    ids = []
    for i in range(2):
        (repo / "note.txt").write_text(str(i))
        git(repo, "add", "note.txt")
        date = f"2024-03-{i + 1:02d}T12:00:00+00:00"
        git(repo, "commit", "-q", "-m", f"c{i}", env={"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date})
        assert main(["run", "--store", str(store), "--quiet", "--sample-interval", "0", "--name", "tiny", "--",
                     PY, SCRIPT, "--steps", "8"]) == 0
        st = open_store(store)
        ids.append(st.index.runs(order="start_ns")[-1].id)
        st.close()
    _strip_cpu_columns(store)
    assert main(["store", "reindex", "--store", str(store)]) == 0
    return repo, store, ids


def test_old_store_says_not_measured(old_store, capsys) -> None:  # type: ignore[no-untyped-def]
    _, store, ids = old_store
    capsys.readouterr()
    rc = main(["diff", ids[0], ids[1], "--store", str(store), "--metric", "step_cpu_time"])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert len(err.splitlines()) == 1 and "not measured" in err and ids[0] in err and "Traceback" not in err
    # step time still compares, and the CPU rows are absent rather than zero
    rc, doc = run_json(capsys, "diff", ids[0], ids[1], "--store", str(store), "--json")
    assert rc == 0 and doc["metric"] == "step_time"
    assert not any(r["key"].endswith("cpu_time_median_ns") for r in doc["overview"])


def test_check_gates_on_cpu_time(tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """Two commits: the second trades its sleep for 4x the work. `check` on step time passes (faster); with
    --metric step_cpu_time it fails the gate (exit 1) on a regression of the CPU figure."""
    repo, store = tmp_path / "repo", tmp_path / "store"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for i, args in enumerate((A, B)):
        (repo / "args.txt").write_text(" ".join(args))
        git(repo, "add", "args.txt")
        date = f"2024-03-{i + 1:02d}T12:00:00+00:00"
        git(repo, "commit", "-q", "-m", f"c{i}", env={"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date})
        monkeypatch.chdir(repo)
        capsys.readouterr()
        assert main(["bench", "--store", str(store), "--repeat", "3", "--sample-interval", "0", "--warmup-steps",
                     str(WARMUP), "--name", "tiny", "--", PY, SCRIPT, *args]) == 0
        table = capsys.readouterr().out  # the benchmark's table: the CPU clocks beside step time
        assert "step_time_median_s" in table and "step_cpu_time_median_s" in table
    base = ("check", "--store", str(store), "--max-regression", "5%", "--json")
    rc, doc = run_json(capsys, *base)
    assert rc == 0, doc
    shown = {c["metric"] for c in doc["checks"]}
    assert "step_cpu_time_median_s" in shown  # beside step time, not gated
    rc, doc = run_json(capsys, *base, "--metric", "step_cpu_time")
    assert rc == 1, doc
    (c,) = [c for c in doc["checks"] if c["against"] == "window"]
    assert c["metric"] == "step_cpu_time_median_s" and c["verdict"] == "regressed"
    assert c["change"] > 1.0  # 4x the work: CPU time at least doubles


def test_check_on_old_runs_says_not_measured(old_store, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    _, store, ids = old_store  # the fixture left the working directory in the repository, at its second commit
    capsys.readouterr()
    rc = main(["check", "--store", str(store), "--min-repeats", "1", "--metric", "step_cpu_time"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "not measured" in err and any(i in err for i in ids)
    # step time still gates them (one run a side: cannot tell, exit 2, but no "not measured")
    rc = main(["check", "--store", str(store), "--min-repeats", "1"])
    assert "not measured" not in capsys.readouterr().err
