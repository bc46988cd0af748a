"""Issue 17, live view: `stepscope top` on a real running 2-rank torchrun job, read through an 80-column
pseudo-terminal. Both ranks advance between two frames; a straggler (rank 1 sleeps 150 ms more per step from
step 40 on) is flagged within 10 s of its first slow step; the A/A job (no sleep added) flags none in any
frame. When the run ends, top shows the final state and exits 0."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import SCRIPTS
from tests.ptyterm import PtyProcess, plain

RANK_ROW = re.compile(r"^\s*([01]) │\s+([\d,]+) │", re.M)


def _start_job(store: Path, mark: Path, *extra: str) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "stepscope", "run", "--store", str(store), "--quiet", "--sample-interval", "0.5",
           "--", sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           str(SCRIPTS / "live_steps.py"), "--mark", str(mark), *extra]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _run_id(store: Path, job: subprocess.Popen[bytes]) -> str:
    """The job's run id, once both ranks have written their record files."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        runs = list((store / "runs").glob("*/ranks/rank-*.jsonl")) if (store / "runs").is_dir() else []
        if len(runs) >= 2:
            return runs[0].parent.parent.name
        assert job.poll() is None, job.stderr.read().decode() if job.stderr else ""
        time.sleep(0.2)
    raise AssertionError("the job wrote no record files in 120 s")


def _frames(text: str) -> list[str]:
    return [f for f in plain(text).split("stepscope top")[1:] if RANK_ROW.search(f)]


def _steps(frame: str) -> dict[int, int]:
    return {int(r): int(n.replace(",", "")) for r, n in RANK_ROW.findall(frame)}


def _watch(store: Path, mark: Path, *extra: str) -> tuple[list[tuple[float, str]], float | None]:
    """Frames of top as they came (wall time, text) until the run ends, and the straggler's mark time."""
    job = _start_job(store, mark, *extra)
    top: PtyProcess | None = None
    try:
        run_id = _run_id(store, job)
        top = PtyProcess([sys.executable, "-m", "stepscope", "top", "--store", str(store), run_id], cols=80,
                         rows=60)
        seen: list[tuple[float, str]] = []
        deadline = time.monotonic() + 240
        while top.proc.poll() is None and time.monotonic() < deadline:
            text = top.read(0.5)
            seen += [(time.time(), f) for f in _frames(text)]
        before = len(top.raw)
        assert top.finish(timeout=30) == 0
        seen += [(time.time(), f) for f in _frames(top.raw[before:].decode("utf-8", "replace"))]
        assert job.wait(timeout=120) == 0, job.stderr.read().decode() if job.stderr else ""
    finally:
        if top is not None:
            top.stop()
        if job.poll() is None:
            job.kill()
            job.wait()
    marked = float(mark.read_text()) if mark.exists() else None
    return seen, marked


def test_top_follows_both_ranks_and_flags_the_straggler(tmp_path: Path) -> None:
    seen, marked = _watch(tmp_path / "store", tmp_path / "mark", "--steps", "130", "--straggler", "1",
                          "--straggle-from", "40", "--delay-ms", "150")
    assert marked is not None and len(seen) >= 3, seen
    # both ranks advance between two frames taken at least 2 s apart while the run goes
    running = [(t, _steps(f)) for t, f in seen if "the run has finished" not in f]
    pairs = [(a, b) for a in running for b in running if b[0] - a[0] >= 2 and len(a[1]) == len(b[1]) == 2]
    assert any(b[1][0] > a[1][0] and b[1][1] > a[1][1] for a, b in pairs), running
    # the straggler: rank 1 flagged slow within 10 s of its first slow step; rank 0 never
    flagged = [t for t, f in seen if re.search(r"^\s*1 │.*slow:", f, re.M)]
    assert flagged, seen[-1][1]
    assert flagged[0] - marked <= 10.0, (flagged[0] - marked, seen[-1][1])
    print(f"straggler flagged {flagged[0] - marked:.1f} s after its first slow step")
    assert not any(re.search(r"^\s*0 │.*(slow|behind):", f, re.M) for _, f in seen)
    # before the straggler appeared no rank was flagged
    assert not any(re.search(r"(slow|behind):", f) for t, f in seen if t < marked - 2.5)
    assert "the run has finished (completed" in seen[-1][1]


def test_top_flags_no_straggler_in_an_a_a_job(tmp_path: Path) -> None:
    seen, marked = _watch(tmp_path / "store", tmp_path / "mark", "--steps", "120")
    assert marked is None and len(seen) >= 3
    assert not any(re.search(r"(slow|behind):", f) for _, f in seen), [f for _, f in seen if "slow" in f][:1]
    final = _steps(seen[-1][1])
    assert final == {0: 120, 1: 120}, seen[-1][1]
