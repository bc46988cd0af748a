"""`stepscope show --traces` on a run profiled here: operators and module tree from our own trace."""

from __future__ import annotations

import json
import shutil

from tests.conftest import load


def test_show_traces_of_a_profiled_tiny_run(observed, cli, store):
    assert observed("tiny_train.py", "--steps", "14", opts=("--profile-steps", "3")).rc == 0
    doc = json.loads(cli("show", "latest", "--traces", "--json").out)
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
    text = cli("show", "latest", "--traces")
    assert text.rc == 0 and "Module tree" in text.out and "Linear_1" in text.out


def test_show_traces_without_a_window_or_with_a_deleted_trace(observed, cli, store):
    assert observed("tiny_train.py", "--steps", "3").rc == 0
    r = cli("show", "latest", "--traces")
    assert r.rc == 2 and "was not profiled" in r.err and "--profile-steps" in r.err
    assert observed("tiny_train.py", "--steps", "12", opts=("--profile-steps", "2")).rc == 0
    shutil.rmtree(store / "runs" / load(store).run.id / "artifacts" / "traces")
    r = cli("show", "latest", "--traces")
    assert r.rc == 2 and "missing" in r.err and "Traceback" not in r.err


def test_export_includes_the_trace_tables_of_a_profiled_run(observed, cli, store, tmp_path):
    import csv

    assert observed("tiny_train.py", "--steps", "12", opts=("--profile-steps", "2")).rc == 0
    out = tmp_path / "out"
    assert cli("export", "latest", "-o", str(out)).rc == 0
    with (out / "operators.csv").open() as fh:
        ops = {row["name"]: row for row in csv.DictReader(fh)}
    assert int(ops["aten::addmm"]["calls"]) == 2 * 2  # 2 profiled steps x 2 Linear layers
    with (out / "modules.csv").open() as fh:
        paths = {row["path"] for row in csv.DictReader(fh)}
    assert "Sequential_0/Linear_1" in paths
    assert (out / "kernels.csv").exists() and (out / "components.csv").exists()
