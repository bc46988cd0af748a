"""The local executor: jobs in order, errors per job, a dead worker process retried once then named."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stepscope.executor.local import LOST, LocalExecutor


def square(x: int) -> int:
    return x * x


def fail_on_three(x: int) -> int:
    if x == 3:
        raise ValueError("three is bad\nsecond line")
    return x


def die_first_time(job: tuple[str, int]) -> int:
    marker, x = job
    if x == 2 and not Path(marker).exists():
        Path(marker).touch()
        os._exit(1)  # the worker process dies, as under the OOM killer
    return x


def die_always(x: int) -> int:
    if x == 1:
        os._exit(1)
    return x


@pytest.mark.parametrize("workers", [1, 2])
def test_values_in_job_order_and_one_line_errors(workers: int) -> None:
    done: list[int] = []
    out = LocalExecutor(workers).map(fail_on_three, list(range(6)), on_done=lambda: done.append(1))
    assert [o.value for o in out] == [0, 1, 2, None, 4, 5]
    assert out[3].error == "ValueError: three is bad"
    assert len(done) == 6
    assert LocalExecutor(workers).map(square, [3]) [0].value == 9


def test_a_dead_worker_is_retried_in_a_fresh_pool(tmp_path: Path) -> None:
    marker = str(tmp_path / "died")
    out = LocalExecutor(2).map(die_first_time, [(marker, i) for i in range(5)])
    assert Path(marker).exists()  # it did die once
    assert [o.value for o in out] == [0, 1, 2, 3, 4] and all(o.error is None for o in out)


def test_a_job_that_always_kills_its_worker_is_named_lost() -> None:
    out = LocalExecutor(2).map(die_always, [0, 1, 2])
    assert out[1].value is None and out[1].error == LOST
    assert {o.value for i, o in enumerate(out) if i != 1 and o.error is None} <= {0, 2}
    assert all(o.value is not None or o.error is not None for o in out)  # nothing silently missing
