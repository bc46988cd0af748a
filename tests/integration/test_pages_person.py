"""Every page of issue 15 looked at as a person does, in headless Chromium at 1400 and 800 px: the report of a
real profiled run, the report of that run with the v100 fixture trace imported (`stepscope import`), the diff
page of two real runs, and the dashboard of a real store (runs list, regressions, a history page).

On every page: each section there, every chart drawn, no text box of an axis title, tick, bar label, legend or
caption over another on ANY chart, no console error, no network request; drag-to-zoom narrows a chart's
visible range. The two reports stay under 1.5 MB. Screenshots go to $STEPSCOPE_SCREENSHOTS (else a temporary
folder): the first viewport of each page at each width."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stepscope.cli import main
from tests.conftest import TRACES
from tests.integration.conftest import CHROMIUM
from tests.report.dashboard.dashstore import write_history
from tests.report.html.chromium import Viewer, screenshots_dir

pytestmark = pytest.mark.browser
WIDTHS = (1400, 800)
REPORT_SECTIONS = ("overview", "speed", "time", "system", "memory", "kernels", "model", "metrics")
DIFF_SECTIONS = ("verdict", "overview", "trends", "phases", "components", "operators", "metrics")
MAX_REPORT_BYTES = 1_500_000

TEXT_BOXES_JS = """() => {
  const sel = '.ss-axis-layer span, .ss-bars-axis .ss-tick, .ss-bars-axis .ss-axis-title, .ss-bar-name, '
            + '.ss-bar-value, .ss-heat th, .ss-heat-scale span, figcaption, .ss-reset:not([hidden])';
  const out = [];
  let checked = 0;
  document.querySelectorAll('figure.ss-plot').forEach(f => {
    const els = [...f.querySelectorAll(sel)].filter(e => e.textContent.trim() && e.getClientRects().length);
    checked += els.length;
    for (let i = 0; i < els.length; i++) for (let j = i + 1; j < els.length; j++) {
      const p = els[i], q = els[j];
      if (p.contains(q) || q.contains(p)) continue;
      const a = p.getBoundingClientRect(), b = q.getBoundingClientRect();
      if (a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5)
        out.push(f.id + ': "' + p.textContent + '" overlaps "' + q.textContent + '"');
    }
  });
  return {checked: checked, overlaps: out};
}"""

CANVAS_TEXT_INIT = """(() => {
  const fill = CanvasRenderingContext2D.prototype.fillText;
  window.__canvasText = [];
  CanvasRenderingContext2D.prototype.fillText = function (t, x, y, ...rest) {
    const w = this.measureText(String(t)).width, al = this.textAlign;
    const left = al === 'right' || al === 'end' ? x - w : al === 'center' ? x - w / 2 : x;
    window.__canvasText.push({canvas: this.canvas, text: String(t), left: left, right: left + w});
    return fill.call(this, t, x, y, ...rest);
  };
})()"""

CANVAS_TEXT_OUTSIDE_JS = """() => {
  const out = [];
  for (const [id, u] of Object.entries(window.stepscope.charts || {})) {
    const l = u.bbox.left, r = u.bbox.left + u.bbox.width;
    window.__canvasText.filter(e => e.canvas === u.ctx.canvas && e.text.trim() && (e.left < l - 1 || e.right > r + 1))
      .forEach(e => out.push(id + ': "' + e.text + '" drawn at ' + Math.round(e.left) + '..' + Math.round(e.right)
                             + ' outside the plot ' + Math.round(l) + '..' + Math.round(r)));
  }
  return out;
}"""
"""Text drawn on a chart's canvas (shade and rule labels) lies inside the plot, never over the tick labels."""


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (python) is not installed")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path="/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else CHROMIUM,
                              args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        yield b
        b.close()


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory, profiled_store: Path, profiled_pair_store: Path) -> dict[str, Path]:
    """Every page, built once from real runs: two reports, a diff, a dashboard site."""
    tmp = tmp_path_factory.mktemp("pages")
    out = {"report": tmp / "report.html", "gpu": tmp / "gpu-report.html", "diff": tmp / "diff.html"}
    assert main(["report", "--store", str(profiled_store), "-o", str(out["report"])]) == 0
    gpu_store = tmp / "gpu-store"
    shutil.copytree(profiled_store, gpu_store)
    assert main(["import", "--store", str(gpu_store), "--force", "--accept-misfit", "latest",
                 str(TRACES / "v100_1rank" / "rank0.json.gz")]) == 0
    assert main(["report", "--store", str(gpu_store), "-o", str(out["gpu"])]) == 0
    assert main(["diff", "latest~1", "latest", "--store", str(profiled_pair_store), "--html", str(out["diff"])]) == 0
    dash = tmp / "dash"
    write_history(dash / "store", "step20", commits=8, repeats=3, work_ms=25.0, factor_from=4, factor=1.2, seed=2)
    assert main(["dashboard", "build", "--store", str(dash / "store"), "-o", str(dash / "site"), "--reports", "0"]) == 0
    out["runs"] = dash / "site" / "index.html"
    out["regressions"] = dash / "site" / "regressions.html"
    out["history"] = dash / "site" / "history" / "step_time_median_s@step20.html"
    return out


def _visible_range(page: Any, chart: str) -> tuple[float, float]:
    r = page.evaluate(f"() => {{ const u = window.stepscope.charts[{json.dumps(chart)}]; "
                      "return [u.scales.x.min, u.scales.x.max]; }")
    return float(r[0]), float(r[1])


def _zoom(page: Any, chart: str) -> None:
    """Drag over the middle fifth of ``chart``: its visible x range narrows to about that interval; "reset zoom"
    brings the whole range back."""
    full = _visible_range(page, chart)
    over = page.locator(f"#{chart} .u-over")
    over.scroll_into_view_if_needed()
    box = over.bounding_box()
    assert box is not None
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] * 0.4, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.5, y, steps=3)
    page.mouse.move(box["x"] + box["width"] * 0.6, y, steps=3)
    page.mouse.up()
    lo, hi = _visible_range(page, chart)
    span = full[1] - full[0]
    assert full[0] < lo < hi < full[1] and hi - lo == pytest.approx(0.2 * span, abs=0.05 * span), (chart, full, lo, hi)
    page.locator(f"#{chart} .ss-reset").click()
    assert _visible_range(page, chart) == pytest.approx(full)


def _look(chromium: Any, path: Path, name: str, sections: tuple[str, ...], zoom: str | None, shots: Path, *,
          charts: bool = True, focus: str | None = None) -> None:
    """Open ``path`` at each width; every check of the module docstring; a screenshot of the viewport (at the
    top of the page, or with section ``focus`` at the top: the pictures of docs/reports.md)."""
    for width in WIDTHS:
        viewer = Viewer(chromium, width)
        viewer.page.add_init_script(CANVAS_TEXT_INIT)
        page = viewer.open(path)
        page.wait_for_function("n => { const f = document.querySelectorAll('figure.ss-plot'); return f.length >= n "
                               "&& [...f].every(e => e.dataset.drawn === '1'); }", arg=int(charts), timeout=10_000)
        for s in sections:
            assert page.locator(f"section#{s} > h2").count() == 1, (name, s)
        boxes = page.evaluate(TEXT_BOXES_JS)
        assert (boxes["checked"] > 0) == charts and boxes["overlaps"] == [], (name, width, boxes["overlaps"])
        if zoom is not None:
            _zoom(page, zoom)
        assert page.evaluate(CANVAS_TEXT_OUTSIDE_JS) == [], (name, width)
        page.evaluate("f => { if (f) { document.getElementById(f).scrollIntoView(); window.scrollBy(0, -40); } "
                      "else window.scrollTo(0, 0); }", focus)
        page.screenshot(path=str(shots / f"{name}_{width}.png"))
        assert viewer.errors == [] and viewer.requests == [] and viewer.refused == [], (name, width)
        viewer.page.close()


def test_report_of_a_profiled_run(chromium: Any, pages: dict[str, Path], tmp_path: Path) -> None:
    assert pages["report"].stat().st_size < MAX_REPORT_BYTES
    html = pages["report"].read_text(encoding="utf-8")
    # legends in words (never a raw column name), every axis titled, throughput drawn as a rolling median
    specs = {i: json.loads(s) for i, s in re.findall(r'<figure class="ss-plot" data-kind="xy" id="([^"]+)">'
                                                     r'<figcaption>.*?</figcaption><script type="application/json" '
                                                     r'class="ss-spec">(.*?)</script>', html)}
    assert len(specs) >= 6
    for ident, spec in specs.items():
        assert spec["xAxis"]["title"] and spec["yAxis"]["title"], ident
        for series in spec["series"]:
            assert not re.search(r"_(pct|bytes|bps|ns)$", series["label"]), (ident, series["label"])
    assert specs["plot-throughput"]["series"][0]["smooth"] > 1
    assert specs["plot-throughput"]["yAxis"]["unit"] == "samples/s"
    _look(chromium, pages["report"], "report", REPORT_SECTIONS, "plot-step-time", screenshots_dir(tmp_path),
          focus="speed")


def test_report_of_a_run_with_an_imported_gpu_trace(chromium: Any, pages: dict[str, Path], tmp_path: Path) -> None:
    assert pages["gpu"].stat().st_size < MAX_REPORT_BYTES
    html = pages["gpu"].read_text(encoding="utf-8")
    for chart in ("plot-temporal-r0", "plot-steps-r0", "plot-kernels-r0"):
        assert f'id="{chart}"' in html, chart
    for heading in ("Temporal breakdown", "GPU idle time by cause", "Time per profiler step", "Kernel launches",
                    "Memory copies and sets", "Overlap and utilisation", "CPU operators"):
        assert heading in html, heading
    _look(chromium, pages["gpu"], "report-gpu", REPORT_SECTIONS, "plot-step-time", screenshots_dir(tmp_path),
          focus="kernels")


def test_diff_of_two_real_runs(chromium: Any, pages: dict[str, Path], tmp_path: Path) -> None:
    _look(chromium, pages["diff"], "diff", DIFF_SECTIONS, "plot-step-time", screenshots_dir(tmp_path))


def test_dashboard_pages(chromium: Any, pages: dict[str, Path], tmp_path: Path) -> None:
    shots = screenshots_dir(tmp_path)
    _look(chromium, pages["runs"], "dashboard-runs", (), None, shots, charts=False)
    _look(chromium, pages["regressions"], "dashboard-regressions", ("regressions", "improvements"), None, shots,
          charts=False)
    _look(chromium, pages["history"], "dashboard-history", ("history",), None, shots)
    # the regressions page lists the injected step; the history chart zooms like every chart
    viewer = Viewer(chromium, 1400)
    page = viewer.open(pages["regressions"])
    assert page.locator('#ss-regressions tr[data-metric="step_time_median_s"]').count() >= 1
    # commit, change and verdict cells are one line each: never "regressi / on"
    lines = page.evaluate("() => [...document.querySelectorAll('#ss-regressions td.mono, "
                          "#ss-regressions td.ss-nowrap')].map(td => { const r = document.createRange(); "
                          "r.selectNodeContents(td); "
                          "return [td.textContent, r.getClientRects().length]; })")
    assert lines and all(n == 1 for _, n in lines), lines
    page = viewer.open(pages["history"])
    page.wait_for_selector("figure.ss-plot[data-drawn='1'][data-kind=xy]")
    chart = page.locator("figure.ss-plot[data-kind=xy]").first.get_attribute("id")
    assert chart
    _zoom(page, chart)
    assert viewer.errors == [] and viewer.requests == [] and viewer.refused == []
