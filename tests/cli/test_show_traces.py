"""`stepscope show --traces` on a run profiled here: operators and module tree from our own trace."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import built_once, load, record_tiny


def _record(folder: Path) -> None:
    for name, steps, opts in (("plain", 3, ()), ("profiled", 14, ("--profile-steps", "3"))):
        record_tiny(folder, steps, "--name", name, *opts)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One store with two real runs of tiny_train.py, recorded once per test session (built_once, also when
    xdist splits the module): `plain` (3 steps, no profiler window) and `profiled` (14 steps, a window of 3
    steps). Each test works on its own copy (`runs`)."""
    return built_once(tmp_path_factory, "show_traces", _record) / "store"


@pytest.fixture
def runs(recorded: Path, store: Path) -> Path:
    """The test's own copy of the recorded store, where `cli` runs."""
    shutil.copytree(recorded, store)
    return store


def test_show_traces_of_a_profiled_tiny_run(runs, cli):
    doc = json.loads(cli("show", "profiled", "--traces", "--json").out)
    (rank,) = doc["ranks"]
    ops = {o["name"]: o for o in rank["operators"]}
    # 3 profiled steps x 2 Linear layers, each one aten::linear -> aten::addmm in forward
    assert ops["aten::linear"]["calls"] == 6 and ops["aten::addmm"]["calls"] == 6
    # the SGD step runs once per step
    modules = {tuple(m["path"]): m for m in rank["modules"]}
    assert modules[("Sequential_0",)]["calls"] == 3
    assert {("Sequential_0", "Linear_0"), ("Sequential_0", "ReLU_0"), ("Sequential_0", "Linear_1")} <= set(modules)
    child_cpu = sum(m["cpu_ns"] for p, m in modules.items() if len(p) == 2 and p[0] == "Sequential_0")
    assert child_cpu <= modules[("Sequential_0",)]["cpu_ns"]
    assert rank["steps"]["count"] == 3
    text = cli("show", "profiled", "--traces")
    assert text.rc == 0 and "Module tree" in text.out and "Linear_1" in text.out


def test_show_traces_without_a_window_or_with_a_deleted_trace(runs, cli):
    r = cli("show", "plain", "--traces")
    assert r.rc == 2 and "was not profiled" in r.err and "--profile-steps" in r.err
    shutil.rmtree(runs / "runs" / load(runs, "profiled").run.id / "artifacts" / "traces")
    r = cli("show", "profiled", "--traces")
    assert r.rc == 2 and "missing" in r.err and "Traceback" not in r.err


def test_export_includes_the_trace_tables_of_a_profiled_run(runs, cli, tmp_path):
    out = tmp_path / "out"
    assert cli("export", "profiled", "-o", str(out)).rc == 0
    with (out / "operators.csv").open() as fh:
        ops = {row["name"]: row for row in csv.DictReader(fh)}
    assert int(ops["aten::addmm"]["calls"]) == 3 * 2  # 3 profiled steps x 2 Linear layers
    with (out / "modules.csv").open() as fh:
        paths = {row["path"] for row in csv.DictReader(fh)}
    assert "Sequential_0/Linear_1" in paths
    assert (out / "kernels.csv").exists() and (out / "components.csv").exists()
