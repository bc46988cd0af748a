"""Issue 15, Terminal, seen in a real 80-column terminal (a pty): `stepscope ls` cut run ids to 5 characters
and status words to "comple"; `trace analyze` split numbers over lines. Both are read here as a person sees
them: through a pseudo-terminal of 80 (and 60) columns."""

from __future__ import annotations

import gzip
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

from tests.conftest import TRACES, Result
from tests.ptyterm import run_in_pty

LONG_NAME = "a-rather-long-experiment-name-for-the-width-test"
NUMBER = re.compile(r"^(—|[\d,]+(\.\d+)?(%| ns| µs| ms| s| min)?)$")


def test_ls_never_cuts_run_ids_or_status_words(observed: Callable[..., Result], store: Path) -> None:
    ok = observed("tiny_train.py", "--steps", "6", opts=("--name", LONG_NAME))
    failed = observed("tiny_train.py", "--steps", "6", "--fail-at", "3", opts=("--name", LONG_NAME))
    assert ok.rc == 0 and failed.rc != 0, (ok, failed)
    ids = sorted(p.name for p in (store / "runs").iterdir())
    assert len(ids) == 2 and all(len(i) >= 8 for i in ids)
    for cols in (80, 60):
        _check_ls(store, ids, cols)


def _check_ls(store: Path, ids: list[str], cols: int) -> None:
    rc, out = run_in_pty([sys.executable, "-m", "stepscope", "ls", "--store", str(store)], cols=cols)
    assert rc == 0, out
    lines = out.splitlines()
    assert all(len(line.rstrip()) <= cols for line in lines), out
    words = out.split()
    for run_id in ids:
        assert run_id in words, out
    assert "completed" in words and "failed" in words, out
    assert "steps" in words and "6" in words, out  # the completed run's 6 steps, whole
    assert "not shown at" in out  # the long name and every column cannot fit: the dropped ones are named


def _table_cells(out: str, table_title: str) -> tuple[list[str], list[list[str]]]:
    """Header and body rows (cells) of the table printed under ``table_title``."""
    lines = out.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(table_title))
    header: list[str] = []
    rows: list[list[str]] = []
    for ln in lines[start + 1:]:
        if ln.startswith("┃"):
            header = [c.strip() for c in ln.strip("┃").split("┃")]
        elif ln.startswith("│"):
            rows.append([c.strip() for c in ln.strip().strip("│").split("│")])
        elif ln.startswith("└"):
            break
    return header, rows


def test_trace_analyze_never_splits_numbers() -> None:
    path = TRACES / "v100_1rank"
    rc, out = run_in_pty([sys.executable, "-m", "stepscope", "trace", "analyze", str(path)], cols=80)
    assert rc == 0, out
    assert all(len(line.rstrip()) <= 80 for line in out.splitlines()), out
    header, rows = _table_cells(out, "GPU time by component")
    assert header[0] == "name" and "sum" in header and "count" in header, header
    numeric = [i for i, h in enumerate(header) if h != "name"]
    for row in rows:
        for i in numeric:
            assert NUMBER.match(row[i]), (header[i], row, out)  # one whole number per cell: none split
    assert all(row[0] for row in rows), out  # no continuation line: no cell wrapped
    # the counts add up to the trace's GPU activities, counted here from the raw JSON
    with gzip.open(path / "rank0.json.gz") as fh:
        doc = json.loads(fh.read())
    gpu = sum(1 for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") in
              ("kernel", "gpu_memcpy", "gpu_memset"))
    count = header.index("count")
    assert sum(int(r[count].replace(",", "")) for r in rows) == gpu
    summary_header, summary = _table_cells(out, "rank 0")
    assert summary_header == ["figure", "time", "%"]
    for row in summary:
        assert row[1] == "" or NUMBER.match(row[1]), (row, out)
