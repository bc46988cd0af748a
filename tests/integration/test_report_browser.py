"""The HTML run report in a real headless Chromium, opened from file://: no console errors, no network
request, every section present, every plot drawn, hostile names shown as text. Screenshots go to
test-artifacts/ (gitignored)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stepscope.cli import main
from tests.conftest import HOSTILE, ROOT
from tests.integration.conftest import OfflinePage

pytestmark = pytest.mark.browser
SECTIONS = ("overview", "speed", "time", "system", "memory", "kernels", "model", "metrics")


def test_report_in_chromium(browser, profiled_store: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "report.html"
    assert main(["report", "--store", str(profiled_store), "-o", str(out)]) == 0
    watched = OfflinePage(browser)
    page, errors, requests = watched.page, watched.errors, watched.requests
    page.goto(out.as_uri())
    page.wait_for_load_state("load")
    assert errors == [] and requests == []
    for s in SECTIONS:
        assert page.locator(f"section#{s} > h2").is_visible()
    figures = page.locator("figure.ss-plot")
    n = figures.count()
    assert n >= 6
    assert page.locator("figure.ss-plot[data-drawn='1']").count() == n  # every plot drawn
    assert page.locator("#plot-step-time canvas").count() == 1
    assert page.evaluate("window.stepscope.charts['plot-phases'].series.length") >= 4  # x + 3 phases or more
    assert HOSTILE in page.locator("header h1").inner_text()  # shown as text, never run
    assert page.evaluate("document.querySelectorAll('script:not([type])').length") == 1
    # sorting: click 'total' of the regions table twice -> descending then ascending
    header = page.locator("#regions th", has_text="total")
    header.click()
    assert header.get_attribute("aria-sort") == "descending"
    # tooltip on hover
    svg = page.locator("#plot-step-time .u-over")
    svg.scroll_into_view_if_needed()
    box = svg.bounding_box()
    assert box is not None
    svg.hover(position={"x": box["width"] * 0.6, "y": box["height"] * 0.4})
    assert page.locator("#ss-tip").is_visible() and "step" in page.locator("#ss-tip").inner_text()
    shots = ROOT / "test-artifacts"
    shots.mkdir(exist_ok=True)
    page.screenshot(path=str(shots / "report_full.png"), full_page=True)
    assert errors == [] and requests == []
