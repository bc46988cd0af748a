"""`stepscope dashboard build`: one dashboard for every run name, the regressions page's rows, user mistakes
in one line. Stores are real (tests/report/dashboard/dashstore.py); pages are read as HTML here, and drawn in
Chromium by tests/integration/test_dashboard_browser.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from stepscope.cli import main
from tests.report.dashboard.dashstore import write_history


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    root = tmp_path_factory.mktemp("dash-cli") / "store"
    write_history(root, "aa", commits=10, repeats=3, seed=11)
    shas = write_history(root, "slow", commits=10, repeats=3, factor_from=5, factor=1.2, seed=12)
    return root, shas


def _embedded(html: str, element_id: str) -> dict:
    m = re.search(rf'<script type="application/json" id="{element_id}">(.*?)</script>', html)
    assert m, element_id
    return json.loads(m.group(1))


def test_every_run_name_gets_its_histories(store, tmp_path: Path, capsys) -> None:
    root, shas = store
    out = tmp_path / "site"
    assert main(["dashboard", "build", "--store", str(root), "-o", str(out), "--reports", "0"]) == 0
    printed = capsys.readouterr().out
    assert "60 runs, 2 run names" in printed
    for name in ("aa", "slow"):
        assert (out / "history" / f"step_time_median_s@{name}.html").is_file()
        assert (out / "history" / f"region.work.p50_s@{name}.html").is_file()
    # the runs list is one column table: 60 rows, names dictionary-encoded
    runs = _embedded((out / "index.html").read_text(), "ss-runs")
    assert runs["n"] == 60 and len(runs["cols"]["id"]) == 60 and sorted(runs["dict"]["name"]) == ["aa", "slow"]
    assert sorted(runs["cols"]["name"].count(i) for i in range(2)) == [30, 30]
    nav = _embedded((out / "index.html").read_text(), "ss-nav")
    assert {v["name"]: v["runs"] for v in nav["names"]} == {"aa": 30, "slow": 30}
    # a history's points: one per commit, the step marked at commit 5
    doc = _embedded((out / "history" / "step_time_median_s@slow.html").read_text(), "ss-history")
    assert doc["points"]["n"] == 10 and doc["points"]["cols"]["commit"] == shas
    assert [(s["first_bad"], s["kind"]) for s in doc["steps"]] == [(5, "regression")]
    assert doc["title"] == "step time (median) [s]" and doc["unit"] == "s"


def test_regressions_page_rows(store, tmp_path: Path) -> None:
    root, shas = store
    out = tmp_path / "site"
    assert main(["dashboard", "build", "--store", str(root), "-o", str(out), "--reports", "0"]) == 0
    html = (out / "regressions.html").read_text()
    table = html.split('id="ss-regressions"')[1].split("</table>")[0]
    rows = re.findall(r'<tr data-name="([^"]+)" data-metric="([^"]+)" data-commit="([^"]+)"', table)
    assert rows and {n for n, _, _ in rows} == {"slow"} and {c for _, _, c in rows} == {shas[5]}
    assert 'id="ss-improvements-empty"' in html
    # every listed step links the diff page the build wrote for the runs around it
    for href in re.findall(r'<a class="ss-diff" href="([^"]+)"', table):
        assert (out / href).is_file()
    # a threshold above the injected 20% lists nothing, and says so
    out2 = tmp_path / "site2"
    assert main(["dashboard", "build", "--store", str(root), "-o", str(out2), "--reports", "0",
                 "--max-regression", "30%"]) == 0
    assert 'id="ss-regressions-empty"' in (out2 / "regressions.html").read_text()


@pytest.mark.parametrize(("args", "message"), [
    (["--max-regression", "lots"], "--max-regression 'lots'"),
    (["--name", "nosuch"], "no runs named 'nosuch'"),
    (["--reports", "-1"], "--reports -1"),
])
def test_user_mistakes_are_one_line(store, tmp_path: Path, capsys, args: list[str], message: str) -> None:
    root, _ = store
    rc = main(["dashboard", "build", "--store", str(root), "-o", str(tmp_path / "site"), *args])
    err = capsys.readouterr().err
    assert rc != 0 and message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def _mtimes(out: Path) -> dict[str, int]:
    return {p.relative_to(out).as_posix(): p.stat().st_mtime_ns for p in out.rglob("*.html")}


def test_a_build_of_an_unchanged_store_writes_nothing_and_a_new_run_redoes_what_it_changes(
        tmp_path: Path, capsys) -> None:
    """The second build of the same store writes no file; after one more run, the pages are rewritten with
    it, its report is rendered, the report still among the newest 2 is kept as it was, and the one that fell
    out is deleted."""
    from stepscope.store import open_store
    from tests.report.dashboard.dashstore import DAY_NS, T0, sha, write_run

    root = tmp_path / "store"
    write_history(root, "inc", commits=4, repeats=2, seed=21)
    out = tmp_path / "site"
    args = ["dashboard", "build", "--store", str(root), "-o", str(out), "--reports", "2"]
    assert main(args) == 0
    first = capsys.readouterr().out
    assert "8 runs" in first and "2 reports (2 rendered)" in first
    before = _mtimes(out)
    newest = sorted(p.stem for p in (out / "runs").glob("*.html"))
    assert len(newest) == 2

    assert main(args) == 0
    again = capsys.readouterr().out
    assert "0 files written, pages unchanged since the last build" in again and "2 reports (0 rendered)" in again
    assert _mtimes(out) == before

    st = open_store(root)
    try:
        rows = st.rows()
        kept = rows[0].id  # still among the newest 2 after one more run
        dropped = rows[1].id
        added = write_run(st, name="inc", sha=sha("inc", 4), subject="one more", start_ns=T0 + 4 * DAY_NS,
                          work_ms=25.0, seed=99)
    finally:
        st.close()
    assert main(args) == 0
    third = capsys.readouterr().out
    assert "9 runs" in third and "2 reports (1 rendered)" in third and "1 removed" in third
    after = _mtimes(out)
    assert after[f"runs/{kept}.html"] == before[f"runs/{kept}.html"]  # not rendered again
    assert f"runs/{added}.html" in after and f"runs/{dropped}.html" not in after
    runs = _embedded((out / "index.html").read_text(), "ss-runs")
    assert runs["n"] == 9 and added in runs["cols"]["id"]
    assert after["index.html"] != before["index.html"]

    assert main([*args, "--rebuild"]) == 0  # everything again
    assert "2 reports (2 rendered)" in capsys.readouterr().out


def test_a_damaged_or_hostile_build_record_means_a_full_build(tmp_path: Path, store, capsys) -> None:
    """The record names files a build may delete: one naming a path outside the folder is not trusted."""
    root, _ = store
    out = tmp_path / "site"
    victim = tmp_path / "victim.html"
    victim.write_text("keep me")
    assert main(["dashboard", "build", "--store", str(root), "-o", str(out), "--reports", "0"]) == 0
    record = out / ".stepscope-dashboard.json"
    doc = json.loads(record.read_text())
    doc["pages"].append("../victim.html")
    record.write_text(json.dumps(doc))
    capsys.readouterr()
    assert main(["dashboard", "build", "--store", str(root), "-o", str(out), "--reports", "0"]) == 0
    assert "pages unchanged" not in capsys.readouterr().out and victim.read_text() == "keep me"
    record.write_text("{not json")
    assert main(["dashboard", "build", "--store", str(root), "-o", str(out), "--reports", "0"]) == 0
    assert json.loads(record.read_text())["format"] == 1


def test_serve_builds_once_per_change_of_the_store(tmp_path: Path) -> None:
    """`serve` answers every request of an unchanged store from one build, and the first request after a
    change from a new one that shows it; a run's report page is the same bytes until its run changes."""
    import threading
    import urllib.request
    from http.server import ThreadingHTTPServer

    from stepscope.cli.serve import make_handler
    from stepscope.store import open_store
    from tests.report.dashboard.dashstore import DAY_NS, T0, sha, write_run

    root = tmp_path / "store"
    write_history(root, "srv", commits=3, repeats=2, seed=31)
    handler = make_handler(lambda: open_store(root), None)
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"

    def get(path: str) -> str:
        with urllib.request.urlopen(base + path, timeout=60) as r:
            return r.read().decode()

    try:
        cache = handler.pages  # type: ignore[attr-defined]
        assert _embedded(get("index.html"), "ss-runs")["n"] == 6 and cache.builds == 1
        get("regressions.html")
        get("history/step_time_median_s@srv.html")
        assert _embedded(get("index.html"), "ss-runs")["n"] == 6 and cache.builds == 1
        run_id = open_store(root).rows()[0].id
        report = get(f"runs/{run_id}.html")
        assert get(f"runs/{run_id}.html") == report and "srv" in report
        st = open_store(root)
        try:
            added = write_run(st, name="srv", sha=sha("srv", 3), subject="more", start_ns=T0 + 3 * DAY_NS,
                              work_ms=25.0, seed=5)
        finally:
            st.close()
        runs = _embedded(get("index.html"), "ss-runs")
        assert runs["n"] == 7 and added in runs["cols"]["id"] and cache.builds == 2
        assert get(f"runs/{added}.html").count(added) >= 1
    finally:
        server.shutdown()
        server.server_close()


def test_serve_checks_runs_the_index_still_calls_running(tmp_path: Path) -> None:
    """A run whose index row still says running while its run directory holds its end record (a launcher that
    never updated the index) is listed as its directory says, in the runs list and in /live/status.json."""
    import threading
    import urllib.request
    from http.server import ThreadingHTTPServer

    from stepscope.cli.serve import make_handler
    from stepscope.model.run import RunStatus
    from stepscope.store import open_store

    root = tmp_path / "store"
    write_history(root, "stale", commits=2, repeats=1, seed=41)
    st = open_store(root)
    try:
        row = st.index.runs(limit=1)[0]
        run = st.manifest(row.id)
        assert run.status is RunStatus.RUNNING  # the manifest as the launcher wrote it at the start
        st.index.upsert_run(run, row.path)  # the index now says running; the end record says completed
        assert st.index.runs(limit=1)[0].status == "running"
    finally:
        st.close()
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(lambda: open_store(root), None))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        with urllib.request.urlopen(base + "live/status.json", timeout=60) as r:
            assert json.loads(r.read()) == {"runs": {}}  # ended in 2024: neither running nor recently ended
        with urllib.request.urlopen(base + "index.html", timeout=60) as r:
            runs = _embedded(r.read().decode(), "ss-runs")
        i = runs["cols"]["id"].index(row.id)
        assert runs["dict"]["status"][runs["cols"]["status"][i]] == "completed"
    finally:
        server.shutdown()
        server.server_close()
