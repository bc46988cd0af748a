"""benchmarks/overhead.py ``target_verdict``: a cost is met only when its whole interval is at or under the target,
and nothing is judged when the method's A/A check misses 0 or too few processes give no interval."""

from __future__ import annotations

from typing import Any

from benchmarks.overhead import target_verdict


def test_target_verdicts_need_the_whole_interval_and_a_clean_a_a() -> None:
    clean = (-1.1, 1.0)
    assert target_verdict((2.6, 5.5), clean, 10.0) == "met"
    assert target_verdict((2.6, 10.0), clean, 10.0) == "met"  # at the target
    assert target_verdict((10.5, 28.2), clean, 10.0) == "NOT MET"
    assert target_verdict((5.6, 28.2), clean, 10.0).startswith("inconclusive: the interval spans the target")
    # a biased method judges nothing, whichever side the figure is on
    for figure in ((2.6, 5.5), (10.5, 28.2)):
        verdict = target_verdict(figure, (1.5, 13.7), 10.0)
        assert verdict.startswith("not judged: the A/A check gave +1.5 to +13.7 µs")
    # the range of fewer than 6 processes is no 95% interval: nothing judged
    few = target_verdict((2.6, 5.5), clean, 10.0, processes=2)
    assert few == "not judged: 2 processes (6 or more give a 95% interval)"


def test_the_realistic_step_prints_the_hooks_beside_the_a_a(capsys: Any) -> None:
    """Real children (one process, 6 rounds): a row per clock with the hooks' figure, the A/A beside it and the
    verdict; the hooks recorded every hooked step of the child (step_overhead.py's own check)."""
    import benchmarks.overhead as overhead

    overhead.print_realistic_step(6, 1)
    out = capsys.readouterr().out
    for clock in ("wall", "cpu"):
        row = next(line for line in out.splitlines() if line.startswith(clock))
        assert "<= 10 µs:" in row and ("met" in row or "MET" in row or "judged" in row or "inconclusive" in row)
