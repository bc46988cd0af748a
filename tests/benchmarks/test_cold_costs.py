"""benchmarks/hook_costs.py table 4 (cold caches): every row in every cache state, from real calls of the hooks
as installed, and the summary lines computed from those rows (timings are not asserted: they move with load)."""

from __future__ import annotations

import math
import re

import pytest
from benchmarks.hook_costs import COLD_FLOORS, COLD_STATE, MODE_READS, cold_hook_costs, print_cold_hook_costs


def test_cold_rows_and_the_training_flag_line_come_from_the_calls(capsys: pytest.CaptureFixture[str]) -> None:
    costs = cold_hook_costs(n=3)
    rows = {*COLD_FLOORS, "data loader", "forward", "backward", "optimizer + step mark", "one step of hooks",
            *MODE_READS}
    assert list(costs) == ["warm", COLD_STATE, "after a 64 MiB write"]
    for state in costs.values():
        assert set(state) == rows and all(math.isfinite(v) for v in state.values())
    print_cold_hook_costs(costs)
    out = capsys.readouterr().out
    cold = costs[COLD_STATE]
    floor = cold[COLD_FLOORS[1]]
    above = re.search(r"above a cold C call: (.*?); the four", out, re.S)
    assert above is not None
    assert above[1] == ", ".join(f"{k} {cold[k] - floor:+.2f}" for k in
                                 ("data loader", "forward", "backward", "optimizer + step mark"))
    alone = cold[MODE_READS[0]] - cold[COLD_FLOORS[0]]
    after = cold[MODE_READS[2]] - cold[MODE_READS[1]]
    assert f"{alone:+.2f} µs read alone" in out and f"{after:+.2f}\n  right after the model's call slot" in out
