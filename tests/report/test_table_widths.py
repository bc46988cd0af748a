"""Every table of `show`, `diff`, `trace analyze`, `advise` and `bench` read as a person sees it, in a
pseudo-terminal (or rich Console) of 60, 80 and 120 columns: no line is wider than the terminal, and each
number the JSON output computes is printed whole (with its unit) on one line — never cut, never wrapped."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from stepscope.report import format as f
from stepscope.report.diff_terminal import pct, signed, value
from tests.conftest import PY, SCRIPTS, TRACES, built_once, load, stepscope_cmd
from tests.notebook.conftest import _observe_both
from tests.ptyterm import run_in_pty

WIDTHS = (60, 80, 120)
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return built_once(tmp_path_factory, "notebook", _observe_both) / "store"  # the notebook tests' two runs


def _json(*args: str) -> dict:  # type: ignore[type-arg]
    env = {k: v for k, v in os.environ.items() if k != "STEPSCOPE_DB"}
    proc = subprocess.run(stepscope_cmd(*args, "--json"), capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc: dict = json.loads(proc.stdout)  # type: ignore[type-arg]
    return doc


def _seen(args: list[str], cols: int) -> list[str]:
    rc, out = run_in_pty([sys.executable, "-m", "stepscope", *args], cols=cols)
    assert rc == 0, out
    lines = [ln.rstrip() for ln in out.splitlines()]
    too_wide = [ln for ln in lines if len(ln) > cols]
    assert not too_wide, (cols, too_wide)
    return lines


def _whole(expected: list[str], lines: list[str], cols: int) -> None:
    missing = [e for e in expected if not any(e in ln for ln in lines)]
    assert not missing, (cols, missing, "\n".join(lines))


def test_show_numbers_whole(store: Path) -> None:
    doc = _json("show", "prof", "--store", str(store))
    h = doc["headline"]
    want = [f.duration_ns(h["step_time_median_ns"]), f.duration_ns(h["step_time_p95_ns"]),
            f.rate(h["samples_per_s"], "samples"), f.share(h["data_wait_share"])]
    for cols in WIDTHS:
        _whole(want, _seen(["show", "prof", "--store", str(store)], cols), cols)


def test_show_traces_numbers_whole_and_each_table_once(store: Path, tmp_path: Path) -> None:
    """The run's window replaced by a real V100 trace (GPU kernels): each rank's component table once."""
    mine = tmp_path / "store"
    shutil.copytree(store, mine)
    run_id = load(mine, "prof").run.id
    shutil.copy(TRACES / "v100_1rank" / "rank0.json.gz", mine / "runs" / run_id / "artifacts" / "traces")
    doc = _json("show", "prof", "--store", str(mine), "--traces")
    comps = (doc.get("ranks") or [doc])[0]["kernels"]["by_component"]
    want = [f.duration_ns(c['sum_ns']) for c in comps]
    assert want
    for cols in WIDTHS:
        lines = _seen(["show", "prof", "--store", str(mine), "--traces"], cols)
        _whole(want, lines, cols)
        assert sum("GPU time by component" in ln for ln in lines) == 1, (cols, lines)


def test_diff_numbers_whole(store: Path) -> None:
    doc = _json("diff", "prof", "plain", "--store", str(store))
    want = []
    for r in doc["overview"]:
        num = (int, float)
        if r["unit"] != "text" and isinstance(r["baseline"], num) and isinstance(r["experiment"], num):
            want += [value(r["baseline"], r["unit"]), value(r["experiment"], r["unit"]), signed(r["delta"], r["unit"]),
                     pct(r["delta_pct"])]
    assert len(want) >= 12
    for cols in WIDTHS:
        _whole([w for w in want if w != f.DASH], _seen(["diff", "prof", "plain", "--store", str(store)], cols), cols)


def test_trace_analyze_numbers_whole() -> None:
    path = str(TRACES / "v100_1rank")
    doc = _json("trace", "analyze", path)
    ranks = doc.get("ranks") or [doc]
    comps = ranks[0]["kernels"]["by_component"]
    want = [f.duration_ns(c['sum_ns']) for c in comps] + [f"{c['count']:,}" for c in comps]
    for cols in WIDTHS:
        lines = _seen(["trace", "analyze", path], cols)
        _whole(want, lines, cols)
        block = lines[next(i for i, ln in enumerate(lines) if ln.startswith("GPU time by component")):]
        names = [c["key"] for c in comps]
        assert any(n in " ".join(block) for n in names)


def test_advise_numbers_whole(store: Path) -> None:
    doc = _json("advise", "prof", "--store", str(store))
    want = [f"{x['saving_s_per_step'] * 1e3:.3g} ms" for x in doc["findings"] if x["saving_s_per_step"] is not None]
    assert want
    for cols in WIDTHS:
        _whole(want, _seen(["advise", "prof", "--store", str(store)], cols), cols)


def test_bench_table_numbers_whole(tmp_path: Path) -> None:
    from stepscope.analyze.runs.history import pooled, tracked_metrics
    from stepscope.cli.historydata import load_points
    from stepscope.report.history import bench_table
    from stepscope.report.history import value as metric_value
    from stepscope.store import open_store

    store = tmp_path / "store"
    env = {k: v for k, v in os.environ.items() if k != "STEPSCOPE_DB"}
    proc = subprocess.run(stepscope_cmd("bench", "--store", str(store), "--repeat", "2", "--json", "--", PY,
                                        str(SCRIPTS / "tiny_train.py"), "--steps", "6"),
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    st = open_store(store)
    try:
        points = [p for p in load_points(st) if p.run_id in doc["runs"]]
    finally:
        st.close()
    rows = [(m, p) for m in tracked_metrics(points) if (p := pooled(points, m, key=doc["group"])) is not None]
    want = [metric_value(m, p.median) for m, p in rows] + [metric_value(m, p.ci_high) for m, p in rows]
    for cols in WIDTHS:
        console = Console(width=cols, record=True, highlight=False)
        console.print(bench_table(doc["group"], rows))
        lines = [ln.rstrip() for ln in console.export_text().splitlines()]
        assert all(len(ln) <= cols for ln in lines), (cols, lines)
        _whole(want, lines, cols)


def test_trace_kernels_names_unique_when_shortened_and_whole_with_wide() -> None:
    path = str(TRACES / "v100_1rank")
    doc = _json("trace", "kernels", path, "--by", "kernel", "--top", "12")
    rows = next(iter(doc.values()))
    names = [r["key"] for r in rows]
    assert any(len(n) > 60 for n in names)
    lines = _seen(["trace", "kernels", path, "--by", "kernel", "--top", "12"], 80)
    body = [ln for ln in lines if ln.startswith("│")]
    shown = [ln.strip("│").split("│")[0].strip() for ln in body]
    assert len(shown) == len(names) and len(set(shown)) == len(set(names))  # shortened, still told apart
    _whole([f.duration_ns(r["sum_ns"]) for r in rows], lines, 80)
    wide = "".join(ln.strip("│").split("│")[0].strip() for ln in _seen(
        ["trace", "kernels", path, "--by", "kernel", "--top", "12", "--wide"], 80) if ln.startswith("│"))
    for n in names:
        assert n.replace(" ", "") in wide.replace(" ", ""), n  # each name whole, folded over lines
