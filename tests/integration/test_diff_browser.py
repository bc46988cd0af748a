"""The HTML diff page in a real headless Chromium, opened from file://: no console errors, no network request,
plots drawn, hostile run and region names shown as text, clicking a header sorts, the module tree collapses."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from stepscope.cli import main
from tests.integration.conftest import OfflinePage

pytestmark = pytest.mark.browser
SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "diff_train.py"
HOSTILE = "<img src=x onerror=alert(1)>"


def _observe(store: Path, *args: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("STEPSCOPE_HOME", "STEPSCOPE_DB")}
    proc = subprocess.run([sys.executable, "-m", "stepscope", "run", "--store", str(store), "--quiet", "--name",
                           HOSTILE, "--sample-interval", "0.2", "--profile-steps", "2", "--", sys.executable,
                           str(SCRIPT), "--steps", "40", *args], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_diff_page_in_chromium(browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    store = tmp_path / "store"
    _observe(store)
    _observe(store, "--slow-pct", "10", "--extra-name", HOSTILE, "--width", "256")
    out = tmp_path / "diff.html"
    assert main(["diff", "latest~1", "latest", "--store", str(store), "--html", str(out), "--json"]) == 0
    html = out.read_text()
    assert HOSTILE not in html  # escaped everywhere, in markup and in embedded JSON
    watched = OfflinePage(browser)
    page, errors, requests = watched.page, watched.errors, watched.requests
    page.goto(out.as_uri())
    page.wait_for_load_state("load")
    assert errors == [] and requests == []
    for s in ("verdict", "overview", "trends", "phases", "components", "modules", "operators", "metrics"):
        assert page.locator(f"section#{s} > h2").is_visible(), s
    n = page.locator("figure.ss-plot").count()
    assert n >= 3 and page.locator("figure.ss-plot[data-drawn='1']").count() == n
    assert page.evaluate("window.stepscope.charts['plot-cumulative-time'].series.length") == 3  # x + both runs
    assert "cumulative time (s)" in page.locator("#plot-cumulative-time").inner_text()
    assert HOSTILE in page.locator("header h1").inner_text() or HOSTILE in page.locator("header").inner_text()
    assert HOSTILE in page.locator("#breakdown-table").inner_text()  # the region name, as text
    assert page.evaluate("document.querySelectorAll('img').length") == 0
    # sorting by clicking a header: the delta column, then rows follow it
    header = page.locator("#breakdown-table th", has_text="delta %")
    header.click()
    order = header.get_attribute("aria-sort")
    assert order in ("ascending", "descending")
    vals = [float(v) for v in page.eval_on_selector_all(
        "#breakdown-table tbody tr td:nth-child(6)", "tds => tds.map(t => t.dataset.v).filter(v => v !== '')")]
    assert vals == sorted(vals, reverse=order == "descending")
    # module tree: collapse the root, its children hide
    toggle = page.locator("#modules-table button.ss-toggle").first
    rows_before = page.locator("#modules-table tbody tr:visible").count()
    toggle.click()
    assert page.locator("#modules-table tbody tr:visible").count() < rows_before
    assert errors == [] and requests == []
