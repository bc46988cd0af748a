"""Issue 19, item 6 (the store's part): one damaged run never stops `store reindex` (it is skipped and named,
on one line); a structurally wrong manifest is a one-line error for that run; reindex brings back the
bench/sweep groups and drops rows whose run directory is gone."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from stepscope.store import open_store
from tests.faults.store_kit import cli, make_runs, one_line_error

DAMAGES = {
    "array": lambda doc: [doc],
    "no-run": lambda doc: {**doc, "run": None},
    "run-is-text": lambda doc: {**doc, "run": "x"},
    "start-is-text": lambda doc: {**doc, "run": {**doc["run"], "start_ns": "soon"}},
    "huge-start": lambda doc: {**doc, "run": {**doc["run"], "start_ns": 10**30}},
    "command-numbers": lambda doc: {**doc, "run": {**doc["run"], "command": [1, 2]}},
    "host-is-list": lambda doc: {**doc, "run": {**doc["run"], "host": [1]}},
    "gpus-are-text": lambda doc: {**doc, "run": {**doc["run"], "host": {**doc["run"]["host"], "gpus": ["x"]}}},
    "no-id": lambda doc: {**doc, "run": {k: v for k, v in doc["run"].items() if k != "id"}},
    "status-unknown": lambda doc: {**doc, "run": {**doc["run"], "status": "exploded"}},
    "software-null": lambda doc: {**doc, "run": {**doc["run"], "software": None}},
    "git-extra-field": lambda doc: {**doc, "run": {**doc["run"], "git": {"commit": "c", "bogus": 1}}},
    "other-run-id": lambda doc: {**doc, "run": {**doc["run"], "id": "../../etc"}},
}


def _damage(store: Path, run_id: str, how: str) -> None:
    path = store / "runs" / run_id / "manifest.json"
    path.write_text(json.dumps(DAMAGES[how](json.loads(path.read_text()))))


def test_damaged_runs_are_skipped_and_named_and_the_rest_indexed(tmp_path: Path) -> None:
    store = tmp_path / "store"
    ids = make_runs(store, [f"r{i}" for i in range(16 + len(DAMAGES))])
    damaged = dict(zip(ids, DAMAGES, strict=False))
    for run_id, how in damaged.items():
        _damage(store, run_id, how)
    (store / "index.sqlite").unlink()
    p = cli("store", "reindex", store=store)
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
    assert "indexed 16 run(s)" in p.stdout, p.stdout
    skipped = [ln for ln in p.stderr.splitlines() if ln.startswith("skipped: ")]
    assert len(skipped) == len(DAMAGES), p.stderr
    for run_id in damaged:
        assert sum(run_id in ln for ln in skipped) == 1, (run_id, skipped)
    listed = {r["id"] for r in json.loads(cli("ls", "--json", "-n", "0", store=store).stdout)}
    assert listed == set(ids) - set(damaged)


def test_a_structurally_wrong_manifest_is_one_line_for_that_run(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from stepscope.cli import main

    store = tmp_path / "store"
    ids = make_runs(store, [f"r{i}" for i in range(len(DAMAGES))])
    for run_id, how in zip(ids, DAMAGES, strict=True):
        _damage(store, run_id, how)
        for cmd in (["show", run_id], ["export", run_id, "-o", str(tmp_path / "x.json")]):
            assert main([*cmd, "--store", str(store)]) == 2, (how, cmd)
            err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
            assert len(err) == 1 and "manifest.json" in err[0] and "damaged" in err[0], (how, err)
    for run_id in ids[:2]:  # and in a real process, through the report
        line = one_line_error(cli("report", run_id, "-o", str(tmp_path / "r.html"), store=store))
        assert "manifest.json" in line and "damaged" in line, line


def test_reindex_restores_groups_and_prunes_missing_directories(tmp_path: Path) -> None:
    store = tmp_path / "store"
    st = open_store(store, create=True)
    st.index.add_group("bench-0a0b0c0d", "bench", "nightly", 123, {"command": ["python", "t.py"], "repeat": 2})
    st.index.add_group("sweep-01020304", "sweep", "lr", 456,
                       {"command": ["python", "t.py"], "grid": {"lr": ["0.1", "0.2"]}, "params": ["lr"], "repeat": 1})
    before = st.index.groups()
    st.close()
    make_runs(store, ["nightly", "nightly"], group="bench-0a0b0c0d")
    make_runs(store, ["lr"], group="sweep-01020304")
    legacy = make_runs(store, ["old", "old"], group="sweep-legacy01")  # a group recorded before groups/ existed
    gone = make_runs(store, ["gone"])[0]
    shutil.rmtree(store / "runs" / gone)
    p = cli("store", "reindex", store=store)
    assert p.returncode == 0, p
    assert "removed 1 row(s)" in p.stdout
    assert gone not in cli("ls", "--json", store=store).stdout
    (store / "index.sqlite").unlink()  # the index lost: rebuilt from the run directories and groups/
    p = cli("store", "reindex", store=store)
    assert p.returncode == 0 and "restored 3 group(s)" in p.stdout, p
    st = open_store(store)
    groups = st.index.groups()
    assert [g for g in groups if g[0] != "sweep-legacy01"] == before
    (rebuilt,) = [g for g in groups if g[0] == "sweep-legacy01"]
    assert rebuilt[1] == "sweep" and rebuilt[2] == "old" and rebuilt[4]["grid"] == {"lr": ["0.1"]}
    assert len([r for r in st.rows() if r.grp == "sweep-legacy01"]) == len(legacy)
    st.close()
