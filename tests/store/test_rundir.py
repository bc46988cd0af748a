"""Run directory format: versions, damaged files, resolution of run references."""

from __future__ import annotations

import json
import time

import pytest

from stepscope.errors import NotFoundError, StoreFormatError, UserError
from stepscope.model.run import HostInfo, RankStream, Run, RunStatus, SoftwareInfo
from stepscope.store import open_store
from stepscope.store.rundir import (
    RecordWriter,
    rank_file_name,
    read_rank_file,
    read_run,
    stream_header,
    write_end,
    write_manifest,
)


def _run(run_id: str, name: str, start_ns: int) -> Run:
    return Run(id=run_id, name=name, status=RunStatus.RUNNING, start_ns=start_ns, end_ns=None, command=("python",),
               cwd="/", exit_code=None, git=None, host=HostInfo("h", "Linux", None, 1, 2, 1000),
               software=SoftwareInfo(python="3.11", stepscope="dev"), world_size=1)


def _stream(rank: int = 0) -> RankStream:
    return RankStream(rank=rank, local_rank=rank, world_size=1, role=None, pid=1, host="h", start_ns=0, end_ns=None)


def _store_with_runs(tmp_path, names):
    st = open_store(tmp_path / "s", create=True)
    ids = []
    for i, name in enumerate(names):
        run_id, path = st.new_run_dir()
        run = _run(run_id, name, start_ns=1_000 + i)
        write_manifest(path, run)
        write_end(path, status=RunStatus.COMPLETED, end_ns=2_000 + i, exit_code=0)
        st.index.upsert_run(run, str(path))
        ids.append(run_id)
    return st, ids


def test_resolve_latest_prefix_name_and_closest(tmp_path):
    st, ids = _store_with_runs(tmp_path, ["alpha", "beta", "gamma"])
    assert st.resolve("latest") == ids[2]
    assert st.resolve("latest~2") == ids[0]
    assert st.resolve("beta") == ids[1]
    assert st.resolve(ids[0][:6]) == ids[0]
    with pytest.raises(NotFoundError, match="the store has 3 run"):
        st.resolve("latest~3")
    with pytest.raises(NotFoundError, match="closest: gamma"):
        st.resolve("gamme")


def test_rank_file_with_truncated_last_line_is_read_up_to_it(tmp_path):
    path = tmp_path / rank_file_name(0)
    w = RecordWriter(path)
    w.append([stream_header(_stream()), {"kind": "steps", "cols": {"index": [0, 1], "start_ns": [0, 10],
                                                                     "end_ns": [10, 25]}}])
    w.close()
    with path.open("ab") as fh:
        fh.write(b'{"kind": "steps", "cols": {"index": [2')  # killed mid-write
    rank = read_rank_file(path)
    assert list(rank.steps["index"]) == [0, 1]
    assert list(rank.steps.duration_ns) == [10, 15]
    assert not rank.stream.complete


def test_damaged_middle_line_is_skipped_and_reported_naming_the_file(tmp_path):
    path = tmp_path / rank_file_name(0)
    path.write_text(json.dumps({"kind": "stream", "version": 1, **{
        "rank": 0, "local_rank": 0, "world_size": 1, "role": None, "pid": 1, "host": "h", "start_ns": 0,
        "end_ns": None}}) + "\nnot json\n" + json.dumps({"kind": "note", "text": "x"}) + "\n\n")
    rank = read_rank_file(path)  # one damaged line costs that line, not the run (issue 19)
    assert rank.notes[0] == "x"
    assert rank.notes[1] == "rank-00000.jsonl: 1 damaged record line(s) skipped — line 2: not JSON"


def test_newer_manifest_version_is_refused_with_advice(tmp_path):
    st, ids = _store_with_runs(tmp_path, ["a"])
    manifest = st.run_path(ids[0]) / "manifest.json"
    doc = json.loads(manifest.read_text())
    doc["version"] = 99
    manifest.write_text(json.dumps(doc))
    with pytest.raises(StoreFormatError, match=r"newer than this stepscope understands.*upgrade"):
        read_run(st.run_path(ids[0]))


def test_run_without_end_record_and_dead_launcher_is_incomplete(tmp_path):
    st = open_store(tmp_path / "s", create=True)
    run_id, path = st.new_run_dir()
    run = _run(run_id, "x", time.time_ns())
    run = Run(**{**{f: getattr(run, f) for f in run.__dataclass_fields__},
                 "extra": {"launcher_pid": 2**22 + 12345, "launcher_host": __import__("os").uname().nodename}})
    write_manifest(path, run)
    assert read_run(path).run.status == RunStatus.INCOMPLETE


def test_opening_a_folder_that_is_not_a_store(tmp_path):
    (tmp_path / "plain").mkdir()
    with pytest.raises(UserError, match="not a stepscope store"):
        open_store(tmp_path / "plain")
    with pytest.raises(NotFoundError, match="no stepscope store"):
        open_store(tmp_path / "missing")


def test_index_schema_newer_than_code_is_refused(tmp_path):
    st, _ = _store_with_runs(tmp_path, ["a"])
    import sqlite3

    conn = sqlite3.connect(st.db_url)
    conn.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    st.close()
    with pytest.raises(UserError, match="newer than this stepscope"):
        _ = open_store(tmp_path / "s").index
