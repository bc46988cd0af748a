"""Settings applied without editing the code (STEPSCOPE_OVERRIDES, collect/torch/overrides.py), on real runs of
tests/scripts/verify_loader.py: a DataLoader built with num_workers=0 gets 2 worker processes (the script counts
the processes that ran __getitem__), the override is recorded in the run; a value torch refuses is noted and the
program runs as written; an override with no DataLoader to apply to is noted."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from stepscope.analyze.advisor.changes import OVERRIDES_ENV, Change, apply_changes
from stepscope.collect.core.options import ENV_OVERRIDES
from tests.conftest import Result, load


def _env(*changes: Change) -> dict[str, str]:
    env, _ = apply_changes(changes, {}, [])
    return env


def test_one_variable_name_for_both_sides() -> None:
    assert OVERRIDES_ENV == ENV_OVERRIDES


def test_num_workers_override_spawns_workers_and_is_recorded(observed: Callable[..., Result],
                                                             cli: Callable[..., Result], store: Path,
                                                             tmp_path: Path) -> None:
    out = tmp_path / "seen.json"
    r = observed("verify_loader.py", "--steps", "8", "--sleep", "0.001", "--out", str(out),
                 env=_env(Change("loader", "num_workers", 2, "DataLoader num_workers=2")))
    assert r.rc == 0, r
    seen = json.loads(out.read_text())
    assert seen["num_workers"] == 2
    workers = set(seen["item_pids"]) - {seen["main_pid"]}
    assert len(workers) == 2 and seen["main_pid"] not in seen["item_pids"], seen
    rec = load(store).ranks[0].extra["override"]
    assert rec == [{"kind": "override", "target": "loader", "key": "num_workers", "value": 2, "applied": 1,
                    "was": [0], "refused": None}]
    shown = cli("show", "latest", "--width", "250")  # the user sees that the run did not run as coded
    assert "override applied by stepscope" in shown.out and "num_workers=2" in shown.out, shown.out
    assert "(the code's: 0)" in shown.out


def test_without_overrides_the_loader_is_as_written(observed: Callable[..., Result], store: Path,
                                                    tmp_path: Path) -> None:
    out = tmp_path / "seen.json"
    r = observed("verify_loader.py", "--steps", "4", "--sleep", "0.001", "--out", str(out))
    assert r.rc == 0, r
    seen = json.loads(out.read_text())
    assert seen["num_workers"] == 0 and seen["item_pids"] == [seen["main_pid"]]
    assert "override" not in load(store).ranks[0].extra


def test_refused_values_are_noted_and_the_program_runs_as_written(observed: Callable[..., Result], store: Path,
                                                                  tmp_path: Path) -> None:
    out = tmp_path / "seen.json"
    # num_workers=-1: torch's DataLoader raises ValueError; inter-op threads 0: torch raises RuntimeError
    env = {ENV_OVERRIDES: json.dumps({"loader": {"num_workers": -1}, "threads": {"intra": 1, "inter": 0}})}
    r = observed("verify_loader.py", "--steps", "4", "--sleep", "0.001", "--out", str(out), env=env)
    assert r.rc == 0, r
    assert "Traceback" not in r.err
    seen = json.loads(out.read_text())
    assert seen["num_workers"] == 0 and seen["item_pids"] == [seen["main_pid"]]
    rank = load(store).ranks[0]
    by_key = {(o["target"], o["key"]): o for o in rank.extra["override"]}
    assert by_key["loader", "num_workers"]["applied"] == 0
    assert "num_workers option should be non-negative" in by_key["loader", "num_workers"]["refused"]
    assert by_key["threads", "inter"]["applied"] == 0 and by_key["threads", "inter"]["refused"]
    assert by_key["threads", "intra"]["applied"] == 1 and by_key["threads", "intra"]["refused"] is None
    assert any("override not applied" in n and "num_workers=-1" in n for n in rank.notes), rank.notes


def test_no_dataloader_to_apply_to_is_noted(observed: Callable[..., Result], store: Path) -> None:
    r = observed("no_loader.py", env=_env(Change("loader", "num_workers", 2, "DataLoader num_workers=2")))
    assert r.rc == 0, r
    assert r.out.strip().endswith("trained without a loader")
    (rec,) = load(store).ranks[0].extra["override"]
    assert rec["applied"] == 0 and rec["refused"] == "no DataLoader was constructed"
