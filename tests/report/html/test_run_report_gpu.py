"""The GPU story of the run report (issue 15 item 2): real GPU traces imported into a real run, every trace-engine
section per rank, numbers equal to what `stepscope trace analyze --json` prints for the same file (formatted as the
report formats them), the rank selector of a 2-rank set, the flame graph of a run with stack samples."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from stepscope.app import RunAnalysis
from stepscope.report import format as f
from stepscope.report.html.gpu_sections import BAR_LABEL_LIMIT
from stepscope.report.html.names import LIMIT
from stepscope.report.html.run_report import render_run_report
from tests.conftest import PY, SCRIPTS, TRACES, load, stepscope_cmd


def _cli(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**{k: v for k, v in os.environ.items() if k != "STEPSCOPE_DB"}, "STEPSCOPE_HOME": str(store)}
    return subprocess.run(stepscope_cmd(*args), capture_output=True, text=True, timeout=300, env=env,
                          cwd=store.parent)


@pytest.fixture(scope="module")
def stacks_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real run of tiny_train with Python stacks sampled at 500 Hz (no profiled window of its own)."""
    store = tmp_path_factory.mktemp("gpurep") / "stacks"
    res = _cli(store, "run", "--quiet", "--sample-interval", "0.2", "--sample-stacks", "500", "--", PY,
               str(SCRIPTS / "tiny_train.py"), "--steps", "40")
    assert res.returncode == 0, res.stderr[-3000:]
    return store


def _with_traces(stacks_store: Path, name: str, *files: Path) -> Path:
    """A copy of the stacks run's store with the fixture traces imported (`stepscope import`, rank from the trace)."""
    store = stacks_store.parent / name
    shutil.copytree(stacks_store, store)
    res = _cli(store, "import", "latest", "--accept-misfit", *map(str, files))  # fixtures of other jobs
    assert res.returncode == 0, res.stderr[-3000:]
    return store


@pytest.fixture(scope="module")
def v100_store(stacks_store: Path) -> Path:
    return _with_traces(stacks_store, "v100", TRACES / "v100_1rank" / "rank0.json.gz")


@pytest.fixture(scope="module")
def two_rank_store(stacks_store: Path) -> Path:
    return _with_traces(stacks_store, "tworank", TRACES / "sampled_128rank" / "rank0.json.gz",
                        TRACES / "sampled_128rank" / "rank1.json.gz")


def _analyze_json(*files: Path) -> dict[int, dict[str, Any]]:
    """`stepscope trace analyze --json` of the source files, by rank."""
    res = subprocess.run(stepscope_cmd("trace", "analyze", "--json", *map(str, files)), capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    return {r["rank"]: r for r in json.loads(res.stdout)["ranks"]}


class _Tables(HTMLParser):
    """Every <table> of a page by id: rows of (cell text, cell title)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[tuple[str, str | None]]]] = {}
        self._id: str | None = None
        self._row: list[tuple[str, str | None]] | None = None
        self._cell: list[str] | None = None
        self._title: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "table" and a.get("id"):
            self._id = a["id"]
            self.tables[self._id] = []
        elif tag == "tr" and self._id:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell, self._title = [], a.get("title")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append(("".join(self._cell).strip(), self._title))
            self._cell = None
        elif tag == "tr" and self._row is not None and self._id:
            self.tables[self._id].append(self._row)
            self._row = None
        elif tag == "table":
            self._id = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _tables(html: str) -> dict[str, list[list[str]]]:
    p = _Tables()
    p.feed(html)
    return {k: [[c for c, _ in row] for row in rows] for k, rows in p.tables.items()}


def _titles(html: str, table_id: str) -> list[str | None]:
    p = _Tables()
    p.feed(html)
    return [row[0][1] for row in p.tables[table_id][1:]]


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{v:.1f}%"


def _report(store: Path) -> str:
    return render_run_report(RunAnalysis(load(store)))


def test_v100_every_gpu_section_with_trace_analyze_figures(v100_store: Path) -> None:
    html = _report(v100_store)
    j = _analyze_json(TRACES / "v100_1rank" / "rank0.json.gz")[0]
    t = _tables(html)
    for tid in ("temporal-r0", "idle-r0", "steps-r0", "components-r0", "kernels-r0", "copies-r0", "ops-r0"):
        assert tid in t, tid
    for div in ("launches-r0", "overlap-r0", "plot-temporal-r0", "plot-steps-r0", "plot-kernels-r0"):
        assert f'id="{div}"' in html, div

    tp = j["temporal"]
    temporal = {row[0]: row[1:] for row in t["temporal-r0"][1:]}
    assert temporal["computation"] == [f.duration_ns(tp["compute_ns"]), _pct(tp["compute_pct"])]
    assert temporal["idle"] == [f.duration_ns(tp["idle_ns"]), _pct(tp["idle_pct"])]
    assert temporal["communication and memory not under computation"] == [
        f.duration_ns(tp["non_compute_ns"]), _pct(tp["non_compute_pct"])]
    assert temporal["window"] == [f.duration_ns(tp["window_ns"]), "100.0%"]

    tot = j["idle"]["totals"]
    n = len(j["idle"]["streams"])
    assert t["idle-r0"][-1] == [f"sum over {n} stream{'s' if n != 1 else ''}", *(f.duration_ns(tot[k]) for k in
                                                 ("host_wait_ns", "kernel_wait_ns", "other_ns", "idle_ns"))]

    steps = j["steps"]["steps"]
    assert len(t["steps-r0"]) - 1 == len(steps) == 5
    cats = t["steps-r0"][0][2:]
    assert set(cats) == set(steps[0]["breakdown_ns"])
    for row, s in zip(t["steps-r0"][1:], steps):
        assert row[:2] == [f"{s['step']:,}", f.duration_ns(s["dur_ns"])]
        assert row[2:] == [f.duration_ns(s["breakdown_ns"][c]) for c in cats]

    comps = {row[0]: row for row in t["components-r0"][1:]}
    for c in j["kernels"]["by_component"]:
        assert comps[c["key"]][1:4] == [f"{c['count']:,}", f.duration_ns(c["sum_ns"]), f.duration_ns(c["mean_ns"])]
        assert comps[c["key"]][-1] == _pct(c["pct"])

    kernels = j["kernels"]["by_kernel"]
    rows = t["kernels-r0"][1:]
    assert len(rows) == len(kernels) == 79
    full = [r or n for r, n in zip(_titles(html, "kernels-r0"), (row[0] for row in rows))]
    assert full == [k["key"] for k in kernels]  # the full name on hover, in trace-analyze order
    assert [row[3] for row in rows] == [f.duration_ns(k["sum_ns"]) for k in kernels]
    shown = [row[0] for row in rows]
    assert len(set(shown)) == len(shown) and max(map(len, shown)) <= LIMIT
    vec = [s for s, k in zip(shown, kernels) if "vectorized_elementwise_kernel" in k["key"]]
    assert len(vec) >= 3 and len(set(vec)) == len(vec)  # the rows that used to look identical

    spec = re.search(r'id="plot-kernels-r0"><figcaption>.*?</figcaption><script type="application/json" '
                     r'class="ss-spec">(.*?)</script>', html)
    assert spec is not None
    bars = json.loads(spec.group(1))
    labels = bars["categories"]
    assert len(labels) == 15 and len(set(labels)) == 15 and max(map(len, labels)) <= BAR_LABEL_LIMIT
    assert bars["series"][0]["values"] == [k["sum_ns"] for k in kernels[:15]]

    copies = {row[0]: row for row in t["copies-r0"][1:]}
    for c in j["copies"]:
        assert copies[c["direction"]][1:3] == [f"{c['count']:,}", f.duration_ns(c["dur_ns"])]
        assert copies[c["direction"]][4] == f"{c['bandwidth_gbps']:,.1f} GB/s"

    ls = j["launches"]
    launches = html[html.index('id="launches-r0"'):]
    assert f"p50 {f.duration_ns(ls['delay_p50_ns'])} · p95 {f.duration_ns(ls['delay_p95_ns'])}" in launches[:3000]
    assert f"{ls['items']:,} ({ls['matched']:,} paired" in launches[:3000]
    u = j["utilization"]
    overlap = html[html.index('id="overlap-r0"'):][:3000]
    assert f"<td>{_pct(u['sm_efficiency_pct'])}</td>" in overlap
    assert f"<td>{_pct(u['achieved_occupancy_pct'])}</td>" in overlap

    ops = {row[0]: row for row in t["ops-r0"][1:]}
    for o in j["operators"][:20]:
        assert ops[o["name"]][2:7] == [f"{o['calls']:,}", f.duration_ns(o["cpu_total_ns"]),
                                       f.duration_ns(o["cpu_self_ns"]), f.duration_ns(o["device_total_ns"]),
                                       f.duration_ns(o["device_self_ns"])]
    assert "No nn.Module events in this trace" in html  # the fixture has none; the reason is given
    assert "rank-select-gpu" not in html  # one rank: no selector


def test_two_rank_set_has_a_rank_selector_and_each_rank_s_figures(two_rank_store: Path) -> None:
    html = _report(two_rank_store)
    files = [TRACES / "sampled_128rank" / f"rank{r}.json.gz" for r in (0, 1)]
    j = _analyze_json(*files)
    sel = re.search(r'<select class="ss-rank-select" data-group="gpu" id="rank-select-gpu">(.*?)</select>', html)
    assert sel is not None
    assert re.findall(r'<option value="(\d+)">', sel.group(1)) == ["0", "1"]
    assert '<div class="ss-rank-block" data-group="gpu" data-rank="0">' in html
    assert '<div class="ss-rank-block" data-group="gpu" data-rank="1" hidden>' in html
    t = _tables(html)
    ranks = {row[0]: row for row in t["gpu-ranks"][1:]}
    for r in (0, 1):
        o = j[r]["overlap"]
        assert ranks[str(r)][6] == _pct(o["overlap_pct"])
        assert ranks[str(r)][5] == f.duration_ns(o["communication_ns"])
        overlap = html[html.index(f'id="overlap-r{r}"'):][:3000]
        assert (f"<td>{f.duration_ns(o['overlap_ns'])} ({_pct(o['overlap_pct'])})</td>" in overlap)
        assert f"<td>{f.duration_ns(o['exposed_ns'])}</td>" in overlap
        tp = j[r]["temporal"]
        temporal = {row[0]: row[1:] for row in t[f"temporal-r{r}"][1:]}
        assert temporal["idle"] == [f.duration_ns(tp["idle_ns"]), _pct(tp["idle_pct"])]
        assert len(t[f"steps-r{r}"]) - 1 == j[r]["steps"]["count"]


def test_a100_nccl_trace_shows_communication_and_its_overlap(stacks_store: Path) -> None:
    src = TRACES / "a100_2rank_nccl" / "rank0.json.gz"
    html = _report(_with_traces(stacks_store, "a100", src))
    j = _analyze_json(src)[0]
    t = _tables(html)
    comm = next(row for row in t["components-r0"][1:] if row[0] == "communication")
    c = next(c for c in j["kernels"]["by_component"] if c["key"] == "communication")
    assert comm[2] == f.duration_ns(c["sum_ns"])
    nccl = [i for i, k in enumerate(j["kernels"]["by_kernel"]) if k["key"].startswith("ncclKernel")]
    assert nccl and t["kernels-r0"][1 + nccl[0]][0].startswith("ncclKernel_AllReduce")
    o = j["overlap"]
    assert f"<td>{f.duration_ns(o['overlap_ns'])} ({_pct(o['overlap_pct'])})</td>" in html


def test_flame_graph_of_the_sampled_stacks(stacks_store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from html import escape

    from stepscope.analyze.run.hostprof import NO_REGION, stack_rows
    from stepscope.report.html import flamegraph

    data = load(stacks_store)
    html = render_run_report(RunAnalysis(data))
    assert '<section class="ss-section" id="flamegraph">' in html and '<a href="#flamegraph">' in html
    assert len(html.encode()) < 1_500_000
    assert 'placeholder="search frames"' in html and ">reset zoom</button>" in html
    # the root frames' widths are their share of the samples, summed here from the stored rows
    rows = stack_rows(data.rank(0))
    total = sum(n for *_, n in rows)
    regions: dict[str, int] = {}
    for region, _, _, n in rows:
        regions[region or NO_REGION] = regions.get(region or NO_REGION, 0) + n
    for region, n in regions.items():
        if n / total >= 0.001:
            block = r'data-d="0" style="left:[\d.]+%;width:([\d.]+)%[^>]*>region:'
            m = re.search(block + re.escape(escape(region)) + "<", html)
            assert m is not None, region
            assert float(m.group(1)) == pytest.approx(100 * n / total, abs=1e-3)
    # the collapsed export is embedded when small enough, else the page names the command that writes it
    embedded = 'data-name="stacks-rank0-context.collapsed"' in html
    assert embedded or "--format collapsed" in html
    if not embedded:
        monkeypatch.setattr(flamegraph, "MAX_EMBEDDED_EXPORT", 10**9)
        html = render_run_report(RunAnalysis(data))
    # the embedded collapsed export holds every sample
    link = re.search(r'<script type="application/json" id="flame-r0-collapsed">(.*?)</script>', html)
    assert link is not None and 'data-name="stacks-rank0-context.collapsed"' in html
    text = json.loads(link.group(1))
    assert sum(int(line.rsplit(" ", 1)[1]) for line in text.splitlines()) == total
    assert "--format collapsed" in html


def test_no_flame_graph_without_stack_samples(profiled_store: Path) -> None:
    html = _report(profiled_store)
    assert 'id="flamegraph"' not in html


def test_profiled_run_report_is_small_and_carries_the_window_s_operators(profiled_store: Path) -> None:
    html = _report(profiled_store)
    assert len(html.encode()) < 1_500_000
    run_dir = next((profiled_store / "runs").iterdir())
    j = _analyze_json(run_dir / "artifacts" / "traces" / "rank0.json.gz")[0]
    ops = {row[0]: row for row in _tables(html)["ops-r0"][1:]}
    top = j["operators"][0]
    assert ops[top["name"]][3:5] == [f.duration_ns(top["cpu_total_ns"]), f.duration_ns(top["cpu_self_ns"])]
    steps = _tables(html)["steps-r0"][1:]
    assert [r[1] for r in steps] == [f.duration_ns(s["dur_ns"]) for s in j["steps"]["steps"]]


@pytest.fixture
def browser() -> Any:
    """Headless Chromium (skips where chromium or playwright is missing)."""
    from tests.integration.conftest import CHROMIUM

    if CHROMIUM is None:
        pytest.skip("chromium is not installed — the real-browser test needs it")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (python) is not installed")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


@pytest.mark.browser
def test_rank_selector_and_flame_zoom_and_search_in_chromium(two_rank_store: Path, browser: Any, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from stepscope.report.html import flamegraph
    from tests.integration.conftest import OfflinePage

    # how many distinct stacks a sampled run holds depends on the machine: embed them whatever their size
    monkeypatch.setattr(flamegraph, "MAX_EMBEDDED_EXPORT", 10**9)
    path = tmp_path / "report.html"
    path.write_text(_report(two_rank_store), encoding="utf-8")
    op = OfflinePage(browser, width=1400)
    page = op.page
    page.goto(path.as_uri())
    block = '.ss-rank-block[data-group="gpu"][data-rank="{}"]'
    assert page.is_visible(block.format(0)) and not page.is_visible(block.format(1))
    page.select_option("#rank-select-gpu", "1")
    assert page.is_visible(block.format(1)) and not page.is_visible(block.format(0))
    assert page.is_visible("#temporal-r1") and not page.is_visible("#temporal-r0")

    # zoom: a frame narrower than the graph widens to the full width, its siblings leave; reset brings all back
    frames = page.locator("#flame-r0 .ss-fr")
    count = frames.count()
    # the widest phase-level frame narrower than the graph (the first can be a sliver under a pixel wide, which
    # its neighbour covers: a click then lands on the neighbour)
    widest = page.evaluate("""() => { const ws = [...document.querySelectorAll('#flame-r0 .ss-fr[data-d="1"]')]
        .map(e => parseFloat(e.dataset.w)); let best = 0;
        ws.forEach((w, i) => { if (w < 0.999 && (ws[best] >= 0.999 || w > ws[best])) best = i; }); return best; }""")
    narrow = page.locator('#flame-r0 .ss-fr[data-d="1"]').nth(widest)
    w = float(narrow.get_attribute("data-w") or 1)
    assert w < 0.999, "the stack samples split at the phase level"
    def width() -> float:
        return float(narrow.evaluate("e => e.style.width").rstrip("%"))

    narrow.click()
    assert width() == 100.0
    hidden = page.evaluate("() => [...document.querySelectorAll('#flame-r0 .ss-fr')]"
                           ".filter(e => e.style.display === 'none').length")
    assert hidden > 0
    page.click('.ss-flamebar[data-for="flame-r0"] button')
    assert width() == pytest.approx(100 * w, abs=1e-3)
    assert page.evaluate("() => [...document.querySelectorAll('#flame-r0 .ss-fr')]"
                         ".filter(e => e.style.display === 'none').length") == 0
    # search: frames whose name holds the text are highlighted and counted
    page.fill('.ss-flamebar[data-for="flame-r0"] input', "phase:")
    hits = page.locator("#flame-r0 .ss-fr.hit").count()
    expected = sum(1 for i in range(count) if "phase:" in (frames.nth(i).text_content() or ""))
    assert hits == expected > 0
    assert page.text_content('.ss-flamebar[data-for="flame-r0"] span') == f"{hits} matching frame" + (
        "" if hits == 1 else "s")
    # the collapsed stacks download as a file, every sample in it
    with page.expect_download() as dl:
        page.click('button.ss-flame-dl[data-src="flame-r0-collapsed"]')
    assert dl.value.suggested_filename == "stacks-rank0-context.collapsed"
    saved = Path(dl.value.path()).read_text(encoding="utf-8")
    assert saved.splitlines()[0].startswith("region:") and all(
        line.rsplit(" ", 1)[1].isdigit() for line in saved.splitlines())
    assert op.errors == [] and op.requests == []


def test_shortened_names_keep_their_full_name_escaped_on_hover() -> None:
    from stepscope.report.html.names import short_names
    from stepscope.report.html.tables import Col, table

    hostile = "void evil_kernel<\"><script>alert(1)</script>, " + "x" * 80 + ">(int)"
    names = [hostile, hostile.replace("alert(1)", "alert(2)")]
    shorts = short_names(names)
    assert len(set(shorts)) == 2 and all(len(s) <= LIMIT for s in shorts)
    html = table([Col("name", "kernel", "text", title_key="full")],
                 [{"name": s, "full": n} for s, n in zip(shorts, names)])
    assert "<script>" not in html and html.count('title="void evil_kernel&lt;&quot;&gt;&lt;script&gt;') == 2


def test_profiled_run_shows_its_module_tree(profiled_store: Path) -> None:
    html = _report(profiled_store)
    run_dir = next((profiled_store / "runs").iterdir())
    mods = _analyze_json(run_dir / "artifacts" / "traces" / "rank0.json.gz")[0]["modules"]
    assert mods, "the profiled window records nn.Module calls (with_stack)"
    rows = _tables(html)["modules-r0"][1:]
    assert [r[0].lstrip("▾▸") for r in rows] == [m["path"][-1] for m in mods]
    assert [r[1:] for r in rows] == [[f"{m['calls']:,}", f.duration_ns(m["cpu_ns"]), f.duration_ns(m["device_ns"])]
                                     for m in mods]
    for m in mods:  # children under their parent
        parent = "/".join(m["path"][:-1])
        assert f'data-id="{"/".join(m["path"])}" data-parent="{parent}"' in html
