"""The run report's critical-path tables in headless Chromium at 1400 and 800 px, as a person sees them: the
v100 fixture's path under its timeline (length, time by kind, the names with most time on the path, every row
on screen and no cell wider than its table), and a two-rank set's wait line under "Ranks compared"; no console
error and no network request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stepscope.analyze.advisor import Advice
from stepscope.analyze.trace.analysis import analyze_trace
from stepscope.report.html import Section, render_page
from stepscope.report.html.gpu_sections import gpu_section
from stepscope.traces.kineto import read_trace
from tests.analyze.trace.test_critical_path import two_rank_set
from tests.integration.conftest import browser  # noqa: F401  (the shared headless Chromium fixture)
from tests.report.html.chromium import Viewer
from tests.traces.tracebuild import fixture_files

pytestmark = pytest.mark.browser

TABLE_JS = """(id) => {
  const t = document.getElementById(id);
  const box = t.getBoundingClientRect();
  const cells = [...t.querySelectorAll('td, th')];
  return {rows: t.querySelectorAll('tbody tr').length, width: box.width, visible: box.width > 0 && box.height > 0,
          wider: cells.filter(c => c.getBoundingClientRect().right > box.right + 1).map(c => c.textContent),
          text: t.innerText};
}"""


@pytest.mark.parametrize("width", [1400, 800])
def test_critical_path_tables_as_seen(browser: Any, tmp_path: Path, width: int) -> None:  # noqa: F811
    fixture = next(p for p in fixture_files() if p.parent.name == "v100_1rank")
    table = read_trace(fixture)
    advice = Advice(findings=(), checked=(), notes=())
    single = gpu_section({0: analyze_trace(table)}, [], advice, tables={0: table})
    two_rank_set(tmp_path)
    tables = {r: read_trace(tmp_path / str(r) / "rank.json") for r in (0, 1)}
    pair = gpu_section({r: analyze_trace(t) for r, t in tables.items()}, [], advice, tables=tables)
    out = tmp_path / "gpu.html"
    out.write_text(render_page("gpu", [Section("gpu", "GPU", single), Section("ranks", "Ranks", pair)]))
    viewer = Viewer(browser, width)
    page = viewer.open(out)
    page.locator("#cp-kinds-0").first.scroll_into_view_if_needed()
    kinds = page.evaluate(TABLE_JS, "cp-kinds-0")
    # v100's path: GPU compute 468.14 ms first (97.7%), then kernel gaps, memcpy/memset, CPU, launch delay
    assert kinds["visible"] and kinds["rows"] == 5 and kinds["wider"] == []
    assert kinds["text"].index("GPU compute") < kinds["text"].index("launch delay")
    assert "468.14 ms" in kinds["text"] and "97.7%" in kinds["text"]
    top = page.evaluate(TABLE_JS, "cp-top-0")
    assert top["visible"] and top["rows"] == 10 and top["wider"] == []
    assert "479.25 ms over 7,087 events" in page.locator("text=The longest chain").first.inner_text()
    cross = page.evaluate(TABLE_JS, "cp-cross-ranks")
    assert cross["visible"] and cross["rows"] == 1 and cross["wider"] == []
    assert "rank 0 waited 0.250 ms for rank 1 in allreduce #0" in cross["text"].replace("\u200b", "")
    assert viewer.errors == [] and viewer.requests == [] and viewer.refused == []
