"""The dashboard in headless Chromium (Playwright): from file:// and from `stepscope serve`."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from stepscope.cli import main

pytestmark = pytest.mark.browser
CHROMIUM = Path("/usr/bin/chromium")
HOSTILE = '<img src=x onerror="window.__pwned=1">"&\'</script>'


COMMITS, SLOW_AT, STEPS = 10, 5, 10
WORK_MS, SLOWER = 25.0, 1.10
"""A history written straight into a real store: the step of run i is a region "work" of WORK_MS (times
SLOWER from commit SLOW_AT on) plus 1 ms, each with a fixed ±0.5% wobble. The page is under test, not the
machine's timing: no run is timed, so the step at SLOW_AT is as decisive on a loaded machine as on a quiet
one."""
T0 = 1_709_294_400_000_000_000  # 2024-03-01T12:00Z


def _history_run(store_root: Path, i: int, sha: str) -> None:
    """Run i of the history (commit ``sha``, dated day i+1 of 2024-03) through the store's own writers."""
    from stepscope.analyze.summary import index_metrics, summarize_run
    from stepscope.model.run import GitInfo, HostInfo, RankStream, Run, RunStatus, SoftwareInfo
    from stepscope.store import open_store
    from stepscope.store.rundir import RANKS, RecordWriter, rank_file_name, stream_header, write_end, write_manifest

    wobble = np.random.default_rng(i).uniform(-0.005, 0.005, STEPS)
    work_ns = (WORK_MS * (SLOWER if i >= SLOW_AT else 1.0) * 1e6 * (1 + wobble)).astype(np.int64)
    step_ns = work_ns + 1_000_000
    start = T0 + i * 86_400 * 10**9
    ends = start + np.cumsum(step_ns)
    starts = np.concatenate([[start], ends[:-1]])
    st = open_store(store_root, create=True)
    run_id, run_dir = st.new_run_dir()
    stream = RankStream(rank=0, local_rank=0, world_size=1, role=None, pid=1000 + i, host="h", start_ns=start,
                        end_ns=int(ends[-1]), step_source="api")
    run = Run(id=run_id, name="tiny", status=RunStatus.RUNNING, start_ns=start, end_ns=None,
              command=("python", "train.py"), cwd="/repo", exit_code=None,
              git=GitInfo(sha, "main", False, start / 1e9, "make work 10% slower" if i == SLOW_AT else f"tidy {i}"),
              host=HostInfo("h", "linux", None, 2, 2, None), software=SoftwareInfo("3.11", "0.1.0"), world_size=1,
              streams=(stream,), options={"warmup_steps": 0})
    write_manifest(run_dir, run)
    (run_dir / RANKS).mkdir(exist_ok=True)
    w = RecordWriter(run_dir / RANKS / rank_file_name(0))
    w.append([stream_header(stream),
              {"kind": "steps", "cols": {"index": list(range(STEPS)), "start_ns": starts.tolist(),
                                         "end_ns": ends.tolist(), "samples": [1.0] * STEPS}},
              {"kind": "regions", "cols": {"path": ["work"] * STEPS, "step": list(range(STEPS)),
                                           "start_ns": (starts + 500_000).tolist(), "duration_ns": work_ns.tolist(),
                                           "depth": [0] * STEPS}},
              {"kind": "end", "end_ns": int(ends[-1]), "reason": "exit", "steps": STEPS}])
    w.close()
    write_end(run_dir, status=RunStatus.COMPLETED, end_ns=int(ends[-1]), exit_code=0)
    loaded = st.load(run_id)
    st.index.upsert_run(loaded.run, str(run_dir), index_metrics(summarize_run(loaded)))
    st.close()


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
    shas = [hashlib.sha1(f"commit {i}".encode()).hexdigest() for i in range(COMMITS)]
    for i, sha in enumerate(shas):
        _history_run(store, i, sha)
    _hostile_run(store)
    assert main(["dashboard", "build", "--store", str(store), "-o", str(tmp / "site"), "--name", "tiny",
                 "--reports", "2"]) == 0
    yield tmp / "site", store, shas


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM),
                              args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        yield b
        b.close()


class Watched:
    """A page that records console errors, page errors, dialogs and every request URL."""

    def __init__(self, browser: Any) -> None:
        self.page = browser.new_page()
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("dialog", lambda d: (self.errors.append("dialog: " + d.message), d.dismiss()))
        self.page.on("request", lambda r: self.requests.append(r.url))

    def outside(self, prefix: str) -> list[str]:
        return [u for u in self.requests if not u.startswith(prefix)]


def test_runs_list_filters_and_hostile_names(site, browser) -> None:
    out, _, _ = site
    w = Watched(browser)
    w.page.goto((out / "index.html").as_uri())
    count = w.page.locator("#ss-count")
    assert count.inner_text().startswith("11 of 11 runs")
    w.page.fill("#f-text", "hostile")
    assert count.inner_text().startswith("1 of 11")
    w.page.fill("#f-text", "")
    w.page.select_option("#f-status", "failed")
    assert count.inner_text().startswith("1 of 11")
    w.page.select_option("#f-status", "")
    w.page.fill("#f-tag", "team")
    assert count.inner_text().startswith("1 of 11")
    w.page.fill("#f-tag", "")
    w.page.fill("#f-param", "lr=nope")
    assert count.inner_text().startswith("0 of 11")
    w.page.fill("#f-param", "")
    # the hostile name is text in the table, never markup
    cell = w.page.locator('tr[data-run="hostile1"] td').first
    assert cell.inner_text() == HOSTILE
    assert w.page.locator("#ss-runs-table img").count() == 0
    assert w.page.evaluate("window.__pwned") is None
    # sorting by name puts the hostile '<' name first
    w.page.click('th[data-key="name"]')
    assert w.page.locator("#ss-runs-table tbody tr").first.get_attribute("data-run") == "hostile1"
    assert w.errors == [] and w.outside("file://") == []


def test_history_click_opens_the_run_and_marks_the_step(site, browser) -> None:
    out, _, shas = site
    w = Watched(browser)
    w.page.goto((out / "history" / "region.work.p50_s.html").as_uri())
    points = w.page.locator("circle.ss-point")
    assert points.count() == 10
    steps = w.page.locator("line.ss-step")
    assert steps.count() == 1 and steps.get_attribute("data-commit") == shas[SLOW_AT]
    target = points.nth(7)
    run_id, commit = target.get_attribute("data-run"), target.get_attribute("data-commit")
    assert commit == shas[7]
    target.hover()
    assert shas[7][:10] in w.page.locator("#ss-tip").inner_text()
    w.page.click("#x-commit")  # commit-order axis redraws the same points
    assert w.page.locator("circle.ss-point").count() == 10
    w.page.locator("circle.ss-point").nth(7).click()
    w.page.wait_for_load_state()
    assert run_id in w.page.url
    assert run_id in w.page.content()
    assert w.errors == [] and w.outside("file://") == []


def test_compare_and_run_pages(site, browser) -> None:
    out, _, _ = site
    w = Watched(browser)
    w.page.goto((out / "compare.html").as_uri() + "#hostile1,hostile1")
    assert w.page.locator("#cmp-cmd").inner_text() == "stepscope diff hostile1 hostile1"
    assert w.page.locator("#cmp-table tbody tr").count() >= 1
    assert w.page.locator("#cmp-diff").count() == 0  # no diff page for this pair in a static build
    w.page.goto((out / "run.html").as_uri() + "#hostile1")
    assert w.page.locator("#run-name").inner_text() == f"{HOSTILE} (hostile1)"
    assert w.errors == [] and w.outside("file://") == []


def test_static_site_has_the_diff_around_the_detected_step(site, browser) -> None:
    out, store, shas = site
    from stepscope.store import open_store

    rows = {r.id: r for r in open_store(store).rows()}
    pages = {tuple(p.stem.split("--")): p for p in (out / "diffs").glob("*--*.html")}
    # the one step (last good commit 4, first bad commit 5) has its diff pre-rendered, and no other pair
    ((good, bad),) = pages
    assert (rows[good].git_commit, rows[bad].git_commit) == (shas[SLOW_AT - 1], shas[SLOW_AT])
    page = pages[(good, bad)]
    w = Watched(browser)
    w.page.goto((out / "compare.html").as_uri() + f"#{good},{bad}")
    w.page.click("#cmp-diff")
    w.page.wait_for_load_state()
    assert page.name in w.page.url
    text = w.page.content()
    assert "work" in text and "slower" in text  # the region made 10% slower, named in the diff
    assert w.errors == [] and w.outside("file://") == []


def test_serve_same_pages_read_only(site, browser) -> None:
    import urllib.error
    import urllib.request

    from stepscope.cli.serve import make_handler
    from stepscope.store import open_store

    _, store, _ = site
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(lambda: open_store(store), "tiny"))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        w = Watched(browser)
        w.page.goto(base)
        assert w.page.locator("#ss-count").inner_text().startswith("11 of 11")
        w.page.goto(base + "history/region.work.p50_s.html")
        assert w.page.locator("line.ss-step").count() == 1
        ids = [r.id for r in open_store(store).rows() if r.name == "tiny"]
        w.page.goto(base + f"compare.html#{ids[0]},{ids[-1]}")
        w.page.click("#cmp-diff")  # any pair's diff page, rendered live
        w.page.wait_for_load_state()
        assert f"diffs/{ids[0]}--{ids[-1]}.html" in w.page.url and "step time" in w.page.content().lower()
        assert w.errors == [] and w.outside(base) == []
        req = urllib.request.Request(base + "index.html", data=b"x", method="POST")
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req)
        assert e.value.code == 501
    finally:
        server.shutdown()
        server.server_close()
