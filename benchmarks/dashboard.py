"""Dashboard at scale: build a store of N runs (synthetic index rows + minimal run dirs), time
`stepscope dashboard build` and the pages' rendering in headless Chromium. Prints the figures.

    .venv/bin/python benchmarks/dashboard.py [--runs 10000]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path


def make_store(root: Path, n: int) -> None:
    from stepscope.model.run import GitInfo, HostInfo, Run, RunStatus, SoftwareInfo
    from stepscope.store import open_store
    from stepscope.store.rundir import write_manifest

    st = open_store(root, create=True)
    rng = random.Random(0)
    commits = [f"{i:040x}" for i in range(n // 5 + 1)]
    idx = st.index
    for i in range(n):
        k = i // 5
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
        step = 0.010 * (1.1 if k > n // 10 else 1.0) * (1 + 0.01 * rng.gauss(0, 1))
        idx.upsert_run(run, str(path), {"step_time_median_s": step, "samples_per_s": 64 / step,
                                        "data_wait_share": 0.05 + 0.01 * rng.random(),
                                        "region.forward.p50_s": step * 0.4, "region.forward.share": 0.4,
                                        "peak_rss_bytes": 2e9 + 1e7 * rng.random()})
    st.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10000)
    args = ap.parse_args()
    from stepscope.cli import main as cli

    tmp = Path(tempfile.mkdtemp(prefix="ss-dash-bench-"))
    t = time.perf_counter()
    make_store(tmp / "store", args.runs)
    print(f"store of {args.runs} runs written in {time.perf_counter() - t:.1f} s")
    t = time.perf_counter()
    assert cli(["dashboard", "build", "--store", str(tmp / "store"), "-o", str(tmp / "site"), "--reports", "0"]) == 0
    print(f"dashboard build: {time.perf_counter() - t:.2f} s")
    for p in sorted((tmp / "site").rglob("*.html")):
        print(f"  {p.relative_to(tmp / 'site')}: {p.stat().st_size / 1e6:.2f} MB")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path="/usr/bin/chromium",
                               args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        page = b.new_page()
        for rel, ready in (("index.html", "#ss-count"), ("history/step_time_median_s.html", "circle.ss-point"),
                           ("compare.html", "#cmp-table"), ("run.html#r0000001", "#run-name")):
            t = time.perf_counter()
            page.goto((tmp / "site").as_uri() + "/" + rel)
            page.wait_for_selector(ready)
            print(f"chromium: {rel} loaded and drawn in {time.perf_counter() - t:.2f} s")
        t = time.perf_counter()
        page.goto((tmp / "site" / "index.html").as_uri())
        page.fill("#f-text", "r00099")
        print(f"chromium: filter of {args.runs} runs: {page.locator('#ss-count').inner_text()} "
              f"({time.perf_counter() - t:.2f} s incl. load)")
        b.close()
    print(f"site at {tmp / 'site'}", file=sys.stderr)


if __name__ == "__main__":
    main()
