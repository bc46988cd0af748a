"""A long run's HTML report: write a run of N steps (default 100,000) straight into a real store through
the store's own writers (steps with phases and samples, a region per step, system samples), render its
report with `stepscope report`, then open it in headless Chromium and time until every chart is drawn.
Prints the figures; the target is < 2 s to open.

    .venv/bin/python benchmarks/report_open.py [--steps 100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

T0 = 1_709_294_400_000_000_000  # 2024-03-01T12:00Z


def make_run(store_root: Path, steps: int) -> str:
    """One completed run of ``steps`` steps of ~30 ms (data wait, forward, backward, optimizer), 64 samples
    each, a spike every 997 steps, epochs of 10,000 steps and a system sample every 0.5 s."""
    from stepscope.analyze.run.summary import index_metrics, summarize_run
    from stepscope.model.run import HostInfo, RankStream, Run, RunStatus, SoftwareInfo
    from stepscope.store import open_store
    from stepscope.store.rundir import RANKS, RecordWriter, rank_file_name, stream_header, write_end, write_manifest

    rng = np.random.default_rng(0)
    phases = {"data_wait": 3e6, "forward": 9e6, "backward": 15e6, "optimizer": 2e6}
    parts = {k: (v * rng.uniform(0.9, 1.1, steps)).astype(np.int64) for k, v in phases.items()}
    parts["data_wait"][::997] += 400_000_000
    step_ns = sum(parts.values()) + 500_000
    ends = T0 + np.cumsum(step_ns)
    starts = np.concatenate([[T0], ends[:-1]])
    st = open_store(store_root, create=True)
    run_id, run_dir = st.new_run_dir()
    stream = RankStream(rank=0, local_rank=0, world_size=1, role=None, pid=4242, host="h", start_ns=T0,
                        end_ns=int(ends[-1]), step_source="api")
    run = Run(id=run_id, name="long", status=RunStatus.RUNNING, start_ns=T0, end_ns=None,
              command=("python", "train.py"), cwd="/repo", exit_code=None, git=None,
              host=HostInfo("h", "linux", None, 2, 2, None), software=SoftwareInfo("3.11", "0.1.0"), world_size=1,
              streams=(stream,), options={"warmup_steps": 5})
    write_manifest(run_dir, run)
    (run_dir / RANKS).mkdir(exist_ok=True)
    w = RecordWriter(run_dir / RANKS / rank_file_name(0))
    cols = {"index": list(range(steps)), "start_ns": starts.tolist(), "end_ns": ends.tolist(),
            "samples": [64.0] * steps, "epoch": (np.arange(steps) // 10_000).tolist()}
    cols |= {f"{k}_ns": v.tolist() for k, v in parts.items()}
    t = np.arange(T0, int(ends[-1]), 500_000_000)
    w.append([stream_header(stream), {"kind": "steps", "cols": cols},
              {"kind": "regions", "cols": {"path": ["model"] * steps, "step": list(range(steps)),
                                           "start_ns": (starts + parts["data_wait"]).tolist(),
                                           "duration_ns": (parts["forward"] + parts["backward"]).tolist(),
                                           "depth": [0] * steps}},
              {"kind": "samples", "cols": {"t_ns": t.tolist(),
                                           "cpu_process_pct": rng.uniform(90, 110, len(t)).tolist(),
                                           "rss_bytes": (2e9 + np.arange(len(t)) * 1e5).tolist()}},
              {"kind": "end", "end_ns": int(ends[-1]), "reason": "exit", "steps": steps}])
    w.close()
    write_end(run_dir, status=RunStatus.COMPLETED, end_ns=int(ends[-1]), exit_code=0)
    loaded = st.load(run_id)
    st.index.upsert_run(loaded.run, str(run_dir), index_metrics(summarize_run(loaded)))
    st.close()
    return run_id


def open_seconds(page_path: Path, repeat: int) -> list[float]:
    """Seconds from navigation until every figure.ss-plot is drawn, in a fresh page each time."""
    from playwright.sync_api import sync_playwright

    out = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium") or "/usr/bin/chromium",
                                    args=["--headless", "--no-sandbox", "--disable-gpu",
                                          "--disable-background-networking"])
        errors: list[str] = []
        for _ in range(repeat):
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.on("pageerror", lambda e: errors.append(str(e)))
            t = time.perf_counter()
            page.goto(page_path.as_uri())
            page.wait_for_function("() => [...document.querySelectorAll('figure.ss-plot')]"
                                   ".every(f => f.dataset.drawn === '1')")
            out.append(time.perf_counter() - t)
            if errors:
                raise SystemExit(f"page errors: {errors}")
            page.close()
        browser.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    from stepscope.cli import main as cli

    tmp = Path(tempfile.mkdtemp(prefix="ss-report-bench-"))
    t = time.perf_counter()
    make_run(tmp / "store", args.steps)
    print(f"run of {args.steps} steps written in {time.perf_counter() - t:.1f} s")
    page = tmp / "report.html"
    t = time.perf_counter()
    assert cli(["report", "--store", str(tmp / "store"), "-o", str(page)]) == 0
    print(f"stepscope report: {time.perf_counter() - t:.2f} s, {page.stat().st_size / 1e6:.2f} MB")
    secs = open_seconds(page, args.repeat)
    print(f"open in Chromium until every chart is drawn: median {statistics.median(secs):.2f} s "
          f"(runs: {', '.join(f'{s:.2f}' for s in secs)}; target < 2 s)")
    shutil.rmtree(tmp)
    sys.exit(0 if statistics.median(secs) < 2.0 else 1)


if __name__ == "__main__":
    main()
