"""`serve`'s page of a running run redraws its charts as records arrive (issue 43), as W&B's do: a real tiny
training under `stepscope run` (60 steps of 0.2 s, logging its loss), `serve` pointed at its store, the run's
page in headless Chromium. The step-time, stacked phases, throughput and logged-loss charts gain points while the
run trains, without a reload, and hold every step once it ends; then the page stops asking. The records endpoint
(/live/runs/ID/records.json?after=STEP&metrics=ROWS) answers a bad cursor with 400 and one line, an unknown
run with 404, a foreign Host with 421. A page opened when the run had 3 steps draws, once the run has grown to
200, the same rolling median of throughput as a page rendered after the run ended."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from stepscope.cli.liverecords import Cursor, records_after
from stepscope.cli.serve import _json
from tests.conftest import SCRIPTS, load, record_tiny
from tests.integration.conftest import browser  # noqa: F401  (the shared headless Chromium fixture)
from tests.integration.test_serve_live import _get, _wait_for_run

STEPS = 60
CHARTS = ("plot-step-time", "plot-phases", "plot-throughput")
POINTS_JS = """ids => ids.map(id => { const u = (window.stepscope.charts || {})[id];
  return u ? u.data[0].filter(v => v !== null && v !== undefined).length : -1; })"""


def _points(page: Any, ids: list[str]) -> list[int]:
    return [int(n) for n in page.evaluate(POINTS_JS, ids)]


def _wait(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.25)
    raise AssertionError(f"{what}: not within {timeout} s")


def test_running_runs_page_redraws_its_charts(tmp_path: Path, browser: Any) -> None:  # noqa: F811
    store = tmp_path / "store"
    job = subprocess.Popen([sys.executable, "-m", "stepscope", "run", "--store", str(store), "--quiet", "--",
                            sys.executable, str(SCRIPTS / "advisor_train.py"), "--steps", str(STEPS),
                            "--sample-sleep", "0.025", "--instrument"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    server: subprocess.Popen[str] | None = None
    try:
        run_id = _wait_for_run(store)
        server = subprocess.Popen([sys.executable, "-m", "stepscope", "serve", "--store", str(store), "--port", "0"],
                                  stderr=subprocess.PIPE, text=True)
        assert server.stderr is not None
        base = re.search(r"(http://\S+)/", server.stderr.readline()).group(1)  # type: ignore[union-attr]
        records = f"/live/runs/{run_id}/records.json"
        # the endpoint: JSON after a cursor; bad cursors and foreign hosts refused in one line
        status, ctype, body = _get(base, records + "?after=-1&metrics=0")
        first = json.loads(body)
        assert status == 200 and ctype == "application/json" and first["status"] == "running"
        steps = first["steps"]
        assert steps["index"] == sorted(steps["index"]) and len(steps["index"]) == len(steps["duration_ns"])
        assert all(len(v) == len(steps["index"]) for v in steps["phases"].values())
        assert not steps["index"] or any(v is not None for v in steps["phases"]["data_wait"])  # the loader's wait
        for bad in ("?after=abc", "?after=-2", "?metrics=-1", "?after=1.5", "?after=1&after=2"):
            code, _, text = _get(base, records + bad)
            assert code == 400 and "\n" not in text.strip() and text.startswith("bad cursor"), (bad, code, text)
        assert _get(base, "/live/runs/nosuchrun/records.json")[0] == 404
        assert _get(base, records, host="evil.example")[0] == 421
        later = json.loads(_get(base, records + f"?after={steps['index'][-1] if steps['index'] else -1}")[2])
        assert all(i > (steps["index"] or [-1])[-1] for i in later["steps"]["index"])  # only what came after

        asked: list[float] = []
        page = browser.new_page()
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: asked.append(time.monotonic()) if "/records.json" in r.url else None)
        page.goto(f"{base}/runs/{run_id}.html")
        _wait(lambda: min(_points(page, list(CHARTS))) > 0, 60, "the step charts drawn")
        page.evaluate("() => { window.__sameDocument = true; }")  # gone if the page reloads
        before = _points(page, list(CHARTS))
        assert before[1] == before[0]  # the phases chart: a point per step, as the step-time chart
        metric_before = _points(page, ["plot-metric-step-0"])[0]
        grown = _wait(lambda: (p := _points(page, list(CHARTS))) and all(a > b for a, b in zip(p, before)) and p,
                      60, f"the charts growing from {before}")
        assert job.poll() is None, "the run ended before the charts grew: the test saw no live update"
        assert grown[0] > before[0]
        assert job.wait(timeout=180) == 0
        _wait(lambda: _points(page, list(CHARTS)) == [STEPS] * len(CHARTS), 30, f"all {STEPS} steps on the page")
        assert _points(page, ["plot-metric-step-0"])[0] == STEPS > metric_before  # one loss a step, logged
        assert page.evaluate("() => window.__sameDocument === true")
        # the run ended: the page stops asking for records
        _wait(lambda: "finished" in page.locator("#ss-live-banner").inner_text(), 30, "the banner saying finished")
        settled = len(asked)
        time.sleep(7)
        assert len(asked) <= settled + 1, asked
        assert not errors, errors
    finally:
        for proc in (job, server):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=20)


MEDIAN_JS = """id => { const u = window.stepscope.charts[id];
  const i = u.series.findIndex(s => s.label === "samples per second");
  return {x: u.data[0], y: u.data[i], legend: document.querySelector("#" + id + " .ss-legend").textContent}; }"""


def _window(n: int) -> int:
    """The report's rolling-median window for n steps (docs/reports.md: n/25 points, odd, 5 to 51; none under 10)."""
    return (max(5, min(51, n // 25)) | 1) if n >= 10 else 0


def test_live_page_draws_the_final_reports_rolling_median(tmp_path: Path, browser: Any) -> None:  # noqa: F811
    """The page is rendered at 3 steps (no rolling median: too few); the run then grows to 200 steps, where a
    report uses a window of 9. The live page's throughput median equals the one of a page rendered after the
    run ended, point for point; so does the loss, logged only from step 3 on (after the page was rendered)."""
    store, gate, total = tmp_path / "store", tmp_path / "go", 200
    job = subprocess.Popen([sys.executable, "-m", "stepscope", "run", "--store", str(store), "--quiet", "--",
                            sys.executable, str(SCRIPTS / "gated_train.py"), "--steps", str(total),
                            "--gate-after", "3", "--gate", str(gate)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    server: subprocess.Popen[str] | None = None
    try:
        run_id = _wait_for_run(store)
        server = subprocess.Popen([sys.executable, "-m", "stepscope", "serve", "--store", str(store), "--port", "0"],
                                  stderr=subprocess.PIPE, text=True)
        assert server.stderr is not None
        base = re.search(r"(http://\S+)/", server.stderr.readline()).group(1)  # type: ignore[union-attr]
        records = f"/live/runs/{run_id}/records.json?after=-1"
        _wait(lambda: len(json.loads(_get(base, records)[2])["steps"]["index"]) >= 3, 60, "3 steps recorded")
        page = browser.new_page()
        page.goto(f"{base}/runs/{run_id}.html")
        _wait(lambda: _points(page, ["plot-throughput"])[0] > 0, 60, "the throughput chart drawn")
        assert "rolling median" not in page.evaluate(MEDIAN_JS, "plot-throughput")["legend"]  # 3 steps: none
        assert _points(page, ["plot-metric-step-0"]) == [-1]  # no loss logged yet
        gate.write_text("go")
        assert job.wait(timeout=180) == 0
        _wait(lambda: _points(page, ["plot-throughput"])[0] == total, 60, f"all {total} steps on the page")
        live = page.evaluate(MEDIAN_JS, "plot-throughput")
        fresh_page = browser.new_page()
        fresh_page.goto(f"{base}/runs/{run_id}.html")  # the run ended: the final report, not live
        _wait(lambda: _points(fresh_page, ["plot-throughput"])[0] == total, 60, "the final report drawn")
        fresh = fresh_page.evaluate(MEDIAN_JS, "plot-throughput")
        assert _window(total) == 9 and f"rolling median of {_window(total)}" in fresh["legend"]
        assert f"rolling median of {_window(total)}" in live["legend"]
        assert live["x"] == fresh["x"] and len(live["y"]) == total
        assert live["y"] == fresh["y"]
        # the loss, logged from the gate on, drawn live by step and over time as in the final report
        for fig in ("plot-metric-step-0", "plot-metric-time-0"):
            assert _points(page, [fig]) == _points(fresh_page, [fig]) == [total - 3], fig
    finally:
        for proc in (job, server):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=20)


def test_records_carry_each_steps_phases_and_the_current_window(tmp_path: Path) -> None:
    """The endpoint's rows of a real 30-step run: each phase's time per training step as recorded (None where
    not measured), the loader's wait among them, and the window for 30 steps (5) also in an answer with no new
    step."""
    record_tiny(tmp_path, 30)
    data = load(tmp_path / "store")
    train = data.ranks[0].steps.take(data.ranks[0].steps["phase"] == 0)
    doc = json.loads(_json(records_after(data, Cursor())))
    phases = doc["steps"]["phases"]
    assert sorted(phases) == sorted(["data_wait", "forward", "backward", "optimizer", "comm"])
    for name, got in phases.items():
        want = [float(v) if math.isfinite(v) else None for v in train[f"{name}_ns"].tolist()]
        assert got == want, name
    assert len(train) == 30 and any(v is not None and v > 0 for v in phases["data_wait"])
    assert doc["steps"]["window"] == _window(30) == 5
    rest = json.loads(_json(records_after(data, Cursor(after=doc["steps"]["next"]))))
    assert rest["steps"]["index"] == [] and all(v == [] for v in rest["steps"]["phases"].values())
    assert rest["steps"]["window"] == 5
