"""One damaged record line costs that line, never the run (issue 19, item 6, the record-file part).

A real observed run's rank file gets one damaged line at a time — valid JSON of the wrong structure
(each of the shapes that raised AttributeError / KeyError / TypeError / OverflowError in show, report
and export) or a flipped byte — and `show`, `report` and `export` still work, say which line was
skipped, and keep every other record.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import orjson
import pytest

from stepscope.cli import main
from stepscope.store.rundir import RANKS, read_run
from tests.conftest import PY, SCRIPTS, stepscope_cmd

pytestmark = pytest.mark.slow
STEPS = 12

DAMAGED: dict[str, bytes] = {
    "cols is a list": b'{"kind": "steps", "cols": [1, 2, 3]}',
    "no cols": b'{"kind": "steps"}',
    "a string in a number column": b'{"kind": "steps", "cols": {"index": ["a"], "start_ns": [1], "end_ns": [2]}}',
    "a list in a number column": b'{"kind": "metrics", "cols": {"name": ["loss"], "step": [[1]], "t_ns": [1], '
                                 b'"value": [1.0]}}',
    "a number past int64": b'{"kind": "steps", "cols": {"index": [99], "start_ns": [1180591620717411303424], '
                           b'"end_ns": [1]}}',
    "columns of unequal length": b'{"kind": "comm", "cols": {"op": ["all_reduce", "x"], "step": [0], '
                                 b'"start_ns": [1], "duration_ns": [1]}}',
    "a region path that is a number": b'{"kind": "regions", "cols": {"path": [7], "step": [0], "start_ns": [1], '
                                      b'"duration_ns": [5], "depth": [0]}}',
    "a record that is a list": b'[1, 2, 3]',
    "a kind that is a number": b'{"kind": 3}',
    "a model summary that is a string": b'{"kind": "model", "summary": "oops"}',
    "a stream update with a text rank": b'{"kind": "stream_update", "rank": "zero"}',
    "an end record with a text time": b'{"kind": "end", "end_ns": "soon", "reason": "exit"}',
    "a step_device record with a text index": b'{"kind": "step_device", "index": "1", "device_ns": 5.0}',
}


@pytest.fixture(scope="module")
def seed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("damaged")
    env = {**os.environ, "STEPSCOPE_HOME": str(root / "store")}
    env.pop("STEPSCOPE_DB", None)
    r = subprocess.run(stepscope_cmd("run", "--quiet", "--sample-interval", "0.1", "--", PY,
                                     str(SCRIPTS / "tiny_train.py"), "--steps", str(STEPS)),
                       capture_output=True, text=True, env=env, cwd=root, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return root / "store"


def _damage(seed: Path, tmp_path: Path, line: bytes, *, at: int = 1) -> tuple[Path, int]:
    """A copy of the seed store with ``line`` inserted after line ``at`` of the rank file."""
    store = tmp_path / "store"
    shutil.copytree(seed, store)
    [rank_file] = list(store.glob(f"runs/*/{RANKS}/rank-*.jsonl"))
    lines = rank_file.read_bytes().split(b"\n")
    lines.insert(at, line)
    rank_file.write_bytes(b"\n".join(lines))
    return store, at + 1


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("what", sorted(DAMAGED))
def test_show_report_export_skip_and_report_a_structurally_wrong_line(
        what: str, seed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store, lineno = _damage(seed, tmp_path, DAMAGED[what])
    rc, out, err = _cli(capsys, "show", "latest", "--store", str(store), "--width", "200")
    assert rc == 0, err
    assert f"1 damaged record line(s) skipped — line {lineno}:" in out, out
    rc, out, err = _cli(capsys, "show", "latest", "--store", str(store), "--json")
    assert rc == 0, err
    assert json.loads(out)["headline"]["steps"] == STEPS  # every other record kept
    rc, out, err = _cli(capsys, "report", "latest", "--store", str(store), "-o", str(tmp_path / "r.html"))
    assert rc == 0 and (tmp_path / "r.html").stat().st_size > 0, err
    rc, out, err = _cli(capsys, "export", "latest", "--store", str(store), "-o", str(tmp_path / "csv"))
    assert rc == 0, err
    assert len((tmp_path / "csv" / "steps.csv").read_text().strip().splitlines()) == 1 + STEPS


def test_a_flipped_byte_in_one_line_costs_that_line(seed: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    store, _ = _damage(seed, tmp_path, b"")
    [rank_file] = list(store.glob(f"runs/*/{RANKS}/rank-*.jsonl"))
    lines = rank_file.read_bytes().split(b"\n")
    # the model summary record: flip one bit of its opening brace, it is no longer JSON
    i = next(k for k, line in enumerate(lines) if line.startswith(b'{"kind":"model"'))
    lines[i] = bytes([lines[i][0] ^ 0x04]) + lines[i][1:]
    rank_file.write_bytes(b"\n".join(lines))
    data = read_run(rank_file.parents[1])
    assert len(data.ranks[0].steps) == STEPS and data.ranks[0].model is None
    assert f"line {i + 1}: not JSON" in data.ranks[0].notes[-1]
    rc, out, err = _cli(capsys, "show", "latest", "--store", str(store), "--width", "200")
    assert rc == 0 and "not JSON" in out, err


def test_every_line_but_the_header_damaged_still_reads(seed: Path, tmp_path: Path) -> None:
    store, _ = _damage(seed, tmp_path, b"")
    [rank_file] = list(store.glob(f"runs/*/{RANKS}/rank-*.jsonl"))
    lines = [line for line in rank_file.read_bytes().split(b"\n") if line]
    rank_file.write_bytes(lines[0] + b"\n" + b"".join(line[:-1] + b"\n" for line in lines[1:]))
    rank = read_run(rank_file.parents[1]).ranks[0]
    assert len(rank.steps) == 0 and not rank.stream.complete
    assert f"{len(lines) - 1} damaged record line(s) skipped" in rank.notes[-1]
    assert orjson.loads(lines[0])["kind"] == "stream"
