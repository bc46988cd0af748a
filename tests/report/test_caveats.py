"""Caveats travel with the figures: the end-of-run summary (the first screen a user sees) and the notebook overview
carry the measurement-quality line when it fires, the same line `show` prints; a cost too small to measure reads
"not resolved", never "+0"."""

from __future__ import annotations

import html
import io
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from stepscope.analyze.run.quality import measurement_quality
from stepscope.analyze.run.summary import summarize_run
from stepscope.app import RunAnalysis
from stepscope.report.flops import flops_table
from stepscope.store.rundir import read_run
from tests.analyze.distdata import rank_data, run_data

SCRIPT = """import sys, time, stepscope
waits = [float(w) for w in sys.argv[1].split(",")]
for i in stepscope.steps(range(int(sys.argv[2]))):
    time.sleep(waits[i % len(waits)])
"""


def _observed(tmp: Path, waits: str, steps: int) -> tuple[Path, str]:
    """A real run under `stepscope run` (summary printed); its run directory and the launcher's stderr."""
    (tmp / "q.py").write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k not in ("STEPSCOPE_HOME", "STEPSCOPE_DB")}
    p = subprocess.run([sys.executable, "-m", "stepscope", "run", "--store", str(tmp / "store"),
                        "--sample-interval", "0.1", "--", sys.executable, "q.py", waits, str(steps)], cwd=tmp,
                       env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    return next((tmp / "store" / "runs").iterdir()), p.stderr


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_the_end_of_run_summary_opens_with_the_noise_caveat(tmp_path: Path) -> None:
    # steps cycling 10, 20 and 40 ms: a robust (MAD) step-time CV near 0.74 whatever the warm-up leaves, far above
    # the 15% threshold (two alternating values would give a MAD of 0 or of their gap, by the parity of the count)
    run_dir, err = _observed(tmp_path, "0.01,0.02,0.04", 30)
    q = measurement_quality(read_run(run_dir), warmup=RunAnalysis(read_run(run_dir)).summary.headline.warmup_steps)
    assert q.noisy and q.step_cv is not None
    summary = err[err.index("stepscope"):]
    flat = _flat(summary)
    assert _flat(q.headline()) in flat
    assert flat.index(_flat(q.headline())) < flat.index(f"run {run_dir.name}")  # first, before the header


def test_a_quiet_verdict_adds_no_line_and_a_noisy_one_does(tmp_path: Path) -> None:
    """Steady 10 ms steps: the summary has the caveat exactly when the stored run's verdict is noisy (a busy
    machine can make it so through its other processes)."""
    run_dir, err = _observed(tmp_path, "0.01", 30)
    ra = RunAnalysis(read_run(run_dir))
    assert ("these figures are noisy" in _flat(err)) == ra.quality.noisy


def test_the_notebook_overview_carries_the_caveat(tmp_path: Path) -> None:
    from stepscope.notebook.run import run_repr_html

    run_dir, _ = _observed(tmp_path, "0.01,0.02,0.04", 30)
    ra = RunAnalysis(read_run(run_dir))
    assert ra.quality.noisy
    assert html.escape(ra.quality.headline()) in run_repr_html(ra)


def _flops_caption(counted_step_ms: float) -> str:
    """The FLOPs table of a run of 20 steps of 10 ms (one of 14 ms) whose step 5 was FLOP-counted in
    ``counted_step_ms``."""
    ms = [10.0] * 20
    ms[12] = 14.0
    rank = rank_data(0, 1, ms)
    rec = {"kind": "flops", "step": 5, "flops": 2.0e9, "by_dtype": {"float32": 2.0e9},
           "step_wall_ns": int(counted_step_ms * 1e6)}
    rank = replace(rank, extra={"flops": [rec]})
    s = summarize_run(run_data([rank]))
    assert s.flops is not None
    out = Console(width=200, record=True, file=io.StringIO())
    out.print(flops_table(s.flops))
    return _flat(out.export_text())


def test_a_counting_cost_hidden_in_the_noise_is_not_resolved_never_zero() -> None:
    faster = _flops_caption(9.0)  # the counted step was faster than the median: its cost is not measurable
    assert "counting cost: not resolved" in faster and "+0" not in faster
    within = _flops_caption(12.0)  # slower than the median, within the ordinary steps' spread
    assert "counting cost: not resolved" in within
    clear = _flops_caption(40.0)  # 30 ms above the 10 ms median, far beyond every ordinary step
    assert "counting cost: +30.00 ms once, on step 5" in clear
