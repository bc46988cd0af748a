"""The dashboard in headless Chromium (Playwright): from file:// and from `stepscope serve`.

One real store holds two run names, written through the store's writers (tests/report/dashboard/dashstore.py):
"aa" — 12 commits of 3 runs with identical distributions (unchanged code) — and "step20" — the same, but from
commit 6 on the work region takes 20% longer. A second store holds only unchanged code. Screenshots of every
page at 1400 and 800 px go to $STEPSCOPE_SCREENSHOTS (else a temporary folder)."""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from stepscope.cli import main
from tests.report.dashboard.dashstore import bulk_index, write_history

pytestmark = pytest.mark.browser
CHROMIUM = Path("/usr/bin/chromium")
HOSTILE = '<img src=x onerror="window.__pwned=1">"&\'</script>'
COMMITS, REPEATS, SLOW_AT, WORK_MS, SLOWER = 12, 3, 6, 25.0, 1.2
RUNS = 2 * COMMITS * REPEATS + 1
STEP_TIME_CHANGE = (WORK_MS * SLOWER + 1) / (WORK_MS + 1) - 1
"""What the injected step does to the step time (work + 1 ms a step): +19.2%."""


def _hostile_run(store: Path) -> None:
    """A run whose name, tag and parameter are HTML/JS, indexed without a run directory."""
    from stepscope.model.run import HostInfo, Run, RunStatus, SoftwareInfo
    from stepscope.store import open_store

    st = open_store(store)
    st.index.upsert_run(Run(id="hostile1", name=HOSTILE, status=RunStatus.FAILED, start_ns=1, end_ns=2,
                            command=("x",), cwd="/", exit_code=1, git=None,
                            host=HostInfo("h", "linux", None, None, None, None), software=SoftwareInfo("3", "0"),
                            world_size=1, params={"lr": HOSTILE}, tags={"team": HOSTILE}),
                        "/nonexistent", {"step_time_median_s": 0.5})
    st.close()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, list[str]]]:
    if not CHROMIUM.exists():
        pytest.skip("no Chromium at /usr/bin/chromium")
    pytest.importorskip("playwright.sync_api")
    tmp = tmp_path_factory.mktemp("dash")
    store = tmp / "store"
    write_history(store, "aa", commits=COMMITS, repeats=REPEATS, work_ms=WORK_MS, seed=1)
    shas = write_history(store, "step20", commits=COMMITS, repeats=REPEATS, work_ms=WORK_MS, factor_from=SLOW_AT,
                         factor=SLOWER, seed=2)
    _hostile_run(store)
    assert main(["dashboard", "build", "--store", str(store), "-o", str(tmp / "site"), "--name", "step20",
                 "--reports", "2"]) == 0
    yield tmp / "site", store, shas


@pytest.fixture(scope="module")
def aa_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("dash-aa")
    write_history(tmp / "store", "aa", commits=COMMITS, repeats=REPEATS, work_ms=WORK_MS, seed=3)
    assert main(["dashboard", "build", "--store", str(tmp / "store"), "-o", str(tmp / "site"), "--reports", "0"]) == 0
    return tmp / "site"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    pytest.importorskip("playwright.sync_api")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM),
                              args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        yield b
        b.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = Path(os.environ.get("STEPSCOPE_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    out.mkdir(parents=True, exist_ok=True)
    return out


class Watched:
    """A page that records console errors, page errors, dialogs and every request URL."""

    def __init__(self, browser: Any, width: int = 1400) -> None:
        self.page = browser.new_page(viewport={"width": width, "height": 900})
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("dialog", lambda d: (self.errors.append("dialog: " + d.message), d.dismiss()))
        self.page.on("request", lambda r: self.requests.append(r.url))

    def outside(self, prefix: str) -> list[str]:
        return [u for u in self.requests if not u.startswith(prefix)]

    def boxes(self, selector: str) -> list[dict[str, float]]:
        loc = self.page.locator(selector)
        return [b for i in range(loc.count()) if (b := loc.nth(i).bounding_box()) is not None]


def overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return (a["x"] < b["x"] + b["width"] and b["x"] < a["x"] + a["width"]
            and a["y"] < b["y"] + b["height"] and b["y"] < a["y"] + a["height"])


def any_overlap(boxes: list[dict[str, float]]) -> list[tuple[int, int]]:
    return [(i, j) for i in range(len(boxes)) for j in range(i + 1, len(boxes)) if overlap(boxes[i], boxes[j])]


def test_runs_list_filters_and_hostile_names(site, browser) -> None:
    out, _, _ = site
    w = Watched(browser)
    w.page.goto((out / "index.html").as_uri())
    count = w.page.locator("#ss-count")
    assert count.inner_text().startswith(f"{RUNS} of {RUNS} runs")
    w.page.fill("#f-text", "hostile")
    assert count.inner_text().startswith(f"1 of {RUNS}")
    w.page.fill("#f-text", "")
    w.page.select_option("#f-status", "failed")
    assert count.inner_text().startswith(f"1 of {RUNS}")
    w.page.select_option("#f-status", "")
    w.page.fill("#f-tag", "team")
    assert count.inner_text().startswith(f"1 of {RUNS}")
    w.page.fill("#f-tag", "")
    w.page.fill("#f-param", "lr=nope")
    assert count.inner_text().startswith(f"0 of {RUNS}")
    w.page.fill("#f-param", "")
    w.page.select_option("#f-name", "aa")
    assert count.inner_text().startswith(f"{COMMITS * REPEATS} of {RUNS}")
    w.page.select_option("#f-name", "")
    # the hostile name is text in the table, never markup
    w.page.fill("#f-text", "hostile")
    cell = w.page.locator('tr[data-run="hostile1"] td').first
    assert cell.inner_text() == HOSTILE
    assert w.page.locator("#ss-runs-table img").count() == 0
    assert w.page.evaluate("window.__pwned") is None
    w.page.fill("#f-text", "")
    # sorting by name puts the hostile '<' name first
    w.page.click('th[data-key="name"]')
    assert w.page.locator("#ss-runs-table tbody tr").first.get_attribute("data-run") == "hostile1"
    assert w.errors == [] and w.outside("file://") == []


def test_runs_list_is_paginated(tmp_path: Path, browser) -> None:
    """250 runs: 100 rows drawn a page, the pager walks them, sorting sorts all 250, not the page."""
    from stepscope.model.run import HostInfo, Run, RunStatus, SoftwareInfo
    from stepscope.store import open_store

    st = open_store(tmp_path / "store", create=True)
    for i in range(250):
        st.index.upsert_run(Run(id=f"r{i:04d}", name="bulk", status=RunStatus.COMPLETED, start_ns=(i + 1) * 10**12,
                                end_ns=None, command=("x",), cwd="/", exit_code=0, git=None,
                                host=HostInfo("h", "linux", None, None, None, None), software=SoftwareInfo("3", "0"),
                                world_size=1), "/nonexistent", {"step_time_median_s": 0.001 * ((i * 7) % 250 + 1)})
    st.close()
    assert main(["dashboard", "build", "--store", str(tmp_path / "store"), "-o", str(tmp_path / "site"),
                 "--reports", "0"]) == 0
    w = Watched(browser)
    w.page.goto((tmp_path / "site" / "index.html").as_uri())
    rows = w.page.locator("#ss-runs-table tbody tr")
    assert rows.count() == 100 and w.page.locator("#ss-count").inner_text() == "250 of 250 runs (rows 1–100)"
    assert rows.first.get_attribute("data-run") == "r0249"  # newest first
    w.page.click("#ss-last")
    assert rows.count() == 50 and w.page.locator("#ss-page").inner_text() == "page 3 of 3"
    assert rows.last.get_attribute("data-run") == "r0000"
    w.page.click('th[data-key="step"]')  # ascending step time over all 250 runs: the 1 ms run first
    assert rows.count() == 100 and rows.first.get_attribute("data-run") == "r0000"
    assert re.fullmatch(r"1(\.0+)? ms", rows.first.locator("td").nth(8).inner_text())
    assert w.errors == [] and w.outside("file://") == []


def test_large_store_runs_list_shows_every_run_and_sorts_all(tmp_path: Path, browser) -> None:
    """10,000 runs: the count says so, 100 rows are drawn, the last page holds the oldest run and shows it,
    and sorting by step time orders all 10,000 (the fastest run sits on page 61 in start order)."""
    n = 10_000

    def step(i: int) -> float:  # a permutation of 10,000 distinct step times
        return 0.010 + ((i * 7919 + 5000) % n) * 1e-6

    ids = bulk_index(tmp_path / "store", n, step_s=step)
    assert main(["dashboard", "build", "--store", str(tmp_path / "store"), "-o", str(tmp_path / "site"),
                 "--reports", "0"]) == 0
    fastest, slowest = ids[min(range(n), key=step)], ids[max(range(n), key=step)]
    assert ids.index(fastest) // 100 not in (0, 99)  # neither on the first nor the last page by start time
    w = Watched(browser)
    w.page.goto((tmp_path / "site" / "index.html").as_uri())
    rows = w.page.locator("#ss-runs-table tbody tr")
    assert w.page.locator("#ss-count").inner_text() == f"{n} of {n} runs (rows 1–100)"
    assert rows.count() == 100 and rows.first.get_attribute("data-run") == ids[-1]  # newest first
    w.page.click("#ss-last")
    assert w.page.locator("#ss-page").inner_text() == "page 100 of 100"
    assert w.page.locator("#ss-count").inner_text() == f"{n} of {n} runs (rows 9901–10000)"
    assert rows.count() == 100 and rows.last.get_attribute("data-run") == ids[0]  # the oldest run
    rows.last.scroll_into_view_if_needed()
    box = rows.last.bounding_box()
    assert box is not None and box["y"] >= 0 and box["y"] + box["height"] <= 900  # on screen
    w.page.click('th[data-key="step"]')  # ascending over every run, back to page 1
    assert w.page.locator("#ss-page").inner_text() == "page 1 of 100"
    assert rows.first.get_attribute("data-run") == fastest
    assert rows.first.locator("td").nth(8).inner_text() == "10 ms"
    w.page.click("#ss-last")
    assert rows.last.get_attribute("data-run") == slowest
    w.page.click('th[data-key="step"]')  # descending
    assert rows.first.get_attribute("data-run") == slowest
    assert w.page.locator("#ss-runs-table tr").count() == 101  # the header and one page: never 10,000 rows
    assert w.errors == [] and w.outside("file://") == []


def _labels(w: Watched) -> list[dict[str, float]]:
    return w.boxes(".ss-tick-x") + w.boxes(".ss-tick-y") + w.boxes(".ss-axis-title")


def test_history_axes_toggles_and_click(site, browser, shots) -> None:
    """The history chart is the chart module's: date and commit-order x axes with distinct ticks, a y axis
    with its unit, toggles that show which view is on, the step listed, a click on a point opens its run."""
    out, _, shas = site
    for width in (1400, 800):
        w = Watched(browser, width)
        w.page.goto((out / "history" / "region.work.p50_s@step20.html").as_uri())
        w.page.wait_for_selector(".ss-tick-x")
        assert w.page.evaluate("window.stepscope.charts['ss-h-date-rel'].data[0].length") == COMMITS
        steps = w.page.locator("li.ss-step")
        assert steps.count() == 1 and steps.get_attribute("data-commit") == shas[SLOW_AT]
        assert steps.get_attribute("data-kind") == "regression"
        # toggles show which is active
        assert w.page.get_attribute("#x-date", "aria-pressed") == "true"
        assert w.page.get_attribute("#x-commit", "aria-pressed") == "false"
        dates = [t.strip() for t in w.page.locator(".ss-tick-x").all_text_contents()]
        assert len(dates) >= 2 and len(set(dates)) == len(dates), dates  # one commit a day: distinct days
        assert all(re.fullmatch(r"2024-03-\d\d( \d\d:\d\d)?", d) for d in dates), dates
        assert any_overlap(_labels(w)) == [], "axis labels overlap"
        w.page.screenshot(path=str(shots / f"dashboard-history-{width}.png"), full_page=True)
        w.page.click("#y-abs")
        assert w.page.get_attribute("#y-abs", "aria-pressed") == "true"
        assert w.page.get_attribute("#y-rel", "aria-pressed") == "false"
        titles = w.page.locator(".ss-axis-title").all_text_contents()
        assert any("(ms)" in t for t in titles), titles  # the absolute y axis has its unit
        w.page.click("#x-commit")
        assert w.page.get_attribute("#x-commit", "aria-pressed") == "true"
        order = [t.strip() for t in w.page.locator(".ss-tick-x").all_text_contents()]
        assert len(order) >= 3 and len(set(order)) == len(order), order  # no "#0 #1 #1 #2"
        assert set(order) <= {s[:10] for s in shas}
        assert any_overlap(_labels(w)) == []
        w.page.screenshot(path=str(shots / f"dashboard-history-commits-{width}.png"), full_page=True)
        assert w.errors == [] and w.outside("file://") == []
    # the cursor on commit 7 names it; a click opens its run
    u = "window.stepscope.charts['ss-h-order-abs']"
    px, py = w.page.evaluate(f"[{u}.valToPos(7, 'x'), {u}.valToPos({u}.data[1][7], 'y')]")
    box = w.page.locator("#ss-h-order-abs .u-over").bounding_box()
    assert box is not None
    w.page.mouse.move(box["x"] + px, box["y"] + py)
    assert shas[7][:10] in w.page.locator("#ss-point-info").inner_text()
    run_id = w.page.evaluate("JSON.parse(document.getElementById('ss-history').textContent).points.cols.run[7]")
    w.page.mouse.click(box["x"] + px, box["y"] + py)
    w.page.wait_for_url(re.compile(re.escape(run_id)))
    assert run_id in w.page.content()


def test_name_selector_switches_run_names(site, browser) -> None:
    out, _, _ = site
    w = Watched(browser)
    w.page.goto((out / "index.html").as_uri())
    assert w.page.locator("#ss-name").input_value() == "step20"  # --name comes first
    links = w.page.locator("#ss-metric-links a")
    assert all("@step20" in (links.nth(i).get_attribute("href") or "") for i in range(links.count()))
    w.page.select_option("#ss-name", "aa")
    assert w.page.locator("#ss-count").inner_text().startswith(f"{COMMITS * REPEATS} of {RUNS}")
    assert links.count() >= 2
    assert all("@aa" in (links.nth(i).get_attribute("href") or "") for i in range(links.count()))
    links.first.click()
    w.page.wait_for_load_state()
    assert "@aa.html" in w.page.url
    # on a history page the selector opens the same metric of the other name
    w.page.goto((out / "history" / "step_time_median_s@aa.html").as_uri())
    w.page.select_option("#ss-name", "step20")
    w.page.wait_for_url(re.compile(r"step_time_median_s@step20\.html$"))
    assert w.page.locator("li.ss-step").count() == 1
    assert w.errors == [] and w.outside("file://") == []


def _change_cell(text: str) -> tuple[float, float, float]:
    nums = [float(x) / 100 for x in re.findall(r"[-+]\d+\.\d", text)]
    assert len(nums) == 3, text
    return nums[0], nums[1], nums[2]


def test_regressions_page_lists_the_injected_step_only(site, browser, shots) -> None:
    out, _, shas = site
    for width in (1400, 800):
        w = Watched(browser, width)
        w.page.goto((out / "regressions.html").as_uri())
        rows = w.page.locator("#ss-regressions tbody tr")
        assert rows.count() >= 2
        listed = {(rows.nth(i).get_attribute("data-name"), rows.nth(i).get_attribute("data-metric"),
                   rows.nth(i).get_attribute("data-commit")) for i in range(rows.count())}
        assert {n for n, _, _ in listed} == {"step20"} and {c for _, _, c in listed} == {shas[SLOW_AT]}
        assert {"step_time_median_s", "region.work.p50_s", "samples_per_s"} <= {m for _, m, _ in listed}
        assert w.page.locator('#ss-improvements tr[data-name="aa"]').count() == 0
        row = w.page.locator('#ss-regressions tr[data-metric="step_time_median_s"]')
        change, low, high = _change_cell(row.locator("td").nth(5).inner_text())
        assert low < STEP_TIME_CHANGE < high and change > 0.1
        w.page.screenshot(path=str(shots / f"dashboard-regressions-{width}.png"), full_page=True)
        assert w.errors == [] and w.outside("file://") == []
    # the name selector filters the rows; "all" is the default
    w.page.select_option("#ss-name", "aa")
    assert w.page.locator("#ss-regressions tbody tr:visible").count() == 0
    w.page.select_option("#ss-name", "")
    assert w.page.locator("#ss-regressions tbody tr:visible").count() == rows.count()
    # each row links to the full diff of the runs around the step
    row.locator("a.ss-diff").click()
    w.page.wait_for_load_state()
    assert "/diffs/" in w.page.url
    text = w.page.content()
    assert "work" in text and "slower" in text.lower()
    assert w.errors == [] and w.outside("file://") == []


def test_aa_store_lists_no_regression(aa_site, browser) -> None:
    w = Watched(browser)
    w.page.goto((aa_site / "regressions.html").as_uri())
    assert w.page.locator("#ss-regressions-empty").count() == 1
    assert w.page.locator("#ss-improvements-empty").count() == 1
    assert w.page.locator("#ss-regressions tbody tr").count() == 0
    assert "Regressions (0)" in w.page.locator("#ss-dash-nav").inner_text()
    assert w.errors == [] and w.outside("file://") == []


def test_compare_opens_the_html_diff(site, browser, shots) -> None:
    out, store, shas = site
    from stepscope.store import open_store

    pages = {tuple(p.stem.split("--")): p for p in (out / "diffs").glob("*--*.html")}
    rows = {r.id: r for r in open_store(store).rows()}
    # a regression's page compares the two commits' groups of runs (ids joined by commas), not one run with one
    assert pages and all(rows[r].git_commit == shas[SLOW_AT] for _, b in pages for r in b.split(","))
    (good, bad) = next(iter(pages))
    assert {rows[r].git_commit for r in good.split(",")} == {shas[SLOW_AT - 1]}
    w = Watched(browser)
    w.page.goto(pages[(good, bad)].as_uri())  # the page a regression links to: the two commits' groups
    assert "slower" in w.page.content().lower()
    w.page.screenshot(path=str(shots / "dashboard-compare-diff-1400.png"), full_page=True)
    w.page.goto((out / "compare.html").as_uri() + "#hostile1,hostile1")
    assert w.page.locator("#cmp-cmd").inner_text() == "stepscope diff hostile1 hostile1 --html"
    w.page.goto((out / "run.html").as_uri() + "#hostile1")
    assert w.page.locator("#run-name").inner_text() == f"{HOSTILE} (hostile1)"
    one, other = good.split(",")[0], bad.split(",")[0]  # two single runs: the site has no page, it names the command
    w.page.goto((out / "compare.html").as_uri() + f"#{one},{other}")
    assert w.page.locator("#cmp-cmd").inner_text() == f"stepscope diff {one} {other} --html"
    assert w.errors == [] and w.outside("file://") == []


def test_screenshots_of_every_page(site, browser, shots) -> None:
    out, _, _ = site
    for width in (1400, 800):
        for rel in ("index.html", "compare.html", "history/step_time_median_s@aa.html"):
            w = Watched(browser, width)
            w.page.goto((out / rel).as_uri())
            w.page.screenshot(path=str(shots / f"dashboard-{Path(rel).stem}-{width}.png"), full_page=True)
            # nothing wider than the window but the tables' own scrolling boxes
            assert w.page.evaluate("document.documentElement.scrollWidth") <= width
            assert w.errors == [] and w.outside("file://") == []


def test_serve_same_pages_read_only(site, browser) -> None:
    import urllib.error
    import urllib.request

    from stepscope.cli.serve import make_handler
    from stepscope.store import open_store

    _, store, _ = site
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(lambda: open_store(store), "step20"))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        w = Watched(browser)
        w.page.goto(base)
        assert w.page.locator("#ss-count").inner_text().startswith(f"{RUNS} of {RUNS}")
        w.page.goto(base + "history/region.work.p50_s@step20.html")
        assert w.page.locator("li.ss-step").count() == 1
        ids = [r.id for r in open_store(store).rows() if r.name == "aa"]
        w.page.goto(base + f"compare.html#{ids[0]},{ids[-1]}")  # any pair's diff page, rendered live
        w.page.wait_for_url(re.compile(rf"diffs/{ids[0]}--{ids[-1]}\.html$"))
        assert "step time" in w.page.content().lower()
        assert w.errors == [] and w.outside(base) == []
        req = urllib.request.Request(base + "index.html", data=b"x", method="POST")
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req)
        assert e.value.code == 501
    finally:
        server.shutdown()
        server.server_close()
