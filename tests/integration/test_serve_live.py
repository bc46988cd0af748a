"""Issue 17, live view in `serve`: a real running run (tiny training under `stepscope run`) is marked running
in the runs list, its figures come from /live/runs/ID.json and grow while it trains, and its report page in
a real Chromium updates its live banner without a reload (CSP allows only this server), then says the run
finished. The host check covers the live endpoints too."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from stepscope.cli.serve import with_live
from tests.conftest import SCRIPTS

STEPS = 50


def _get(base: str, path: str, host: str | None = None) -> tuple[int, str, str]:
    req = urllib.request.Request(base + path, headers={"Host": host} if host else {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read().decode()


def _wait_text(page: Any, selector: str, ok: Any, timeout: float = 30) -> str:
    """The text of ``selector`` once ``ok(text)`` holds, polled from Python (the page's CSP forbids the
    eval that Playwright's wait_for_function needs: that is the point of it)."""
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        loc = page.locator(selector)
        text = loc.first.inner_text() if loc.count() else ""
        if ok(text):
            return text
        time.sleep(0.3)
    raise AssertionError(f"{selector}: {text!r} after {timeout} s")


def _wait_for_run(store: Path) -> str:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        files = list((store / "runs").glob("*/ranks/rank-*.jsonl")) if (store / "runs").is_dir() else []
        if files and files[0].stat().st_size > 0:
            return files[0].parent.parent.name
        time.sleep(0.2)
    raise AssertionError("no run appeared in 120 s")


def test_the_live_script_never_closes_its_script_element() -> None:
    page = with_live("<html><head><meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
                     "script-src 'unsafe-inline'\"></head><body><p>x</p></body></html>", "abc")
    assert page.count("</script>") == 2 and "connect-src 'self'" in page  # the JSON element and the script
    assert page.index("<p>x</p>") < page.index('id="ss-live"') < page.index("</body>")


def test_serve_follows_a_running_run(tmp_path: Path, browser: Any) -> None:
    store = tmp_path / "store"
    job = subprocess.Popen([sys.executable, "-m", "stepscope", "run", "--store", str(store), "--quiet", "--",
                            sys.executable, str(SCRIPTS / "tiny_train.py"), "--steps", str(STEPS),
                            "--step-sleep", "0.25"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    server: subprocess.Popen[str] | None = None
    try:
        run_id = _wait_for_run(store)
        server = subprocess.Popen([sys.executable, "-m", "stepscope", "serve", "--store", str(store), "--port", "0"],
                                  stderr=subprocess.PIPE, text=True)
        assert server.stderr is not None
        line = server.stderr.readline()
        base = re.search(r"(http://\S+)/", line).group(1)  # type: ignore[union-attr]
        status, ctype, body = _get(base, "/live/status.json")
        assert status == 200 and ctype == "application/json" and json.loads(body) == {"runs": {run_id: "running"}}
        assert _get(base, "/live/status.json", host="evil.example")[0] == 421
        assert _get(base, "/live/runs/nosuchrun.json")[0] == 404
        _, _, index = _get(base, "/index.html")
        runs = json.loads(re.search(r'id="ss-runs"[^>]*>(.*?)</script>', index, re.S).group(1))  # type: ignore[union-attr]
        cols = runs["cols"]  # the dashboard's column table: status is dictionary-encoded
        assert [runs["dict"]["status"][cols["status"][i]] for i, r in enumerate(cols["id"]) if r == run_id] == [
            "running"]
        first = json.loads(_get(base, f"/live/runs/{run_id}.json")[2])
        time.sleep(3)
        second = json.loads(_get(base, f"/live/runs/{run_id}.json")[2])
        assert first["status"] == second["status"] == "running"
        assert second["steps"] > first["steps"], (first, second)

        page = browser.new_page()
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.goto(f"{base}/runs/{run_id}.html")
        text = _wait_text(page, "#ss-live-banner", lambda t: "steps/s" in t)
        n1 = int(re.search(r"(\d+) steps", text).group(1))  # type: ignore[union-attr]
        _wait_text(page, "#ss-live-banner", lambda t: int(re.search(r"(\d+) steps", t).group(1)) > n1)  # type: ignore[union-attr]
        listing = browser.new_page()
        listing.goto(f"{base}/index.html")
        cell = f'tr[data-run="{run_id}"] td:nth-child(3)'
        assert _wait_text(listing, cell, lambda t: t == "● running") == "● running"
        assert listing.locator(cell).get_attribute("class") == "text ss-running"

        assert job.wait(timeout=180) == 0
        banner = _wait_text(page, "#ss-live-banner", lambda t: "finished" in t)
        assert banner.startswith(f"finished: completed after {STEPS} steps"), banner
        _wait_text(listing, cell, lambda t: t == "completed")
        assert json.loads(_get(base, "/live/status.json")[2]) == {"runs": {run_id: "completed"}}
        final = json.loads(_get(base, f"/live/runs/{run_id}.json")[2])
        assert final["status"] == "completed" and final["steps"] == STEPS
        assert not errors, errors
    finally:
        for proc in (job, server):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=20)
