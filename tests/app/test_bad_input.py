"""Bad input gives the same one line from every consumer of a run (show, report, advise, export, diff): a run
without traces, a run with one unreadable rank trace, a run whose trace was deleted, a run of a newer format.
They all read the run through RunAnalysis, so the lines are the same; none is a traceback."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from stepscope.cli import main
from stepscope.store.rundir import read_run


def run_dir(store: Path, name: str) -> Path:
    (path,) = (p for p in (store / "runs").iterdir() if read_run(p).run.name == name)
    return path


def consumers(run: str, tmp_path: Path) -> dict[str, list[str]]:
    return {"show": ["show", run], "report": ["report", run, "-o", str(tmp_path / "r.html")],
            "advise": ["advise", run], "export": ["export", run, "-o", str(tmp_path / "export")],
            "diff": ["diff", run, run]}


def run_all(run: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, tuple[int, list[str]]]:
    """Each consumer, in process: (exit status, its distinct stderr lines that start with ``stepscope:``)."""
    out = {}
    for name, argv in consumers(run, tmp_path).items():
        rc = main(argv)
        err = capsys.readouterr().err
        assert "Traceback" not in err, (name, err)
        # (the fixture's rank 1 is another job's trace, imported with --accept-misfit: its note is not the point)
        out[name] = (rc, sorted({line for line in err.splitlines() if line.startswith("stepscope:")
                                 and "does not fit the run" not in line}))
    return out


def test_a_run_without_traces(store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    seen = run_all("plain", tmp_path, capsys)
    assert seen == {name: (0, []) for name in seen}  # not profiled is not a problem: no note
    assert main(["show", "plain", "--traces"]) == 2
    assert "was not profiled" in capsys.readouterr().err


def test_a_run_with_one_unreadable_rank_trace(store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = run_dir(store, "profiled") / "artifacts" / "traces" / "rank1.json.gz"
    bad.write_bytes(gzip.compress(b'{"traceEvents": [{"ph": "X", "name": "a"'))
    seen = run_all("profiled", tmp_path, capsys)
    (line,) = seen["show"][1]
    assert line.startswith("stepscope: note: rank 1: trace artifact artifacts/traces/rank1.json.gz could not be "
                           "read:") and line.endswith("that rank's kernel analyses skipped")
    assert seen == {name: (0, [line]) for name in seen}
    with (tmp_path / "export" / "operators.csv").open() as fh:  # rank 0's trace tables are still exported
        assert {row.split(",")[0] for row in fh.read().splitlines()[1:]} == {"0"}


def test_a_run_whose_trace_was_deleted(store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (run_dir(store, "profiled") / "artifacts" / "traces" / "rank0.json.gz").unlink()
    seen = run_all("profiled", tmp_path, capsys)
    (line,) = seen["advise"][1]
    assert line == ("stepscope: note: rank 0: trace artifact artifacts/traces/rank0.json.gz is missing (deleted?) — "
                    "kernel analyses skipped")
    assert seen == {name: (0, [line]) for name in seen}


def test_a_run_of_a_newer_format(store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (rank_file,) = (run_dir(store, "plain") / "ranks").glob("rank-*.jsonl")
    first, rest = rank_file.read_text().split("\n", 1)
    rank_file.write_text(json.dumps({**json.loads(first), "version": 999}) + "\n" + rest)
    seen = run_all("plain", tmp_path, capsys)
    (line,) = seen["show"][1]
    assert line.startswith("stepscope: error: ") and line.endswith(
        "record format 999 is newer than this stepscope — upgrade stepscope")
    assert seen == {name: (2, [line]) for name in seen}
