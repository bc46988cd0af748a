"""Issue 44, item 4: a run that lost records is marked. The disk fills during a real observed run (the training lowers
its own RLIMIT_FSIZE, as in test_collect_disk_full.py) and stays full to the end: the run completes, and `ls` (text and
--json), `show`, the index and the dashboard's run list all say `partial` beside its status, with the count lost that
the run's own note gives. A run that lost nothing is not marked; a damaged line found later marks it once reindexed."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from stepscope.store.store import open_store
from tests.conftest import stepscope_cmd
from tests.faults.test_collect_disk_full import _rank_files, _run

pytestmark = pytest.mark.slow


def _cli(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "STEPSCOPE_HOME": str(store), "COLUMNS": "200"}
    env.pop("STEPSCOPE_DB", None)
    out = subprocess.run(stepscope_cmd(*args, "--store", str(store)), capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stdout + out.stderr
    return out


def _lost_in_note(path: Path) -> int:
    """The count the writer's own note gives (read from the rank file, not through stepscope's reader)."""
    notes = [json.loads(line)["text"] for line in path.read_text().splitlines()
             if line.strip() and json.loads(line)["kind"] == "note"]
    [n] = [int(m.group(1)) for t in notes for m in [re.match(r"(\d+) record line", t)] if m]
    return n


def test_a_run_that_lost_records_is_partial_everywhere(store: Path, tmp_path: Path) -> None:
    r = _run(store, tmp_path, "--steps", "50", "--sleep", "0.05", "--limit", "2500", "--full-from", "1")
    assert r.returncode == 0, r.stderr[-3000:]
    [path] = _rank_files(store)
    lost = _lost_in_note(path)
    assert lost > 0
    label = f"completed, partial ({lost} record{'s' if lost != 1 else ''} lost)"

    rows = json.loads(_cli(store, "ls", "--json").stdout)
    assert [(row["status"], row["partial"], row["records_lost"]) for row in rows] == [("completed", True, lost)]
    assert label in _cli(store, "ls").stdout  # before: "completed" and nothing else
    assert f"partial ({lost} record" in _cli(store, "show", "latest").stdout
    shown = json.loads(_cli(store, "show", "latest", "--json").stdout)
    assert (shown["partial"], shown["records_lost"]) == (True, lost)  # before: neither field in show --json

    opened = open_store(store)
    [run_id] = opened.index.run_ids()
    assert opened.index.metrics([run_id])[run_id]["records_lost"] == lost

    site = tmp_path / "site"
    _cli(store, "dashboard", "build", "-o", str(site))
    assert label in "".join(p.read_text(errors="replace") for p in site.rglob("*") if p.is_file())


def test_a_run_that_lost_nothing_is_not_partial_and_a_damaged_line_makes_it_partial(store: Path,
                                                                                    tmp_path: Path) -> None:
    r = _run(store, tmp_path, "--steps", "20", "--sleep", "0", "--limit", "10000000")
    assert r.returncode == 0, r.stderr[-3000:]
    [row] = json.loads(_cli(store, "ls", "--json").stdout)
    assert (row["status"], row["partial"], row["records_lost"]) == ("completed", False, 0)
    assert "partial" not in _cli(store, "ls").stdout and "partial" not in _cli(store, "show").stdout
    shown = json.loads(_cli(store, "show", "--json").stdout)
    assert (shown["partial"], shown["records_lost"]) == (False, 0)
    [path] = _rank_files(store)
    lines = path.read_bytes().splitlines(keepends=True)
    lines[1] = b'{"kind": "steps", "cols": 5}\n'  # a damaged record: the reader skips it
    path.write_bytes(b"".join(lines))
    _cli(store, "store", "reindex")
    [row] = json.loads(_cli(store, "ls", "--json").stdout)
    assert (row["partial"], row["records_lost"]) == (True, 1)
