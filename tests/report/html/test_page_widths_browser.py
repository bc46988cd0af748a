"""Pages that never cut an id or a number (issue 43), in headless Chromium at 1400 and 800 px: the report of a
real profiled run with the v100 fixture GPU trace imported (kernel bars and tables), the diff page of two real
runs (operators, components, kernels), the diff page of two runs of one commit (the INCONCLUSIVE tile) and the
dashboard's runs list of a store holding real runs and a history.

The rule, in tests/report/html/pagefit.py: numbers with their units, run ids, commits and status words are on
one line, never cut; no word of letters is broken over lines; at 1400 px every such cell and every delta
header is visible without scrolling; at 800 px a table wider than its card scrolls sideways inside it with each
row's name held in view, and the page never scrolls sideways; tile texts lie inside their tiles; bar labels are
shortened once, in Python (unique, the full name on hover), and CSS cuts none of them."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stepscope.cli import main
from stepscope.store import open_store
from tests.conftest import TRACES
from tests.integration.conftest import browser  # noqa: F401  (the shared headless Chromium fixture)
from tests.report.dashboard.dashstore import write_history
from tests.report.html.chromium import Viewer
from tests.report.html.pagefit import PAGE_FIT_JS

pytestmark = pytest.mark.browser
WIDTHS = (1400, 800)


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory, profiled_store: Path,
          profiled_pair_store: Path) -> Iterator[dict[str, Path]]:
    tmp = tmp_path_factory.mktemp("widths")
    out = {"gpu": tmp / "gpu.html", "diff": tmp / "diff.html", "aa": tmp / "aa.html"}
    gpu_store = tmp / "gpu-store"
    shutil.copytree(profiled_store, gpu_store)
    assert main(["import", "--store", str(gpu_store), "--force", "--accept-misfit", "latest",
                 str(TRACES / "v100_1rank" / "rank0.json.gz")]) == 0
    assert main(["report", "--store", str(gpu_store), "-o", str(out["gpu"])]) == 0
    assert main(["diff", "latest~1", "latest", "--store", str(profiled_pair_store), "--html", str(out["diff"])]) == 0
    # the dashboard of the two real runs (tagged, named like an attack) and a history of eight commits
    dash = tmp / "dash"
    shutil.copytree(profiled_pair_store, dash)
    write_history(dash, "step20", commits=8, repeats=3, work_ms=25.0, factor_from=4, factor=1.2, seed=2)
    assert main(["dashboard", "build", "--store", str(dash), "-o", str(tmp / "site"), "--reports", "0"]) == 0
    out["runs"] = tmp / "site" / "index.html"
    st = open_store(dash)
    try:
        same = [r.id for r in st.index.runs("name = ?", ["step20"])][:2]  # two runs of the newest commit
    finally:
        st.close()
    assert main(["diff", same[0], same[1], "--store", str(dash), "--html", str(out["aa"])]) == 0
    assert "INCONCLUSIVE" in out["aa"].read_text()
    yield out


@pytest.mark.parametrize("name", ["runs", "diff", "aa", "gpu"])
def test_page_keeps_ids_numbers_and_words_whole(browser: Any, pages: dict[str, Path], name: str) -> None:  # noqa: F811
    for width in WIDTHS:
        viewer = Viewer(browser, width)
        page = viewer.open(pages[name])
        page.wait_for_timeout(200)  # the runs list and the charts draw on load
        assert page.locator("table").count() > 0
        problems = page.evaluate(PAGE_FIT_JS, width < 1000)
        assert problems == [], (name, width, len(problems), problems[:20])
        if name == "gpu":  # kernel bars: drawn, labels as Python shortened them, each its full name on hover
            rows = page.locator("#plot-kernels-r0 .ss-bar-row")
            assert rows.count() >= 5
            labels = page.locator("#plot-kernels-r0 .ss-bar-name").all_inner_texts()
            assert len(set(labels)) == len(labels)
            assert all(rows.nth(i).get_attribute("title") for i in range(rows.count()))
        assert viewer.errors == [] and viewer.requests == [] and viewer.refused == []
        viewer.page.close()
