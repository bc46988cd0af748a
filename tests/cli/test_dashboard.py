"""`stepscope dashboard build`: one dashboard for every run name, the regressions page's rows, user mistakes
in one line. Stores are real (tests/report/dashboard/dashstore.py); pages are read as HTML here, and drawn in
Chromium by tests/integration/test_dashboard_browser.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from stepscope.cli import main
from tests.report.dashboard.dashstore import write_history


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    root = tmp_path_factory.mktemp("dash-cli") / "store"
    write_history(root, "aa", commits=10, repeats=3, seed=11)
    shas = write_history(root, "slow", commits=10, repeats=3, factor_from=5, factor=1.2, seed=12)
    return root, shas


def _embedded(html: str, element_id: str) -> dict:
    m = re.search(rf'<script type="application/json" id="{element_id}">(.*?)</script>', html)
    assert m, element_id
    return json.loads(m.group(1))


def test_every_run_name_gets_its_histories(store, tmp_path: Path, capsys) -> None:
    root, shas = store
    out = tmp_path / "site"
    assert main(["dashboard", "build", "--store", str(root), "-o", str(out), "--reports", "0"]) == 0
    printed = capsys.readouterr().out
    assert "60 runs, 2 run names" in printed
    for name in ("aa", "slow"):
        assert (out / "history" / f"step_time_median_s@{name}.html").is_file()
        assert (out / "history" / f"region.work.p50_s@{name}.html").is_file()
    # the runs list is one column table: 60 rows, names dictionary-encoded
    runs = _embedded((out / "index.html").read_text(), "ss-runs")
    assert runs["n"] == 60 and len(runs["cols"]["id"]) == 60 and sorted(runs["dict"]["name"]) == ["aa", "slow"]
    assert sorted(runs["cols"]["name"].count(i) for i in range(2)) == [30, 30]
    nav = _embedded((out / "index.html").read_text(), "ss-nav")
    assert {v["name"]: v["runs"] for v in nav["names"]} == {"aa": 30, "slow": 30}
    # a history's points: one per commit, the step marked at commit 5
    doc = _embedded((out / "history" / "step_time_median_s@slow.html").read_text(), "ss-history")
    assert doc["points"]["n"] == 10 and doc["points"]["cols"]["commit"] == shas
    assert [(s["first_bad"], s["kind"]) for s in doc["steps"]] == [(5, "regression")]
    assert doc["title"] == "step time (median) [s]" and doc["unit"] == "s"


def test_regressions_page_rows(store, tmp_path: Path) -> None:
    root, shas = store
    out = tmp_path / "site"
    assert main(["dashboard", "build", "--store", str(root), "-o", str(out), "--reports", "0"]) == 0
    html = (out / "regressions.html").read_text()
    table = html.split('id="ss-regressions"')[1].split("</table>")[0]
    rows = re.findall(r'<tr data-name="([^"]+)" data-metric="([^"]+)" data-commit="([^"]+)"', table)
    assert rows and {n for n, _, _ in rows} == {"slow"} and {c for _, _, c in rows} == {shas[5]}
    assert 'id="ss-improvements-empty"' in html
    # every listed step links the diff page the build wrote for the runs around it
    for href in re.findall(r'<a class="ss-diff" href="([^"]+)"', table):
        assert (out / href).is_file()
    # a threshold above the injected 20% lists nothing, and says so
    out2 = tmp_path / "site2"
    assert main(["dashboard", "build", "--store", str(root), "-o", str(out2), "--reports", "0",
                 "--max-regression", "30%"]) == 0
    assert 'id="ss-regressions-empty"' in (out2 / "regressions.html").read_text()


@pytest.mark.parametrize(("args", "message"), [
    (["--max-regression", "lots"], "--max-regression 'lots'"),
    (["--name", "nosuch"], "no runs named 'nosuch'"),
    (["--reports", "-1"], "--reports -1"),
])
def test_user_mistakes_are_one_line(store, tmp_path: Path, capsys, args: list[str], message: str) -> None:
    root, _ = store
    rc = main(["dashboard", "build", "--store", str(root), "-o", str(tmp_path / "site"), *args])
    err = capsys.readouterr().err
    assert rc != 0 and message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
