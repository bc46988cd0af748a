"""The incremental reader of a running run (store/tail.py), on the record files of a real run replayed as
they would grow: cut at arbitrary bytes (mid-line included). Each poll holds exactly the steps of the whole
lines written so far (counted here from the raw JSON lines), a partial line is never read as damaged, every
byte is read once, and the final poll equals a full read_run."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np

from stepscope.store.rundir import read_run
from stepscope.store.tail import RunTail
from tests.conftest import Result


def _whole_line_steps(raw: bytes) -> int:
    done = raw[: raw.rfind(b"\n") + 1] if b"\n" in raw else b""
    n = 0
    for line in done.splitlines():
        rec = json.loads(line)
        if rec.get("kind") == "steps":
            n += sum(1 for p in rec["cols"].get("phase", [0] * len(rec["cols"]["index"])) if p == 0)
    return n


def test_tail_reads_a_growing_run_like_a_full_read(observed: Callable[..., Result], store: Path,
                                                   tmp_path: Path) -> None:
    res = observed("tiny_train.py", "--steps", "30", "--step-sleep", "0.15")  # flushes every 2 s
    assert res.rc == 0, res
    (src,) = list((store / "runs").iterdir())
    (rank_file,) = list((src / "ranks").glob("rank-*.jsonl"))
    raw = rank_file.read_bytes()
    assert raw.count(b'"kind":"steps"') >= 2  # several step batches: the replay sees steps arrive
    grow = tmp_path / "grow"
    (grow / "ranks").mkdir(parents=True)
    shutil.copy(src / "manifest.json", grow / "manifest.json")
    tail = RunTail(grow)
    written = 0
    seen = []
    with open(grow / "ranks" / rank_file.name, "wb") as out:
        for size in (1, 5, 777, 64, 3000, 1, 1500) * 100:
            if written >= len(raw):
                break
            out.write(raw[written:written + size])
            out.flush()
            written = min(len(raw), written + size)
            data = tail.poll()
            if data.ranks:
                steps = int((data.ranks[0].steps["phase"] == 0).sum())
                assert steps == _whole_line_steps(raw[:written])
                assert not data.ranks[0].notes, data.ranks[0].notes  # a cut line is never "damaged"
                seen.append(steps)
    shutil.copy(src / "end.json", grow / "end.json")
    final = tail.poll()
    assert tail.bytes_read == len(raw)
    # steps arrive batch by batch, in order (the run flushed 2-3 batches; a small last batch can arrive in the
    # same write as the one before it, so at least 2 states with steps; every state was checked exactly above)
    assert len(set(seen) - {0}) >= 2 and seen == sorted(seen)
    full = read_run(src)
    assert final.run.status == full.run.status
    for a, b in zip(final.ranks, full.ranks, strict=True):
        for col in ("index", "start_ns", "end_ns", "forward_ns", "phase"):
            assert np.array_equal(a.steps[col], b.steps[col], equal_nan=True)
        assert len(a.samples) == len(b.samples) and a.notes == b.notes and a.stream == b.stream


def test_a_damaged_line_is_reported_once_as_by_a_full_read(observed: Callable[..., Result], store: Path) -> None:
    res = observed("tiny_train.py", "--steps", "6")
    assert res.rc == 0, res
    (run_dir,) = list((store / "runs").iterdir())
    (rank_file,) = list((run_dir / "ranks").glob("rank-*.jsonl"))
    tail = RunTail(run_dir)
    tail.poll()
    with open(rank_file, "ab") as fh:
        fh.write(b'this is not JSON\n{"kind": "note", "tex')  # damaged + partial
    first = tail.poll()
    second = tail.poll()
    full = read_run(run_dir)
    assert first.ranks[0].notes == second.ranks[0].notes == full.ranks[0].notes
    assert sum("damaged record line" in n for n in full.ranks[0].notes) == 1
