"""The launch-queue, bandwidth and memory charts of the run report's GPU section in headless Chromium at 1400 and
800 px, as a person sees them: every chart drawn with its steps, round ticks, no text over other text, the
tables present, no console error and no network request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stepscope.analyze.trace.analysis import analyze_trace
from stepscope.report.html import Section, render_page
from stepscope.report.html.gpu_sections import rank_html
from stepscope.traces.kineto import read_trace
from tests.analyze.trace.test_counters_handbuilt import memory_trace
from tests.integration.conftest import browser  # noqa: F401  (the shared headless Chromium fixture)
from tests.report.html.chromium import OVERLAPS_JS, TICKS_JS, Viewer, round_ticks_problems
from tests.traces.tracebuild import PROFILER_SPAN, fixture_files, write

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("width", [1400, 800])
def test_queue_bandwidth_memory_charts_drawn(browser: Any, tmp_path: Path, width: int) -> None:  # noqa: F811
    v100 = analyze_trace(read_trace(next(p for p in fixture_files() if p.parent.name == "v100_1rank")))
    mem = analyze_trace(read_trace(write(tmp_path / "rank1.json", [PROFILER_SPAN, *memory_trace()]), rank=1))
    out = tmp_path / "gpu.html"
    out.write_text(render_page("gpu", [Section("gpu", "GPU", rank_html(v100) + rank_html(mem))]))
    viewer = Viewer(browser, width)
    page = viewer.open(out)
    charts = ["queue-r0", "bandwidth-r0", "memory-r1-cpu"]
    for chart in charts:
        page.locator(f"#{chart}").scroll_into_view_if_needed()
        assert page.evaluate(f"() => !!window.stepscope.charts['{chart}']"), chart
        assert page.locator(f"#{chart} canvas").count() >= 1
    # the queue's peak is in the drawn data (1,022 pending launches on stream 7)
    ymax = page.evaluate("() => Math.max(...window.stepscope.charts['queue-r0'].data[1].filter(v => v != null))")
    assert ymax == 1022
    ticks = page.evaluate(TICKS_JS)
    mine = [t for t in ticks if t["id"] in charts]
    assert len(mine) == 3 and round_ticks_problems(mine) == []
    titles = {t["id"]: t["ytitle"] for t in mine}
    assert titles["queue-r0"].startswith("pending launches") and "GB/s" in titles["bandwidth-r0"]
    assert [p for p in page.evaluate(OVERLAPS_JS) if p.split(":")[0] in charts] == []
    for table_id in ("queue-table-r0", "bandwidth-table-r0", "sequences-r0", "annotations-r0", "memory-live-r1-cpu"):
        assert page.locator(f"#{table_id}").count() == 1, table_id
    assert viewer.errors == [] and viewer.requests == [] and viewer.refused == []
