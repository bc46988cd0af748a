"""Change / apply_changes: the child's environment and command line a list of changes gives."""

from __future__ import annotations

import json

import pytest

from stepscope.analyze.advisor.changes import OVERRIDES_ENV, Change, apply_changes


def test_env_loader_threads_and_param_changes() -> None:
    env, argv = apply_changes(
        [Change("env", "OMP_NUM_THREADS", 2, "OMP_NUM_THREADS=2"),
         Change("loader", "num_workers", 4, "DataLoader num_workers=4"),
         Change("loader", "pin_memory", True, "pin_memory=True"),
         Change("threads", "intra", 2, "torch.set_num_threads(2)"),
         Change("param", "batch_size", 64, "batch_size=64")],
        {"PATH": "/bin", OVERRIDES_ENV: json.dumps({"threads": {"inter": 1}})},
        ["python", "train.py", "--batch-size", "32", "--lr=0.1"])
    assert env["PATH"] == "/bin" and env["OMP_NUM_THREADS"] == "2"
    assert json.loads(env[OVERRIDES_ENV]) == {"loader": {"num_workers": 4, "pin_memory": True},
                                             "threads": {"inter": 1, "intra": 2}}
    assert argv == ["python", "train.py", "--batch-size", "64", "--lr=0.1"]


def test_param_fills_a_placeholder_or_an_equals_option() -> None:
    c = Change("param", "bs", 8, "bs=8")
    assert apply_changes([c], {}, ["python", "t.py", "--bs={bs}"])[1] == ["python", "t.py", "--bs=8"]
    assert apply_changes([c], {}, ["python", "t.py", "--bs=4"])[1] == ["python", "t.py", "--bs=8"]
    with pytest.raises(ValueError, match="no \\{bs\\} placeholder"):
        apply_changes([c], {}, ["python", "t.py"])


def test_no_changes_leave_env_and_argv_alone() -> None:
    env, argv = apply_changes([], {"A": "1"}, ["python", "t.py"])
    assert env == {"A": "1"} and argv == ["python", "t.py"]


@pytest.mark.parametrize("kind,key,value", [("env", "LD_PRELOAD", "x"), ("loader", "batch_size", 4),
                                            ("threads", "intra", 0), ("threads", "other", 1)])
def test_unknown_or_bad_changes_are_refused(kind: str, key: str, value: int | str) -> None:
    with pytest.raises(ValueError):
        Change(kind, key, value, "x")  # type: ignore[arg-type]
