"""`stepscope scaling` over runs written into a real store: JSON, terminal, HTML, and the bad inputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stepscope.cli import main
from tests.analyze.distdata import rank_data, run_data, write_run


def _study(store: Path, sizes_ms: list[tuple[int, float]], *, script: str = "train.py",
           tag: str = "study=w") -> list[str]:
    ids = []
    for world, ms in sizes_ms:
        ranks = [rank_data(r, world, [ms] * 10, comm_ms=[ms / 5] * 10) for r in range(world)]
        k, v = tag.split("=")
        ids.append(write_run(store, run_data(ranks, command=("torchrun", script), tags={k: v})))
    return ids


def test_scaling_json_terminal_and_html(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    _study(store, [(1, 100.0), (2, 100.0), (4, 125.0)])
    assert main(["scaling", "--store", str(store), "--tag", "study=w", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "stepscope.scaling/1" and doc["mode"] == "weak"
    rows = doc["tables"][0]["rows"]
    assert [r["world_size"] for r in rows] == [1, 2, 4]
    assert [round(r["total_efficiency"], 3) for r in rows] == [1.0, 1.0, 0.8]
    html = tmp_path / "s.html"
    assert main(["scaling", "--store", str(store), "--tag", "study=w", "--html", str(html), "--width", "200"]) == 0
    out = capsys.readouterr().out
    assert "weak scaling" in out and "0.80" in out
    page = html.read_text()
    assert page.count('data-kind="xy"') == 2 and "total ideal" in page and '"log":2' in page  # log x: ranks
    assert "<script src" not in page and "<link" not in page  # offline: nothing loaded from elsewhere


def test_listed_runs_and_different_scripts_warned(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    a, = _study(store, [(1, 100.0)])
    b, = _study(store, [(2, 100.0)], script="other.py")
    assert main(["scaling", "--store", str(store), a, b, "--json"]) == 0
    err = capsys.readouterr().err
    assert "different scripts" in err and f"other.py: {b}" in err and f"train.py: {a}" in err


def test_bad_inputs_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    _study(store, [(2, 100.0), (2, 110.0)])
    assert main(["scaling", "--store", str(store), "--tag", "study=w"]) == 2
    err = capsys.readouterr().err.strip()
    assert "single world size (2)" in err and "\n" not in err
    assert main(["scaling", "--store", str(store), "--tag", "study=w", "--target", "loss"]) == 2
    assert "--target 'loss'" in capsys.readouterr().err
    assert main(["scaling", "--store", str(store), "--tag", "study=w", "--target", "lss=0.5"]) == 2
    err = capsys.readouterr().err.strip()
    assert "no selected run logged a metric 'lss'" in err and "\n" not in err
    assert main(["scaling", "--store", str(store)]) == 2
    assert "no runs given" in capsys.readouterr().err
    assert main(["scaling", "--store", str(store), "--tag", "study=nope"]) == 2
    assert "no run matches --tag study=nope" in capsys.readouterr().err
