"""The index on a real PostgreSQL server (started here) and on SQLite: same behaviour, migrations from an
old schema, 16 concurrent writers, and a one-line error for an unreachable server."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from stepscope.errors import UserError
from stepscope.store.index import SCHEMA_VERSION, Index

FIXTURES = Path(__file__).resolve().parent / "fixtures"
pytestmark = pytest.mark.postgres


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_postgres(*cmd: str) -> subprocess.CompletedProcess[str]:
    """PostgreSQL refuses to run as root: run its tools as the 'postgres' user when we are root."""
    prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    return subprocess.run([*prefix, *cmd], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """A throwaway PostgreSQL server on a free port; yields its base URL (no database part)."""
    bins = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not bins:
        pytest.skip("no PostgreSQL server binaries under /usr/lib/postgresql/*/bin (install postgresql)")
    bindir = Path(bins[-1]).parent
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        pytest.skip("running as root without runuser: cannot start PostgreSQL as an unprivileged user")
    base = Path(tempfile.mkdtemp(prefix="stepscope-pg-"))
    data = base / "data"
    if os.geteuid() == 0:
        shutil.chown(base, "postgres")
    port = _free_port()
    p = _as_postgres(str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync")
    if p.returncode != 0:
        shutil.rmtree(base, ignore_errors=True)
        pytest.skip(f"initdb failed: {p.stderr.strip()[-300:]}")
    opts = f"-p {port} -k {base} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=60"
    p = _as_postgres(str(bindir / "pg_ctl"), "-D", str(data), "-o", opts, "-l", str(base / "log"), "-w", "start")
    if p.returncode != 0:
        shutil.rmtree(base, ignore_errors=True)
        pytest.skip(f"pg_ctl start failed: {p.stderr.strip()[-300:]}")
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}"
    finally:
        _as_postgres(str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop")
        shutil.rmtree(base, ignore_errors=True)


def _new_database(server: str) -> str:
    import psycopg

    name = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(server + "/postgres", autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return f"{server}/{name}"


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "index.sqlite")
    return _new_database(request.getfixturevalue("pg_server"))


def _load_v1(url: str) -> None:
    """Write the schema-1 fixture with the back-end's own driver (not through Index)."""
    statements = [s.strip() for s in FIXTURES.joinpath("index_v1.sql").read_text().split(";\n") if s.strip()]
    statements = ["\n".join(ln for ln in s.splitlines() if not ln.startswith("--")) for s in statements]
    if url.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            for s in statements:
                conn.execute(s)
    else:
        import sqlite3

        conn = sqlite3.connect(url)
        for s in statements:
            conn.execute(s)
        conn.commit()
        conn.close()


def test_old_store_is_migrated(db_url: str) -> None:
    _load_v1(db_url)
    idx = Index(db_url)
    try:
        assert idx.schema_version() == SCHEMA_VERSION == 3
        rows = {r.id: r for r in idx.runs()}
        assert set(rows) == {"oldrun01", "oldrun02"}
        old = rows["oldrun01"]
        assert old.git_commit == "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678" and old.git_dirty is False
        assert old.git_shallow is None  # not recorded before schema 2
        assert old.params == {"lr": "0.1"} and old.tags == {"team": "core"} and old.grp == "bench-0001"
        assert idx.metrics(["oldrun01", "oldrun02"]) == {"oldrun01": {"step_time_median_s": 0.0125},
                                                         "oldrun02": {"step_time_median_s": 0.0127}}
        assert idx.groups("bench") == [("bench-0001", "bench", "nightly", 1700000000000000000, {"repeat": 2})]
    finally:
        idx.close()
    again = Index(db_url)  # reopening a migrated index changes nothing
    assert again.schema_version() == 3 and len(again.runs()) == 2
    again.close()


def test_same_behaviour_on_both_backends(db_url: str, tmp_path: Path) -> None:
    idx = Index(db_url)
    try:
        for i in range(3):
            idx.upsert_run(_run(f"r{i}", start_ns=1000 + i, shallow=i == 1), str(tmp_path / f"r{i}"),
                           {"step_time_median_s": 0.01 * (i + 1), "nan_metric": float("nan")})
        idx.upsert_run(_run("r0", start_ns=1000, name="renamed"), str(tmp_path / "r0"))  # metrics kept
        assert [r.id for r in idx.runs()] == ["r2", "r1", "r0"]
        assert [r.id for r in idx.runs("name = ?", ["renamed"])] == ["r0"]
        assert idx.runs(order="start_ns", limit=1)[0].id == "r0"
        assert [r.git_shallow for r in idx.runs(order="start_ns")] == [False, True, False]
        m = idx.metrics()
        assert m["r1"]["step_time_median_s"] == pytest.approx(0.02) and m["r1"]["nan_metric"] is None
        idx.add_group("g1", "bench", "nightly", 5, {"repeat": 3})
        assert idx.groups() == [("g1", "bench", "nightly", 5, {"repeat": 3})]
        idx.remove_run("r1")
        assert "r1" not in idx.metrics() and [r.id for r in idx.runs()] == ["r2", "r0"]
    finally:
        idx.close()


def _run(run_id: str, *, start_ns: int, name: str = "bench", shallow: bool = False):  # type: ignore[no-untyped-def]
    from stepscope.model.run import GitInfo, HostInfo, Run, RunStatus, SoftwareInfo

    return Run(id=run_id, name=name, status=RunStatus.COMPLETED, start_ns=start_ns, end_ns=start_ns + 5,
               command=("python", "t.py"), cwd="/", exit_code=0,
               git=GitInfo(commit="c" * 40, branch="main", dirty=False, commit_time_s=1.0, subject="s",
                           shallow=shallow),
               host=HostInfo("h", "linux", None, None, None, None), software=SoftwareInfo("3", "0.1"),
               world_size=1, params={"lr": "0.1"}, tags={})


WRITER = textwrap.dedent("""
    import sys, time
    from stepscope.store import open_store
    from stepscope.store.rundir import write_manifest
    from tests.store.test_postgres import _run
    root, db, worker, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    store = open_store(root, db or None, create=True)
    for i in range(n):
        run_id, path = store.new_run_dir()
        run = _run(run_id, start_ns=time.time_ns(), name=f"w{worker}")
        write_manifest(path, run)
        store.index.upsert_run(run, str(path), {"step_time_median_s": worker + i / 100})
    store.close()
""")


def test_sixteen_writers_lose_nothing(db_url: str, tmp_path: Path) -> None:
    root = tmp_path / "store"
    db = "" if not db_url.startswith("postgresql://") else db_url
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[2]),
                                                         os.environ.get("PYTHONPATH", "")])}
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(root), db, str(w), "4"], env=env,
                              stderr=subprocess.PIPE, text=True) for w in range(16)]
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert all(p.returncode == 0 for p in procs), [(w, p.returncode, e[-2000:]) for w, (p, e) in
                                                   enumerate(zip(procs, errors, strict=True)) if p.returncode]
    from stepscope.store import open_store

    store = open_store(root, db or None)
    rows = store.index.runs()
    on_disk = {p.name for p in (root / "runs").iterdir()}
    assert len(rows) == 16 * 4 and {r.id for r in rows} == on_disk
    metrics = store.index.metrics()
    for w in range(16):
        got = sorted(metrics[r.id]["step_time_median_s"] for r in rows if r.name == f"w{w}")
        assert got == pytest.approx([w + i / 100 for i in range(4)])
    store.close()


def test_unreachable_database_is_one_line(tmp_path: Path) -> None:
    port = _free_port()  # nothing listens there
    url = f"postgresql://someone:secret@127.0.0.1:{port}/db"
    with pytest.raises(UserError) as e:
        Index(url)
    msg = str(e.value)
    assert "\n" not in msg and "127.0.0.1" in msg and "secret" not in msg
    assert "refused" in msg.lower() or "connection" in msg.lower()


def test_unreachable_database_writes_no_run(tmp_path: Path) -> None:
    from stepscope.cli import main

    store = tmp_path / "store"
    script = tmp_path / "t.py"
    script.write_text("print('hi')\n")
    url = f"postgresql://u@127.0.0.1:{_free_port()}/db"
    rc = main(["run", "--store", str(store), "--db", url, "--quiet", "--sample-interval", "0", "--",
               sys.executable, str(script)])
    assert rc == 2
    assert not (store / "runs").exists() or not any((store / "runs").iterdir())


def test_unknown_host_names_host(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from stepscope.cli import main
    from stepscope.store import open_store

    open_store(tmp_path / "s", create=True)
    rc = main(["ls", "--db", "postgresql://u@no-such-host.invalid/db", "--store", str(tmp_path / "s")])
    err = capsys.readouterr().err.strip()
    assert rc != 0 and "\n" not in err and "no-such-host.invalid" in err
