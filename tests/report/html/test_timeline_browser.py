"""The run report's timeline looked at in headless Chromium as a person does: the report of a real profiled CPU
run, and of that run with the v100_1rank, a100_alexnet and 2-rank sampled_128rank fixtures imported. The canvas
has drawn its rows (pixels that are not background), hovering the longest kernel of the fixture (read from the
raw JSON here) names it with its duration, the wheel and a drag on the time axis zoom, a double-click resets, the
rank selector draws a hidden rank's timeline, no console error, no network request, the page under 1.5 MB."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from stepscope.app import RunAnalysis
from stepscope.report.html.run_report import render_run_report
from tests.conftest import TRACES, load, stepscope_cmd
from tests.integration.conftest import browser  # noqa: F401  (the shared headless Chromium fixture)
from tests.report.html.chromium import Viewer, screenshots_dir

pytestmark = pytest.mark.browser
PAGE_LIMIT = 1_500_000
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}

INK_JS = """([id, y0, y1]) => {
  const c = document.querySelector('#' + id + ' canvas'), tl = window.stepscope.timelines[id];
  const dpr = window.devicePixelRatio || 1, ctx = c.getContext('2d');
  const x0 = Math.round(tl.labelWidth * dpr), w = c.width - x0;
  const img = ctx.getImageData(x0, Math.round(y0 * dpr), w, Math.max(1, Math.round((y1 - y0) * dpr))).data;
  let ink = 0;
  for (let i = 0; i < img.length; i += 4) {
    const bg = (img[i] === 255 && img[i + 1] === 255 && img[i + 2] === 255) ||
               (img[i] === 0xf7 && img[i + 1] === 0xfa && img[i + 2] === 0xfc) || img[i + 3] === 0;
    if (!bg) ink++;
  }
  return ink / (img.length / 4);
}"""


def _import(profiled_store: Path, folder: Path, *files: Path) -> Path:
    store = folder / "store"
    shutil.copytree(profiled_store, store)
    env = {**{k: v for k, v in os.environ.items() if k != "STEPSCOPE_DB"}, "STEPSCOPE_HOME": str(store)}
    res = subprocess.run(stepscope_cmd("import", "latest", "--force", "--accept-misfit", *map(str, files)),
                         capture_output=True, text=True, timeout=300, env=env, cwd=folder)
    assert res.returncode == 0, res.stderr[-3000:]
    return store


def _open(store: Path, tmp_path: Path, browser: Any, name: str) -> Viewer:  # noqa: F811
    html = render_run_report(RunAnalysis(load(store)))
    assert len(html.encode()) < PAGE_LIMIT
    path = tmp_path / f"{name}.html"
    path.write_text(html, encoding="utf-8")
    viewer = Viewer(browser, width=1400)
    viewer.open(path)
    return viewer


def _state(page: Any, ident: str) -> dict[str, Any]:
    return page.evaluate(f"""() => {{ const t = window.stepscope.timelines[{json.dumps(ident)}];
      const c = document.querySelector('#{ident} canvas').getBoundingClientRect();
      return {{view: t.view(), level: t.level(), span: t.spec.span, t0: t.spec.t0, label: t.labelWidth,
               rows: t.spec.rows, ys: t.spec.rows.map((_, i) => t.rowY(i)), left: c.left, top: c.top,
               width: c.width}}; }}""")


RED_JS = """(id) => {
  const c = document.querySelector('#' + id + ' canvas');
  const img = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let n = 0;
  for (let i = 0; i < img.length; i += 4) if (img[i] === 0xc5 && img[i + 1] === 0x30 && img[i + 2] === 0x30) n++;
  return n;
}"""


def _red(page: Any, ident: str) -> int:
    """Pixels of the critical path's red on the canvas."""
    return int(page.evaluate(RED_JS, ident))


def _x(s: dict[str, Any], t_ns: float) -> float:
    """Page x of a time (ns from the window start) in the current view."""
    v0, v1 = s["view"]
    return float(s["left"] + s["label"] + (t_ns - v0) / (v1 - v0) * (s["width"] - s["label"]))


def _ink(page: Any, ident: str, s: dict[str, Any], row: int) -> float:
    y = s["ys"][row]
    return float(page.evaluate(INK_JS, [ident, y - 4, y + 4]))


def _longest_kernel(path: Path) -> tuple[str, int, int]:
    """(name, ts ns, dur ns) of the longest kernel in the raw file (json, no stepscope code)."""
    doc = json.loads(gzip.decompress(path.read_bytes()))
    k = max((e for e in doc["traceEvents"] if e.get("ph") == "X" and str(e.get("cat", "")).lower() == "kernel"),
            key=lambda e: float(e["dur"]))
    return str(k["name"]), round(float(k["ts"]) * 1000), round(float(k["dur"]) * 1000)


def _identifier(name: str) -> str:
    """The kernel's own identifier: the last qualified word before its template or parameter list."""
    head = re.split(r"[<(]", re.sub(r"^void ", "", name), maxsplit=1)[0]
    return head.rsplit("::", 1)[-1].strip()


def _zoom_checks(viewer: Viewer, ident: str) -> None:
    page = viewer.page
    s = _state(page, ident)
    span = s["span"]
    assert s["view"] == [0, span]
    # the wheel zooms in around the pointer: the time under it stays under it
    x = s["left"] + s["label"] + 0.4 * (s["width"] - s["label"])
    y = s["top"] + s["ys"][-1]
    t_before = s["view"][0] + 0.4 * span
    page.mouse.move(x, y)
    for _ in range(4):
        page.mouse.wheel(0, -400)
    z = _state(page, ident)
    v0, v1 = z["view"]
    assert v1 - v0 < 0.5 * span and v0 <= t_before <= v1
    assert abs((v0 + 0.4 * (v1 - v0)) - t_before) < 0.02 * span
    assert page.evaluate(f"() => document.querySelector('#{ident} .ss-tl-range').textContent").startswith("showing")
    # drag on the time axis: that range
    page.mouse.dblclick(x, y)
    assert _state(page, ident)["view"] == [0, span]
    ax = s["top"] + 8
    a, b = s["left"] + s["label"] + 0.2 * (s["width"] - s["label"]), s["left"] + s["label"] + 0.3 * (
        s["width"] - s["label"])
    page.mouse.move(a, ax)
    page.mouse.down()
    page.mouse.move((a + b) / 2, ax, steps=3)
    page.mouse.move(b, ax, steps=3)
    page.mouse.up()
    r = _state(page, ident)["view"]
    assert r[0] == pytest.approx(0.2 * span, rel=0.02) and r[1] == pytest.approx(0.3 * span, rel=0.02)
    # drag in the rows pans: the same span, moved
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x - 100, y, steps=4)
    page.mouse.up()
    p = _state(page, ident)["view"]
    assert p[1] - p[0] == pytest.approx(r[1] - r[0], rel=1e-6) and p[0] > r[0]
    page.locator(f"#{ident} .ss-tl-reset").click()
    assert _state(page, ident)["view"] == [0, span]


def _finish(viewer: Viewer, tmp_path: Path, name: str) -> None:
    viewer.page.screenshot(path=str(screenshots_dir(tmp_path) / f"timeline-{name}.png"), full_page=False)
    assert viewer.errors == [] and viewer.requests == [] and viewer.refused == []


@pytest.mark.parametrize("fixture", ["v100_1rank", "a100_alexnet"])
def test_fixture_timeline_draws_names_kernels_and_zooms(profiled_store: Path, browser: Any,  # noqa: F811
                                                        tmp_path: Path, fixture: str) -> None:
    src = TRACES / fixture / "rank0.json.gz"
    store = _import(profiled_store, tmp_path, src)
    viewer = _open(store, tmp_path, browser, fixture)
    page, ident = viewer.page, "timeline-r0"
    page.locator(f"#{ident}").scroll_into_view_if_needed()
    assert page.get_attribute(f"#{ident}", "data-drawn") == "1"
    s = _state(page, ident)
    gpu = [i for i, r in enumerate(s["rows"]) if r["kind"] == "gpu"]
    cpu = [i for i, r in enumerate(s["rows"]) if r["kind"] == "cpu" and r["lane"] == 0]
    assert gpu and cpu
    # kernels painted on a stream, operators on a thread (alexnet's 43 s window is mostly idle: ~2% inked)
    assert max(_ink(page, ident, s, i) for i in gpu) > 0.01
    assert max(_ink(page, ident, s, i) for i in cpu) > 0.01

    name, ts, dur = _longest_kernel(src)
    # zoomed to ten times the kernel around it (the wheel's zoom is checked below), its middle hovered
    page.evaluate(f"() => window.stepscope.timelines['{ident}'].setView({ts - s['t0'] - 4 * dur}, "
                  f"{ts - s['t0'] + 5 * dur})")
    z = _state(page, ident)
    texts = [_hover(page, z, ts - z["t0"] + dur / 2, i) for i in gpu]
    text = next((t for t in texts if t and _identifier(name) in t.splitlines()[0]), None)
    assert text is not None, (name, texts)
    assert _close_duration(text, dur), text
    page.locator(f"#{ident} .ss-tl-reset").click()
    # the critical path (analyze/trace/critical_path.py) marked red; unticked, the marks go
    box = page.locator(f"#{ident} .ss-tl-crit input")
    assert box.is_checked() and _red(page, ident) > 0
    box.uncheck()
    assert _red(page, ident) == 0
    box.check()
    _zoom_checks(viewer, ident)
    _finish(viewer, tmp_path, fixture)


def _hover(page: Any, s: dict[str, Any], t_ns: float, row: int) -> str | None:
    page.mouse.move(_x(s, t_ns), s["top"] + s["ys"][row])
    tip = page.locator(".ss-tl-tip").first
    return None if not tip.is_visible() else str(tip.inner_text())


def _close_duration(text: str, dur_ns: int) -> bool:
    """The tooltip's duration, read back with its unit, within 1% of ``dur_ns``."""
    m = re.search(r"· ([\d.,]+) (ns|µs|ms|s)\n", text)
    if m is None:
        return False
    scale = {"ns": 1, "µs": 1e3, "ms": 1e6, "s": 1e9}[m.group(2)]
    return abs(float(m.group(1).replace(",", "")) * scale - dur_ns) <= 0.01 * dur_ns


def test_profiled_cpu_run_timeline_and_its_hover(profiled_store: Path, browser: Any, tmp_path: Path) -> None:  # noqa: F811
    viewer = _open(profiled_store, tmp_path, browser, "profiled")
    page, ident = viewer.page, "timeline-r0"
    page.locator(f"#{ident}").scroll_into_view_if_needed()
    s = _state(page, ident)
    assert all(r["kind"] == "cpu" for r in s["rows"])  # a CPU run: threads only
    assert _ink(page, ident, s, 0) > 0.05
    run_dir = next((profiled_store / "runs").iterdir())
    doc = json.loads(gzip.decompress((run_dir / "artifacts" / "traces" / "rank0.json.gz").read_bytes()))
    step = max((e for e in doc["traceEvents"] if e.get("ph") == "X" and str(e["name"]).startswith("ProfilerStep#")),
               key=lambda e: float(e["dur"]))
    mid = round(float(step["ts"]) * 1000) + round(float(step["dur"]) * 500) - s["t0"]
    texts = [_hover(page, s, mid, i) for i in range(len(s["rows"]))]
    assert any(t is not None and t.startswith(step["name"]) for t in texts), texts
    _zoom_checks(viewer, ident)
    _finish(viewer, tmp_path, "profiled")


def test_rank_selector_draws_the_other_rank_s_timeline(profiled_store: Path, browser: Any,  # noqa: F811
                                                       tmp_path: Path) -> None:
    store = _import(profiled_store, tmp_path, TRACES / "sampled_128rank" / "rank0.json.gz",
                    TRACES / "sampled_128rank" / "rank1.json.gz")
    viewer = _open(store, tmp_path, browser, "tworank")
    page = viewer.page
    assert page.get_attribute("#timeline-r0", "data-drawn") == "1"
    assert page.get_attribute("#timeline-r1", "data-drawn") is None  # hidden at load: nothing to draw into
    page.select_option("#rank-select-gpu", "1")
    page.locator("#timeline-r1").scroll_into_view_if_needed()
    assert page.get_attribute("#timeline-r1", "data-drawn") == "1"
    s = _state(page, "timeline-r1")
    assert max(_ink(page, "timeline-r1", s, i) for i, r in enumerate(s["rows"]) if r["kind"] == "gpu") > 0.02
    _finish(viewer, tmp_path, "tworank")
