"""benchmarks/hook_costs.py's attribution arms: which parts each installs, and the one-line refusals."""

from __future__ import annotations

import pytest
from benchmarks.hook_costs import STEP_HOOKS, _arm_spec


def test_arms_name_the_parts_left_out() -> None:
    assert STEP_HOOKS == ("loader", "forward", "backward", "optimizer")
    assert _arm_spec("bare") == (None, None, ())
    assert _arm_spec("all:c") == ((), "c", ())
    assert _arm_spec("-forward-loader") == (("forward", "loader"), None, ())
    assert _arm_spec("+optimizer") == (("loader", "forward", "backward"), None, ())  # that part alone
    assert _arm_spec("+forward+backward:py") == (("loader", "optimizer"), "py", ())
    assert _arm_spec("all:c^loader") == ((), "c", ("loader",))


@pytest.mark.parametrize("arm", ["+sampler", "-", "+", "forward", "all:rust", "-optimizer+loader"])
def test_unknown_arms_are_refused_in_one_line(arm: str) -> None:
    with pytest.raises(SystemExit) as e:
        _arm_spec(arm)
    assert "\n" not in str(e.value) and arm in str(e.value)
