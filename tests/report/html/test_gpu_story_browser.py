"""The GPU sections of the run report as a person sees them, in headless Chromium at 1400 and 800 px: the report of
a real profiled CPU run, and the GPU section of the v100_1rank and a100_2rank_nccl fixtures, a built A100 trace
whose operators have roofline models (the real fixtures record no Input Dims for their modelled operators), a
built trace with allocation records, and the 2-rank sampled_128rank set. Each section — timeline, critical path,
launch queue, memory over time, roofline table and chart, collectives across ranks — is on screen under its
heading with a figure equal to what `stepscope trace analyze --json` prints for the same file; no number is cut
(pagefit's checks), no console error, no network request."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stepscope.analyze.advisor import Advice
from stepscope.analyze.trace.analysis import analyze_trace
from stepscope.analyze.trace.critical_path import critical_path
from stepscope.app import RunAnalysis
from stepscope.executor.traceset import analyze_traceset
from stepscope.report import format as f
from stepscope.report.html import Section, render_page
from stepscope.report.html.collectives import NO_SKEW
from stepscope.report.html.gpu_sections import RANK_CSS, RANK_JS, gpu_section
from stepscope.report.html.run_report import render_run_report
from stepscope.traces.kineto import read_trace
from tests.analyze.trace.test_counters_handbuilt import memory_trace
from tests.analyze.trace.test_roofline import A100_40, _roofline_trace
from tests.conftest import TRACES, load, stepscope_cmd
from tests.integration.conftest import browser  # noqa: F401  (the shared headless Chromium fixture)
from tests.report.html.chromium import Viewer
from tests.report.html.pagefit import PAGE_FIT_JS
from tests.traces.tracebuild import PROFILER_SPAN, write

pytestmark = pytest.mark.browser
ADVICE = Advice(findings=(), checked=(), notes=())
SHOWN_JS = """(sel) => {
  const e = document.querySelector(sel);
  if (!e) return null;
  e.scrollIntoView({block: 'center'});
  const b = e.getBoundingClientRect();
  const shown = b.width > 0 && b.height > 0 && b.left >= 0 && b.left < window.innerWidth;
  return {shown: shown, text: e.innerText || e.textContent};
}"""
HEADINGS_JS = "() => [...document.querySelectorAll('h3')].filter(h => h.getClientRects().length).map(h => h.innerText)"


def _analyze(*files: Path) -> dict[str, Any]:
    """`stepscope trace analyze --json --critical-path` of the files (one trace set)."""
    res = subprocess.run(stepscope_cmd("trace", "analyze", "--json", "--critical-path", *map(str, files)),
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    out: dict[str, Any] = json.loads(res.stdout)
    return out


def _rank(path: Path, rank: int) -> str:
    """One rank's GPU section as the run report draws it (its critical path computed once, given to it)."""
    table = read_trace(path, rank=rank)
    return gpu_section({rank: analyze_trace(table)}, [], ADVICE, {rank: table}, paths={rank: critical_path(table)})


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory, profiled_store: Path) -> Iterator[dict[str, Path]]:
    tmp = tmp_path_factory.mktemp("gpustory")
    out = {"run": tmp / "run.html", "v100": tmp / "v100.html", "gpu": tmp / "gpu.html", "ranks": tmp / "ranks.html"}
    out["run"].write_text(render_run_report(RunAnalysis(load(profiled_store))))
    built = {3: _roofline_trace(tmp / "roofline.json", A100_40),
             1: write(tmp / "memory.json", [PROFILER_SPAN, *memory_trace()])}
    # both fixtures are rank 0 (their distributedInfo): a page each, the built traces beside a100
    for name, fixtures in (("v100", {0: TRACES / "v100_1rank" / "rank0.json.gz"}),
                           ("gpu", {0: TRACES / "a100_2rank_nccl" / "rank0.json.gz", **built})):
        out[name].write_text(render_page(name, [Section(f"r{r}", p.name, _rank(p, r)) for r, p in fixtures.items()],
                                         extra_css=RANK_CSS, extra_js=RANK_JS))
    pair = [TRACES / "sampled_128rank" / f"rank{r}.json.gz" for r in (0, 1)]
    s = analyze_traceset(pair, workers=1)
    tables = {r: read_trace(p) for r, p in enumerate(pair)}
    out["ranks"].write_text(render_page("ranks", [Section("ranks", "ranks", gpu_section(
        {a.rank: a for a in s.ranks}, [], ADVICE, tables, collectives=s.collectives))],
        extra_css=RANK_CSS, extra_js=RANK_JS))
    yield out


def _look(browser: Any, page_file: Path, width: int) -> tuple[Any, Viewer]:  # noqa: F811
    viewer = Viewer(browser, width)
    page = viewer.open(page_file)
    page.wait_for_timeout(200)  # charts and timelines draw on load
    assert page.evaluate(PAGE_FIT_JS, width < 1000) == []  # a hidden rank's tiles are not rendered: skipped
    return page, viewer


def _shown(page: Any, sel: str) -> str:
    got = page.evaluate(SHOWN_JS, sel)
    assert got is not None and got["shown"], sel
    return str(got["text"])


@pytest.mark.parametrize("width", [1400, 800])
def test_profiled_cpu_run(browser: Any, pages: dict[str, Path], profiled_store: Path,  # noqa: F811
                          width: int) -> None:
    run_dir = next((profiled_store / "runs").iterdir())
    j = _analyze(run_dir / "artifacts" / "traces" / "rank0.json.gz")["ranks"][0]
    page, viewer = _look(browser, pages["run"], width)
    heads = page.evaluate(HEADINGS_JS)
    assert "Critical path" in heads
    cp = j["critical_path"]
    timeline = _shown(page, "#timeline-r0")
    assert f"critical path ({len(cp['event_rows']):,} events marked red)" in timeline
    assert f"{f.duration_ns(cp['length_ns'])} over {len(cp['event_rows']):,} events" in page.inner_text("#kernels")
    top = max(cp["breakdown_ns"].values())  # the path's largest kind, in its table
    assert f.duration_ns(top) in _shown(page, "#cp-kinds-0")
    assert viewer.errors == [] and viewer.requests == [] and viewer.refused == []


@pytest.mark.parametrize("width", [1400, 800])
def test_fixture_gpu_sections(browser: Any, pages: dict[str, Path], tmp_path: Path, width: int) -> None:  # noqa: F811
    page, viewer = _look(browser, pages["v100"], width)
    heads = page.evaluate(HEADINGS_JS)
    for h in ("Critical path", "Launch queue length", "Operators on the roofline"):
        assert h in heads, h
    # v100: timeline with its critical path marked, the path's GPU compute, stream 7's queue peak
    v100 = _analyze(TRACES / "v100_1rank" / "rank0.json.gz")["ranks"][0]
    cp = v100["critical_path"]
    assert f"critical path ({len(cp['event_rows']):,} events marked red)" in _shown(page, "#timeline-r0")
    kinds = _shown(page, "#cp-kinds-0")
    assert f.duration_ns(cp["breakdown_ns"]["gpu_compute"]) in kinds
    q = v100["queues"]["streams"][0]
    queue = _shown(page, "#queue-table-r0")
    assert f"{q['max']:g}" in queue.replace(",", "")
    _shown(page, "#queue-r0 canvas")
    assert viewer.errors == [] and viewer.requests == [] and viewer.refused == []
    page, viewer = _look(browser, pages["gpu"], width)
    heads = page.evaluate(HEADINGS_JS)
    for h in ("Critical path", "Memory over time", "Operators on the roofline"):
        assert h in heads, h
    # a100: its path's length; the roofline table of its operators and one line why no chart (no Input Dims)
    a100 = _analyze(TRACES / "a100_2rank_nccl" / "rank0.json.gz")["ranks"][0]
    assert f.duration_ns(a100["critical_path"]["length_ns"]) in page.inner_text("#r0")
    assert f.duration_ns(a100["roofline"]["ops"][0]["gpu_ns"]) in _shown(page, "#roofline-r0")
    assert "No roofline chart: no operator group has a FLOPs and bytes model" in page.inner_text("#r0")
    # the built A100 trace: aten::mm at 137 TFLOP/s in the table and a point on the chart, under its roofs
    roof = _analyze(_roofline_trace(tmp_path / "roofline.json", A100_40))["ranks"][0]["roofline"]
    mm = roof["ops"][0]
    rows = {line.split("\t")[0]: line.split("\t") for line in _shown(page, "#roofline-r3").splitlines()}
    assert mm["name"] == "aten::mm" and float(rows["aten::mm"][5]) == pytest.approx(mm["tflops"], rel=5e-3)  # 3 digits
    chart = _shown(page, "#roofline-chart-r3")
    assert "bf16 matrix 312 TFLOP/s" in chart
    assert page.locator("#roofline-chart-r3 circle").count() == sum(1 for o in roof["ops"] if o["tflops"])
    # memory over time: the chart drawn and the peak's figure
    mem = _analyze(write(tmp_path / "memory.json", [PROFILER_SPAN, *memory_trace()]))["ranks"][0]["memory"]
    cpu = next(d for d in mem["devices"] if d["device"] < 0)
    _shown(page, "#memory-r1-cpu canvas")
    assert f"peak {cpu['peak_bytes']:,} B allocated" in page.inner_text("#r1")
    assert viewer.errors == [] and viewer.requests == [] and viewer.refused == []


@pytest.mark.parametrize("width", [1400, 800])
def test_collectives_across_ranks(browser: Any, pages: dict[str, Path], width: int) -> None:  # noqa: F811
    page, viewer = _look(browser, pages["ranks"], width)
    assert "Collectives across ranks" in page.evaluate(HEADINGS_JS)
    j = _analyze(*[TRACES / "sampled_128rank" / f"rank{r}.json.gz" for r in (0, 1)])["collectives"]
    assert j["clocks_aligned"] is False
    sizes = _shown(page, "#collectives-sizes")
    b = j["by_size"][0]
    assert b["kind"] in sizes and f"{b['count']}" in sizes
    assert NO_SKEW in page.inner_text("#ranks")
    ranks = _shown(page, "#collectives-ranks")
    assert all(f"{r['instances']}" in ranks for r in j["per_rank"])
    assert viewer.errors == [] and viewer.requests == [] and viewer.refused == []
