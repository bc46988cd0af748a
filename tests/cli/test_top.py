"""`stepscope top` on a finished run shows its final state and exits at once (with or without --once);
user mistakes give one line. (The live view of a running job: tests/integration/test_top_live.py.)"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from tests.conftest import Result, load


def test_top_on_a_finished_run_shows_the_final_state(tiny_store: Path, cli: Callable[..., Result]) -> None:
    data = load(tiny_store)
    for args in (("top", "--once"), ("top",)):
        t0 = time.monotonic()
        res = cli(*args, "--width", "100")
        assert res.rc == 0, res
        assert time.monotonic() - t0 < 60  # it did not wait for more records
        assert "the run has finished (completed, exit code 0)" in res.out, res.out
        assert data.run.id in res.out
        row = next(line for line in res.out.splitlines() if line.lstrip().startswith("0 │"))
        assert row.split("│")[1].strip() == "3"  # rank 0's 3 steps (tiny_train.py --steps 3)
        assert "—" in row.split("│")[-1]  # no straggler in a one-rank run
        assert "phases" in res.out and "forward" in res.out and "advice so far" in res.out
    bad = cli("top", "--interval", "0")
    assert bad.rc != 0 and bad.err.count("\n") == 1 and "--interval" in bad.err
    missing = cli("top", "nosuchrun")
    assert missing.rc != 0 and missing.err.count("\n") == 1 and "Traceback" not in missing.err
