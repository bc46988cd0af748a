"""The run report and the diff page of real runs, looked at in headless Chromium at 1400 and 800 px:
screenshots kept ($STEPSCOPE_SCREENSHOTS), every section present, every chart drawn, no text box over
another, round ticks, drag-to-zoom and its reset, verdict badges of their own, continuous overlays, name
cells shortened with the full name on hover, no console error and no network request."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from stepscope.cli import main
from stepscope.report.html import Section, render_page
from stepscope.report.html.charts import Axis, Series, xy_chart
from tests.integration.conftest import browser  # noqa: F401  (the shared headless Chromium fixture)
from tests.report.html.chromium import OVERLAPS_JS, TICKS_JS, Viewer, round_ticks_problems, screenshots_dir

pytestmark = pytest.mark.browser
WIDTHS = (1400, 800)
REPORT_SECTIONS = ("overview", "speed", "time", "system", "memory", "kernels", "model", "metrics")
DIFF_SECTIONS = ("verdict", "overview", "trends", "phases", "components", "operators", "metrics")


def _scale(page: Any, chart: str) -> tuple[float, float]:
    r = page.evaluate(f"() => {{ const u = window.stepscope.charts[{json.dumps(chart)}]; "
                      "return [u.scales.x.min, u.scales.x.max]; }")
    return float(r[0]), float(r[1])


def _zoom_and_reset(page: Any, chart: str) -> None:
    """Drag across the middle of the plot: the x range narrows to it and the ticks change; double-click
    restores the full range; zoom again, then the "reset zoom" button restores it too."""
    full = _scale(page, chart)
    yfull = page.evaluate(f"() => window.stepscope.charts[{json.dumps(chart)}].scales.y.max")
    over = page.locator(f"#{chart} .u-over")
    over.scroll_into_view_if_needed()
    box = over.bounding_box()
    assert box is not None
    ticks_before = page.locator(f"#{chart} .ss-tick-x").all_inner_texts()
    y = box["y"] + box["height"] / 2

    def drag() -> None:
        page.mouse.move(box["x"] + box["width"] * 0.3, y)
        page.mouse.down()
        page.mouse.move(box["x"] + box["width"] * 0.45, y, steps=4)
        page.mouse.move(box["x"] + box["width"] * 0.6, y, steps=4)
        page.mouse.up()

    drag()
    lo, hi = _scale(page, chart)
    span = full[1] - full[0]
    assert full[0] < lo < hi < full[1] and (hi - lo) < 0.5 * span, (full, lo, hi)
    assert abs(lo - (full[0] + 0.3 * span)) < 0.05 * span  # the dragged interval, not somewhere else
    assert page.locator(f"#{chart} .ss-tick-x").all_inner_texts() != ticks_before
    assert page.locator(f"#{chart} .ss-reset").is_visible()
    page.mouse.dblclick(box["x"] + box["width"] / 2, y)
    assert _scale(page, chart) == pytest.approx(full)
    drag()
    assert _scale(page, chart) != pytest.approx(full)
    page.locator(f"#{chart} .ss-reset").click()
    assert _scale(page, chart) == pytest.approx(full)
    assert not page.locator(f"#{chart} .ss-reset").is_visible()
    # y is ranged over the restored window again, not the zoomed one
    assert page.evaluate(f"() => window.stepscope.charts[{json.dumps(chart)}].scales.y.max") == pytest.approx(yfull)


def _common_checks(viewer: Viewer, sections: tuple[str, ...]) -> None:
    page = viewer.page
    for s in sections:
        assert page.locator(f"section#{s} > h2").is_visible(), s
    n = page.locator("figure.ss-plot").count()
    assert n > 0 and page.locator("figure.ss-plot[data-drawn='1']").count() == n  # every chart drawn
    assert page.locator("figure.ss-plot[data-kind=xy] canvas").count() == \
        page.locator("figure.ss-plot[data-kind=xy]").count()
    assert page.evaluate(OVERLAPS_JS) == []
    assert round_ticks_problems(page.evaluate(TICKS_JS)) == []
    for c in page.evaluate(TICKS_JS):  # every axis titled; no tick starts at "0 ns"
        assert c["xtitle"] and c["ytitle"], c
        assert not any(t.endswith(" ns") for t in c["x"] + c["y"]), c


def test_report_as_a_person_sees_it(browser: Any, profiled_store: Path, tmp_path: Path) -> None:  # noqa: F811
    out = tmp_path / "report.html"
    assert main(["report", "--store", str(profiled_store), "-o", str(out)]) == 0
    shots = screenshots_dir(tmp_path)
    for width in WIDTHS:
        viewer = Viewer(browser, width)
        page = viewer.open(out)
        _common_checks(viewer, REPORT_SECTIONS)
        # legend labels in words, never raw column names
        legends = " ".join(page.locator("figure.ss-plot .ss-legend").all_inner_texts())
        assert "CPU, this process" in legends and "cpu_process_pct" not in legends
        # a step-time tooltip on hover, with the unit
        over = page.locator("#plot-step-time .u-over")
        over.scroll_into_view_if_needed()
        box = over.bounding_box()
        assert box is not None
        page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + box["height"] * 0.5)
        tip = page.locator("#ss-tip")
        assert tip.is_visible() and re.search(r"step time: [\d.]+ (ms|s|µs)", tip.inner_text())
        _zoom_and_reset(page, "plot-step-time")
        # the bar names are one line each, the full kernel name on hover
        rows = page.locator("figure.ss-plot[data-kind=bars] .ss-bar-row")
        for i in range(rows.count()):
            name = rows.nth(i).locator(".ss-bar-name")
            assert name.evaluate("e => e.getClientRects().length === 1 && e.scrollHeight <= 20")
            assert rows.nth(i).get_attribute("title") is not None
        page.screenshot(path=str(shots / f"report_{width}.png"), full_page=True)
        assert viewer.errors == [] and viewer.requests == [] and viewer.refused == []
        viewer.page.close()


def test_diff_as_a_person_sees_it(browser: Any, profiled_pair_store: Path, tmp_path: Path) -> None:  # noqa: F811
    out = tmp_path / "diff.html"
    assert main(["diff", "latest~1", "latest", "--store", str(profiled_pair_store), "--html", str(out)]) == 0
    shots = screenshots_dir(tmp_path)
    html = out.read_text()
    for width in WIDTHS:
        viewer = Viewer(browser, width)
        page = viewer.open(out)
        _common_checks(viewer, DIFF_SECTIONS)
        badge = page.locator("header .ss-badge")
        assert badge.inner_text() in ("faster", "slower", "no change", "inconclusive")
        assert badge.get_attribute("class").split()[-1].startswith("verdict-")  # type: ignore[union-attr]
        # overlays: each run's line has no gap of its own (no null in its data), however the x values interleave
        for chart in ("plot-cumulative-time", "plot-step-time"):
            gaps = page.evaluate(f"() => window.stepscope.charts[{json.dumps(chart)}].data.slice(1)"
                                 ".map(s => s.filter(v => v === null).length)")
            assert gaps and all(g == 0 for g in gaps), (chart, gaps)
        spec = json.loads(re.search(r'id="plot-cumulative-time"><figcaption>.*?</figcaption><script '
                                    r'type="application/json" class="ss-spec">(.*?)</script>', html).group(1))  # type: ignore[union-attr]
        assert [s["label"] for s in spec["series"]] == ["baseline", "experiment"]
        assert all(len(s["x"]) == len(s["y"]) and None not in s["y"] for s in spec["series"])
        # operator names: shortened, the full name on hover; the table scrolls inside its card
        full = json.loads(page.locator("script.ss-fullnames[data-table=operators-table]").text_content() or "[]")
        cells = page.locator("#operators-table tbody tr td:first-child")
        assert cells.count() == len(full) > 0
        for i in range(min(cells.count(), 40)):
            assert cells.nth(i).get_attribute("title") == full[i]
            assert len(cells.nth(i).inner_text()) <= 48
        fits = page.evaluate("""() => { const s = document.querySelector('section#operators');
            const w = s.querySelector('.ss-tablewrap');
            const a = s.getBoundingClientRect(), b = w.getBoundingClientRect();
            const td = s.querySelector('#operators-table td.text');
            return [b.right <= a.right + 0.5, td.getBoundingClientRect().width]; }""")
        assert fits[0] and fits[1] >= 100  # names never squeezed to a few characters per line
        page.screenshot(path=str(shots / f"diff_{width}.png"), full_page=True)
        assert viewer.errors == [] and viewer.requests == [] and viewer.refused == []
        viewer.page.close()


def test_spiky_throughput_is_a_median_line_with_round_human_ticks(browser: Any, tmp_path: Path) -> None:  # noqa: F811
    """The issue's throughput: a ~340 samples/s line with spikes of 30k. The median is drawn, the y range
    follows it (spikes clipped, not scaled to), ticks are round; bytes ticks are round MiB, not 476.8."""
    rng = np.random.default_rng(7)
    rate = rng.normal(340, 15, 600)
    rate[rng.choice(600, 20, replace=False)] = 30_000.0
    mem = 500_000_000 + np.arange(600) * 37_000.0
    body = xy_chart("Throughput over time", np.arange(600) * 0.3, [Series("throughput", rate)],
                    x_axis=Axis("time since first step", "s"), y_axis=Axis("throughput", "samples/s"), chart_id="tp")
    body += xy_chart("Memory", np.arange(600) * 0.3, [Series("rss_bytes", mem), Series("zero", np.zeros(600))],
                     x_axis=Axis("time", "s"), y_axis=Axis("memory", "bytes"), chart_id="mem")
    body += xy_chart("All zero", np.arange(50), [Series("disk write", np.zeros(50))], x_axis=Axis("time", "s"),
                     y_axis=Axis("throughput", "bytes/s"), chart_id="zeros")  # once drew duplicate ticks
    day0 = 1_709_294_400  # 2024-03-01T12:00Z, one run a day
    body += xy_chart("By date", day0 + 86_400 * np.arange(10), [Series("step time", np.full(10, 2.5e7))],
                     x_axis=Axis("run date (UTC)", "date"), y_axis=Axis("step time", "ns"), chart_id="dates")
    shas = [f"{i:07x}{i}" for i in range(10)]
    body += xy_chart("By commit", np.arange(10), [Series("step time", np.full(10, 2.5e7))],
                     x_axis=Axis("commit", labels=shas), y_axis=Axis("step time", "ns"), chart_id="commits")
    out = tmp_path / "charts.html"
    out.write_text(render_page("charts", [Section("c", "charts", body)]))
    viewer = Viewer(browser, 1000)
    page = viewer.open(out)
    ymax = page.evaluate("() => window.stepscope.charts.tp.scales.y.max")
    assert 340 < ymax < 2 * 340  # independent: the median of N(340, 15) with 3% spikes stays near 340
    assert page.evaluate("() => window.stepscope.charts.tp.data.length") == 3  # x, raw (faint), median
    assert "rolling median" in page.locator("#tp .ss-legend").inner_text()
    ticks = page.evaluate(TICKS_JS)
    assert round_ticks_problems(ticks) == []
    mem_ticks = next(c for c in ticks if c["id"] == "mem")
    assert mem_ticks["ytitle"] == "memory (MiB)" and "resident memory, this process" in \
        page.locator("#mem .ss-legend").inner_text()
    zeros = next(c for c in ticks if c["id"] == "zeros")["y"]
    assert zeros[0] == "0" and len(zeros) >= 2 and len(set(zeros)) == len(zeros)
    dates = next(c for c in ticks if c["id"] == "dates")["x"]
    assert len(dates) >= 3 and len(set(dates)) == len(dates) and dates[0].startswith("2024-03-0")
    commits = next(c for c in ticks if c["id"] == "commits")["x"]
    assert len(commits) >= 3 and len(set(commits)) == len(commits) and set(commits) <= set(shas)
    assert page.evaluate(OVERLAPS_JS) == []
    _zoom_and_reset(page, "tp")
    assert viewer.errors == [] and viewer.requests == [] and viewer.refused == []


def test_scaling_page_log_axes_at_the_world_sizes(browser: Any, tmp_path: Path) -> None:  # noqa: F811
    """The scaling page's log-log throughput chart: x ticks exactly at the world sizes, log y, the ±1 std
    band and the ideal lines drawn, tooltips and zoom like every chart."""
    from tests.cli.test_scaling import _study

    store = tmp_path / "store"
    _study(store, [(1, 100.0), (2, 100.0), (4, 125.0)])
    out = tmp_path / "scaling.html"
    assert main(["scaling", "--store", str(store), "--tag", "study=w", "--html", str(out)]) == 0
    viewer = Viewer(browser, 1400)
    page = viewer.open(out)
    _common_checks(viewer, ("all",))
    ticks = {c["id"]: c for c in page.evaluate(TICKS_JS)}
    tp = ticks["plot-throughput-all"]
    assert tp["x"] == ["1", "2", "4"] and tp["xtitle"] == "ranks (log scale)"
    assert tp["ytitle"] == "throughput (samples/s, log scale)"
    n = page.evaluate("() => window.stepscope.charts['plot-throughput-all'].series.length")
    assert n == 1 + 4 + 2 * 2  # x, four lines, an upper and lower std series for each measured line
    page.screenshot(path=str(screenshots_dir(tmp_path) / "scaling_1400.png"), full_page=True)
    assert viewer.errors == [] and viewer.requests == [] and viewer.refused == []
