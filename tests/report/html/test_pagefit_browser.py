"""pagefit's checks (tests/report/html/pagefit.py) on a page built to break them, in headless Chromium: a number
clipped by its table cell, a number running out of its tile and a tile squeezed to zero width are each reported
(the checks can fail); the same table and tile inside a block hidden with display:none (as a rank's tiles are
behind the rank selector) and a zero-size tile under a visibility:hidden box are not rendered, and not reported."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stepscope.report.html import Section, render_page
from tests.integration.conftest import browser  # noqa: F401  (the shared headless Chromium fixture)
from tests.report.html.chromium import Viewer
from tests.report.html.pagefit import PAGE_FIT_JS

pytestmark = pytest.mark.browser
CUT_CELL = ('<table id="{id}" style="table-layout:fixed;width:60px"><tbody><tr><td style="width:60px;'
            'overflow:hidden;white-space:nowrap">{n} ms</td></tr></tbody></table>')
WIDE_TILE = ('<div class="ss-tiles"><div class="ss-tile" style="width:70px;overflow:hidden"><div class="l">step</div>'
             '<div class="v" style="white-space:nowrap">{n} ms</div></div></div>')
ZERO_TILE = ('<div class="ss-tile" style="width:0;min-width:0;padding:0;border:0;overflow:hidden">'
             '<div class="v" style="white-space:nowrap">{n} ms</div></div>')
SHOWN = {"cell": "123,456.78", "tile": "987,654.32", "zero": "444,444.44"}
HIDDEN = {"cell": "111,111.11", "tile": "222,222.22", "zero": "333,333.33"}


def _page(path: Path) -> Path:
    body = (CUT_CELL.format(id="shown-cell", n=SHOWN["cell"]) + WIDE_TILE.format(n=SHOWN["tile"])
            + ZERO_TILE.format(n=SHOWN["zero"])
            + '<div hidden>' + CUT_CELL.format(id="hidden-cell", n=HIDDEN["cell"])
            + WIDE_TILE.format(n=HIDDEN["tile"]) + "</div>"
            + '<div style="visibility:hidden;width:0;height:0;overflow:hidden">' + ZERO_TILE.format(n=HIDDEN["zero"])
            + "</div>")
    path.write_text(render_page("pagefit control", [Section("s", "Numbers", body)]))
    return path


@pytest.mark.parametrize("width", [1400, 800])
def test_pagefit_reports_cut_numbers_and_skips_hidden_ones(browser: Any, tmp_path: Path,  # noqa: F811
                                                           width: int) -> None:
    viewer = Viewer(browser, width)
    page = viewer.open(_page(tmp_path / "control.html"))
    problems: list[str] = page.evaluate(PAGE_FIT_JS, width < 1000)
    assert any(SHOWN["cell"] in p and "cut by its cell" in p for p in problems), problems
    assert any(SHOWN["tile"] in p and "outside its tile" in p for p in problems), problems
    assert any(SHOWN["zero"] in p and "outside its tile" in p for p in problems), problems
    assert [p for p in problems if any(n in p for n in HIDDEN.values())] == []
    assert len(problems) == len([p for p in problems if any(n in p for n in SHOWN.values())])  # nothing else
    assert viewer.errors == []
