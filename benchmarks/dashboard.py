"""Dashboard at scale: build a store of N runs (index rows + minimal run dirs), time `stepscope dashboard
build` (from nothing, then again on the unchanged store: only what changed is redone), then open the pages in
headless Chromium (Debian's /usr/bin/chromium through Playwright) and time each from navigation start to its
content shown: the page's own `ss-painted` performance mark (set by its script in the frame after the first
page of rows, the chart, ... is in the document; `ss-drawn` is set when it is put there), read back from the
page, so Playwright's round trips are not counted. Prints each figure beside its target (issue 20: build
< 5 s, runs list < 1 s, history < 0.5 s), the median of --repeat loads, with the load average it was
measured at; then `serve` on the same store (first request, and the next ones of the unchanged store).

    .venv/bin/python benchmarks/dashboard.py [--runs 10000] [--repeat 5]

The store: runs of the name "nightly", 5 runs per commit, one commit an hour, step time 10 ms with 1% noise
per run and a +10% step 60 commits before the newest (so the regressions page has one to list).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
RUNS_PER_COMMIT = 5
STEP_BEFORE_END = 60
"""The +10% step sits this many commits before the newest one."""
BUILD_TARGET_S, LIST_TARGET_S, HISTORY_TARGET_S = 5.0, 1.0, 0.5
"""Issue 20's targets at 10,000 runs."""


def make_store(root: Path, n: int) -> None:
    from stepscope.model.run import GitInfo, HostInfo, Run, RunStatus, SoftwareInfo
    from stepscope.store import open_store
    from stepscope.store.rundir import write_manifest

    st = open_store(root, create=True)
    rng = random.Random(0)
    n_commits = n // RUNS_PER_COMMIT + 1
    commits = [hashlib.sha1(f"commit {i}".encode()).hexdigest() for i in range(n_commits)]
    idx = st.index
    for i in range(n):
        k = i // RUNS_PER_COMMIT
        run_id = f"r{i:07d}"
        git = GitInfo(commit=commits[k], branch=rng.choice(["main", "dev"]), dirty=False,
                      commit_time_s=1.7e9 + k * 3600, subject=f"commit {k}")
        run = Run(id=run_id, name="nightly", status=RunStatus.COMPLETED, start_ns=int((1.7e9 + i * 720) * 1e9),
                  end_ns=None, command=("python", "train.py"), cwd="/src", exit_code=0, git=git,
                  host=HostInfo("node", "linux", None, None, None, None), software=SoftwareInfo("3.11", "0.1"),
                  world_size=1, params={"bs": str(rng.choice([32, 64]))}, tags={"team": "core"})
        path = st.run_path(run_id)
        path.mkdir(parents=True)
        write_manifest(path, run)
        slower = k >= (n - 1) // RUNS_PER_COMMIT - STEP_BEFORE_END
        step = 0.010 * (1.1 if slower else 1.0) * (1 + 0.01 * rng.gauss(0, 1))
        idx.upsert_run(run, str(path), {"step_time_median_s": step, "samples_per_s": 64 / step,
                                        "data_wait_share": 0.05 + 0.01 * rng.random(),
                                        "region.forward.p50_s": step * 0.4, "region.forward.share": 0.4,
                                        "peak_rss_bytes": 2e9 + 1e7 * rng.random()})
    st.close()


def process_time(cdp: Any) -> float:
    """The renderer process's CPU seconds so far (Chromium's ProcessTime metric)."""
    return float(next(m["value"] for m in cdp.send("Performance.getMetrics")["metrics"] if m["name"] == "ProcessTime"))


def mark_s(page: Any, name: str, timeout_s: float = 60.0) -> float:
    """Seconds from navigation start to the page's performance mark ``name``, once it is set (polled with
    evaluate: a page's CSP forbids the eval behind wait_for_function)."""
    deadline = time.monotonic() + timeout_s
    while True:
        ms = page.evaluate(f"(performance.getEntriesByName('{name}')[0] || {{}}).startTime")
        if ms is not None:
            return float(ms) / 1000
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {name} mark after {timeout_s} s")
        time.sleep(0.01)


def time_page(page: Any, url: str, ready: str, repeat: int) -> tuple[float, float, float, float]:
    """Medians over ``repeat`` loads of (seconds from navigation start to the page's ``ss-painted`` mark: its
    data parsed, drawn, and the next frame shown; the same to its ``ss-drawn`` mark, the content in the
    document; seconds until Playwright saw ``ready`` attached, its round trips included; CPU seconds the
    renderer process spent meanwhile, from Chromium's own ProcessTime metric: what the load costs on a machine
    whose cores are not shared)."""
    painted, marks, walls, cpus = [], [], [], []
    for _ in range(repeat):
        page.goto("about:blank")  # a cold load each time (a hash-only change would not reload)
        cdp = page.context.new_cdp_session(page)
        cdp.send("Performance.enable")
        c0, t = process_time(cdp), time.perf_counter()
        page.goto(url)
        page.wait_for_selector(ready, state="attached")
        walls.append(time.perf_counter() - t)
        cpus.append(process_time(cdp) - c0)
        painted.append(mark_s(page, "ss-painted"))
        marks.append(mark_s(page, "ss-drawn"))
        cdp.detach()
    return statistics.median(painted), statistics.median(marks), statistics.median(walls), statistics.median(cpus)


def verdict(seconds: float, target: float | None) -> str:
    if target is None:
        return ""
    return f"  target < {target:g} s: {'met' if seconds < target else 'MISSED'}"


def build(store: Path, site: Path) -> tuple[float, float]:
    """One `dashboard build --reports 0` in this process: (wall, CPU) seconds."""
    from stepscope.cli import main as cli

    t, cpu = time.perf_counter(), time.process_time()
    assert cli(["dashboard", "build", "--store", str(store), "-o", str(site), "--reports", "0"]) == 0
    return time.perf_counter() - t, time.process_time() - cpu


def serve_figures(store: Path) -> None:
    """`serve` on the same store, in this process: the first request builds the pages, the next ones of the
    unchanged store are answered from them."""
    import threading
    import urllib.request
    from http.server import ThreadingHTTPServer

    from stepscope.cli.serve import make_handler
    from stepscope.store import open_store

    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(lambda: open_store(store), None))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        for what in ("first request (builds)", "next request (store unchanged)", "a history page (same build)"):
            path = "history/step_time_median_s@nightly.html" if "history" in what else "index.html"
            t = time.perf_counter()
            with urllib.request.urlopen(base + path, timeout=120) as r:
                size = len(r.read())
            print(f"serve: {what:32s} {time.perf_counter() - t:.2f} s ({size / 1e6:.2f} MB; load average "
                  f"{os.getloadavg()[0]:.1f})")
    finally:
        server.shutdown()
        server.server_close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10000)
    ap.add_argument("--repeat", type=int, default=5, help="loads per page (median reported)")
    ap.add_argument("--store", type=Path, help="reuse this store (written by an earlier run) instead of a new one")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ss-dash-bench-"))
    store = args.store or tmp / "store"
    if args.store is None:
        t = time.perf_counter()
        make_store(store, args.runs)
        print(f"store of {args.runs} runs written in {time.perf_counter() - t:.1f} s")
    site = tmp / "site"
    load = os.getloadavg()[0]
    build_s, build_cpu = build(store, site)
    print(f"dashboard build:           {build_s:.2f} s wall, {build_cpu:.2f} s CPU (load average {load:.1f} on "
          f"{os.cpu_count()} cores){verdict(build_s, BUILD_TARGET_S)}")
    again_s, again_cpu = build(store, site)
    print(f"dashboard build, unchanged: {again_s:.2f} s wall, {again_cpu:.2f} s CPU (load average "
          f"{os.getloadavg()[0]:.1f})")
    for p in sorted(site.rglob("*.html")):
        print(f"  {p.relative_to(site)}: {p.stat().st_size / 1e6:.2f} MB")
    from playwright.sync_api import sync_playwright

    pages = (("runs list", "index.html", "#ss-runs-table tbody tr", LIST_TARGET_S),
             ("history", "history/step_time_median_s@nightly.html", ".ss-tick-x", HISTORY_TARGET_S),
             ("regressions", "regressions.html", "#ss-regressions tbody tr", None),
             ("compare", "compare.html", "#cmp-a option", None),
             ("run", "run.html#r0000001", "#run-name", None))
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        page = b.new_page(viewport={"width": 1400, "height": 900})
        page.goto(site.as_uri() + "/index.html")  # warm the browser process once
        for label, rel, ready, target in pages:
            load = os.getloadavg()[0]
            shown, mark, wall, cpu = time_page(page, site.as_uri() + "/" + rel, ready, args.repeat)
            print(f"chromium: {label:12s} shown {shown:.2f} s after navigation start (drawn at {mark:.2f} s; "
                  f"Playwright saw it at {wall:.2f} s), {cpu:.2f} s renderer CPU; median of {args.repeat}, load "
                  f"average {load:.1f}{verdict(shown, target)}   [{rel}]")
        page.goto(site.as_uri() + "/index.html")
        t = time.perf_counter()
        page.fill("#f-text", "r000999")
        page.locator("#ss-count", has_text=re.compile(r"^10 of")).wait_for()
        print(f"chromium: filter of {args.runs} runs: {page.locator('#ss-count').inner_text()} "
              f"({time.perf_counter() - t:.3f} s)")
        page.fill("#f-text", "")
        t = time.perf_counter()
        page.click('th[data-key="step"]')
        page.locator('th[data-key="step"][aria-sort]').wait_for()
        print(f"chromium: sort {args.runs} runs by step time: {time.perf_counter() - t:.3f} s")
        t = time.perf_counter()
        page.click("#ss-last")
        page.locator("#ss-page", has_text=re.compile(r"^page (\d+) of \1$")).wait_for()
        print(f"chromium: last page of {args.runs} runs: {time.perf_counter() - t:.3f} s")
        b.close()
    serve_figures(store)
    print(f"site at {site}", file=sys.stderr)


if __name__ == "__main__":
    main()
