"""benchmarks/hook_costs.py's attribution arms: which parts each installs, and the one-line refusals."""

from __future__ import annotations

import pytest
from benchmarks.hook_costs import STEP_HOOKS, _arm_spec


def test_arms_name_the_parts_left_out() -> None:
    assert STEP_HOOKS == ("loader", "forward", "backward", "optimizer")
    assert _arm_spec("bare") is None
    assert _arm_spec("all") == ()
    assert _arm_spec("-forward-loader") == ("forward", "loader")
    assert _arm_spec("+optimizer") == ("loader", "forward", "backward")  # that part alone
    assert _arm_spec("+forward+backward") == ("loader", "optimizer")


@pytest.mark.parametrize("arm", ["+sampler", "-", "+", "forward", "all:c", "-optimizer+loader"])
def test_unknown_arms_are_refused_in_one_line(arm: str) -> None:
    with pytest.raises(SystemExit) as e:
        _arm_spec(arm)
    assert "\n" not in str(e.value) and arm in str(e.value)


def test_a_process_figure_is_its_median_paired_difference() -> None:
    """--processes: each child's figure per arm is the median over rounds of (arm - bare), paired by round."""
    from benchmarks.hook_costs import process_figures

    mean = {"bare": [300.0, 310.0, 290.0, 305.0, 295.0],
            "all": [309.0, 322.0, 297.0, 313.0, 340.0],  # +9 +12 +7 +8 +45
            "-loader": [301.0, 309.0, 293.0, 306.0, 296.0]}  # +1 -1 +3 +1 +1
    med = {arm: [v - 50.0 for v in vs] for arm, vs in mean.items()}  # block medians: not what the figure reads
    med["all"][0] += 100.0
    res = {"loader48": {"mean": mean, "med": med}}
    assert process_figures(res) == {"loader48": {"all": 9.0, "-loader": 1.0}}
