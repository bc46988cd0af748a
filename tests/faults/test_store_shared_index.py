"""Issue 19, item 9: a PostgreSQL index shared by two stores. Each store lists and resolves its own runs; a run of
the other store is refused with a message naming where it lives; `rm` from the wrong store deletes nothing;
run locations are stored absolute even when --store is relative."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.faults.store_kit import cli, make_runs, one_line_error
from tests.store.test_postgres import _new_database, pg_server  # noqa: F401 - the fixture

pytestmark = pytest.mark.postgres


def test_two_stores_sharing_one_postgres_index(tmp_path: Path, pg_server: str) -> None:  # noqa: F811
    db = _new_database(pg_server)
    a, b = tmp_path / "a", tmp_path / "b"
    ids_a = make_runs(a, ["alpha", "alpha"], db=db)
    (id_b,) = make_runs(b, ["beta"], db=db)

    listed_a = {r["id"] for r in json.loads(cli("ls", "--json", store=a, db=db).stdout)}
    listed_b = {r["id"] for r in json.loads(cli("ls", "--json", store=b, db=db).stdout)}
    assert listed_a == set(ids_a) and listed_b == {id_b}

    line = one_line_error(cli("show", id_b, store=a, db=db))
    assert "another store" in line and str(b / "runs" / id_b) in line and "--store" in line, line

    p = cli("rm", "--yes", id_b, store=a, db=db)
    line = one_line_error(p)
    assert "another store" in line, line
    assert (b / "runs" / id_b / "manifest.json").is_file()
    assert id_b in cli("ls", "--json", store=b, db=db).stdout

    p = cli("rm", "--yes", id_b, store=b, db=db)  # from its own store it goes
    assert p.returncode == 0, p
    assert not (b / "runs" / id_b).exists()
    assert {r["id"] for r in json.loads(cli("ls", "--json", store=a, db=db).stdout)} == set(ids_a)


def test_run_locations_are_absolute_with_a_relative_store(tmp_path: Path, pg_server: str) -> None:  # noqa: F811
    """`stepscope run --store rel-store` from another folder: the index row says where the run really is."""
    db = _new_database(pg_server)
    work = tmp_path / "work"
    work.mkdir()
    p = cli("run", "--quiet", "--store", "rel-store", "--db", db, "--", sys.executable, "-c", "pass", cwd=work)
    assert p.returncode == 0, p
    rows = json.loads(cli("ls", "--json", store=work / "rel-store", db=db).stdout)
    (row,) = rows
    assert row["path"] == str(work / "rel-store" / "runs" / row["id"])
    assert cli("show", row["id"], store=work / "rel-store", db=db).returncode == 0
