"""`serve`'s page of a running run redraws its charts as records arrive (issue 43), as W&B's do: a real tiny
training under `stepscope run` (60 steps of 0.2 s, logging its loss), `serve` pointed at its store, the run's
page in headless Chromium. The step-time, throughput and logged-loss charts gain points while the run trains,
without a reload, and hold every step once it ends; then the page stops asking. The records endpoint
(/live/runs/ID/records.json?after=STEP&metrics=ROWS) answers a bad cursor with 400 and one line, an unknown
run with 404, a foreign Host with 421."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.conftest import SCRIPTS
from tests.integration.conftest import browser  # noqa: F401  (the shared headless Chromium fixture)
from tests.integration.test_serve_live import _get, _wait_for_run

STEPS = 60
CHARTS = ("plot-step-time", "plot-throughput")
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
        metric_before = _points(page, ["plot-metric-step-0"])[0]
        grown = _wait(lambda: (p := _points(page, list(CHARTS))) and all(a > b for a, b in zip(p, before)) and p,
                      60, f"the charts growing from {before}")
        assert job.poll() is None, "the run ended before the charts grew: the test saw no live update"
        assert grown[0] > before[0]
        assert job.wait(timeout=180) == 0
        _wait(lambda: _points(page, ["plot-step-time"])[0] == STEPS, 30, f"all {STEPS} steps on the page")
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
