"""`bench --ab` must not call A/A studies faster or slower more than 1 time in 100, at any noise: simulated
interleaved studies (benchmarks/ab_coverage.py: bench's pair order, the real paired verdict) at the settings bench
decides with. A 95% interval called 1 A/A study in 20 once the per-pair spread dwarfed the threshold (a busy host's
wall clock: x0.796 under two CPU hogs)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

from stepscope.analyze.diff.significance import DiffSettings
from stepscope.cli.bench import BenchCommand, ab_settings
from stepscope.errors import UserError

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from ab_coverage import count

TRIALS = 500
MAX_FALSE = 8
"""Of 500 A/A studies: 1% is 5; 8 leaves room for chance (a 5% rule gives 25-30)."""


def bench_args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    BenchCommand().add_arguments(p)
    return p.parse_args([*argv, "--ab", "--", "a", "--", "b"])


@pytest.mark.parametrize("setting", ["gauss20", "hog", "t2"])
def test_bench_ab_calls_at_most_one_aa_study_in_100(setting: str) -> None:
    s = ab_settings(bench_args(), "step_time")
    c = count(setting, 5, s.confidence, TRIALS, s.threshold, seed=7)
    assert c.aa_false <= MAX_FALSE, c


def test_the_simulation_sees_a_95_percent_rule_cry_wolf() -> None:
    """The control: the same studies at 95% (bench's old level) exceed the bound, so the test above can fail."""
    c = count("gauss20", 5, DiffSettings().confidence, TRIALS, 0.02, seed=7)
    assert c.aa_false > MAX_FALSE, c


def test_a_ten_percent_cpu_change_is_found_with_five_pairs() -> None:
    """A CPU clock's per-run spread under two hogs is about 1-2% (benchmarks/RESULTS.md): at 2%, 5 pairs find a
    +10% change in at least 9 studies of 10."""
    s = ab_settings(bench_args("--metric", "step_cpu_time"), "step_cpu_time")
    c = count("gauss2", 5, s.confidence, 200, s.threshold, seed=3)
    assert c.found >= 180, c


def test_confidence_option() -> None:
    assert ab_settings(bench_args("--confidence", "0.9"), "step_time").confidence == 0.9
    with pytest.raises(UserError, match=r"--confidence 1\.5"):
        BenchCommand().run(bench_args("--confidence", "1.5"))
