"""Launch statistics: HTA's figures on every fixture, graph launches and MTIA-style device work by hand."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from stepscope.analyze.trace.analysis import analyze_trace
from stepscope.analyze.trace.gpuview import gpu_view
from stepscope.analyze.trace.launches import HTA_LAUNCH_CALLS, launch_stats
from stepscope.traces.kineto import read_trace
from tests.traces.tracebuild import HANDBUILT, ev, fixture_files, graph_trace, kernel, mtia_trace, write

GOLDEN = Path(__file__).resolve().parents[2] / "traces" / "golden"
FILES = fixture_files()


def _golden(path: Path) -> dict[str, Any]:
    gold: dict[str, Any] = json.loads((GOLDEN / f"{path.parent.name}__{path.name.split('.')[0]}.json").read_text())
    return gold["launches"]  # type: ignore[no-any-return]


def _us(ns: float | None) -> float | None:
    return None if ns is None else ns / 1e3


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_launch_stats_equal_hta_on_every_fixture(path: Path) -> None:
    """HTA 0.5's get_cuda_kernel_launch_stats (its own call selection): rows, percentiles, outlier counts."""
    gold = _golden(path)
    table = read_trace(path)
    ls = launch_stats(table, gpu_view(table), calls=HTA_LAUNCH_CALLS)
    if ls is None:  # no GPU work at all
        assert gold["rows"] == 0
        return
    assert ls.matched == gold["rows"] and ls.launches == gold["correlations"]
    for ours, key in ((ls.launch_p50_ns, "cpu_p50_us"), (ls.launch_p95_ns, "cpu_p95_us"),
                      (ls.gpu_p50_ns, "gpu_p50_us"), (ls.gpu_p95_ns, "gpu_p95_us"),
                      (ls.delay_p50_ns, "delay_p50_us"), (ls.delay_p95_ns, "delay_p95_us")):
        if gold[key] is None:
            assert ours is None
        else:
            assert _us(ours) == pytest.approx(gold[key], abs=1e-3), key
    assert ls.short_items == gold["short_kernels"]
    assert ls.long_launches == gold["runtime_outliers"]
    assert ls.long_delays == gold["delay_outliers"]


@pytest.mark.parametrize("name", sorted(HANDBUILT))
def test_launch_stats_equal_hta_on_hand_built_traces(tmp_path: Path, name: str) -> None:
    """The graph launch (HTA pairs only the plain launch) and the MTIA trace (HTA pairs MTIA's launch call)."""
    gold = json.loads((GOLDEN / f"{name}__rank0.json").read_text())["launches"]
    table = read_trace(write(tmp_path / "rank0.json", HANDBUILT[name](), distributedInfo={"rank": 0}))
    ls = launch_stats(table, gpu_view(table), calls=HTA_LAUNCH_CALLS)
    assert ls is not None and ls.matched == gold["rows"]
    assert _us(ls.delay_p50_ns) == pytest.approx(gold["delay_p50_us"])
    assert _us(ls.launch_p50_ns) == pytest.approx(gold["cpu_p50_us"])
    assert _us(ls.gpu_p95_ns) == pytest.approx(gold["gpu_p95_us"])
    assert ls.short_items == gold["short_kernels"] and ls.long_delays == gold["delay_outliers"]
    temporal = json.loads((GOLDEN / f"{name}__rank0.json").read_text())["temporal"]
    tb = analyze_trace(table).temporal  # the device work is GPU work for HTA too (MTIA: A + C compute, dma memory)
    assert tb is not None
    assert tb.window_ns / 1e3 == pytest.approx(temporal["kernel_time(us)"])
    assert tb.compute_ns / 1e3 == pytest.approx(temporal["compute_time(us)"])
    assert tb.idle_ns / 1e3 == pytest.approx(temporal["idle_time(us)"])


def test_delay_is_measured_from_the_call_end_not_its_start() -> None:
    """v100_1rank: the old definition (kernel start − call start) is off HTA's p50; call end matches it."""
    path = next(p for p in FILES if p.parent.name == "v100_1rank")
    table = read_trace(path)
    ls = launch_stats(table, gpu_view(table), calls=HTA_LAUNCH_CALLS)
    assert ls is not None and ls.delay_p50_ns is not None
    gold = _golden(path)
    raw = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    calls = {e["args"]["correlation"]: e for e in raw if e.get("cat") == "cuda_runtime"
             and e.get("name") in HTA_LAUNCH_CALLS and "correlation" in e.get("args", {})}
    work = [e for e in raw if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
            and e.get("args", {}).get("correlation") in calls]
    from_start = np.asarray([e["ts"] - calls[e["args"]["correlation"]]["ts"] for e in work])
    from_end = np.asarray([max(0.0, e["ts"] - calls[e["args"]["correlation"]]["ts"]
                               - calls[e["args"]["correlation"]]["dur"]) for e in work])
    assert float(np.percentile(from_end, 50)) == pytest.approx(gold["delay_p50_us"], abs=1e-3)
    assert abs(float(np.percentile(from_start, 50)) - gold["delay_p50_us"]) > 1.0
    assert ls.delay_p50_ns / 1e3 == pytest.approx(float(np.percentile(from_end, 50)), abs=1e-3)


def test_graph_launches_of_a_real_trace_count_once() -> None:
    """a100_8rank_diff/test_rank3 holds 12 cudaGraphLaunch calls, each launching hundreds of kernels."""
    path = next(p for p in FILES if p.name == "test_rank3.json.gz")
    raw = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    graph = [e for e in raw if e.get("name") == "cudaGraphLaunch" and e.get("ph") == "X"]
    ids = {e["args"]["correlation"] for e in graph}
    launched = [e for e in raw if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
                and e.get("args", {}).get("correlation") in ids]
    long_graph_calls = sum(e["dur"] > 50 for e in graph)
    table = read_trace(path)
    everything = launch_stats(table, gpu_view(table))
    hta = launch_stats(table, gpu_view(table), calls=HTA_LAUNCH_CALLS)
    assert everything is not None and hta is not None
    assert everything.graph_launches == len(graph) == 12 and everything.graph_items == len(launched)
    assert everything.launches == hta.launches + len(graph)  # each graph launch is one launch, not hundreds
    assert everything.long_launches == hta.long_launches + long_graph_calls
    assert everything.matched == hta.matched + len(launched)


def test_one_graph_launch_of_three_kernels_by_hand(tmp_path: Path) -> None:
    """tracebuild.graph_trace(), by hand (µs): cudaGraphLaunch [100, 130) launches G1 [140, 150), G2 [150, 155),
    G3 [155, 157); a plain cudaLaunchKernel [200, 205) launches K [206, 208).
    launches = 2 (the graph counts once); long launches: the graph call, 30 µs, is not > 50 -> 0.
    delays from the call end: G1 10, G2 20, G3 25, K 1 -> sorted 1, 10, 20, 25: p50 = 15.
    launch-bound: the graph's 30 µs shared by 3 kernels = 10 each: G2 (5) and G3 (2) are shorter, G1 (10) is
    not; K (2) < its call (5) -> 3 short items, 9 of 19 µs = 47.37%.
    launch p50 over calls (30, 5) = 17.5."""
    events = graph_trace()
    table = read_trace(write(tmp_path / "rank0.json", events))
    ls = launch_stats(table, gpu_view(table))
    assert ls is not None
    assert (ls.items, ls.matched, ls.launches, ls.graph_launches, ls.graph_items) == (4, 4, 2, 1, 3)
    assert ls.long_launches == 0 and ls.long_delays == 0
    assert ls.delay_p50_ns == 15_000 and ls.launch_p50_ns == 17_500
    assert ls.short_items == 3 and ls.short_item_gpu_pct == pytest.approx(100 * 9 / 19)
    # HTA does not pair graph launches at all: only K is counted
    hta = launch_stats(table, gpu_view(table), calls=HTA_LAUNCH_CALLS)
    assert hta is not None and (hta.matched, hta.launches) == (1, 1)


def test_twenty_graph_launches_of_three_kernels_are_not_sixty_long_launches(tmp_path: Path) -> None:
    """20 graph launches of 60 µs each (long), each launching 3 kernels: 20 long launches, not 60."""
    events: list[dict[str, Any]] = []
    for i in range(20):
        t0 = 1000.0 * i
        events.append(ev("cuda_runtime", "cudaGraphLaunch", t0, 60, correlation=i + 1))
        events += [kernel(f"k{j}", t0 + 61 + 3 * j, 2, i + 1) for j in range(3)]
    table = read_trace(write(tmp_path / "rank0.json", events))
    ls = launch_stats(table, gpu_view(table))
    assert ls is not None and ls.launches == 20 and ls.long_launches == 20 and ls.matched == 60
    assert ls.delay_p50_ns == 4_000  # delays 1, 4, 7 µs per graph


@pytest.mark.parametrize("category", ["mtia_ccp_events", "npu_ccp_events"])
def test_mtia_style_device_events_are_device_work(tmp_path: Path, category: str) -> None:
    table = read_trace(write(tmp_path / "rank0.json", mtia_trace(category)))
    a = analyze_trace(table)
    assert a.gpu_events == 3 and not any("no GPU work" in w for w in a.warnings)
    assert not any("unknown event categories" in w for w in a.warnings)
    t = a.temporal
    assert t is not None and t.window_ns == 30_000 and t.busy_ns == 30_000 and t.idle_ns == 0
    ls = a.launches
    # delays: A 15 − 14 = 1, B 25 − 22 = 3 -> p50 2 µs; C has no call in the trace
    assert ls is not None and (ls.items, ls.matched, ls.launches) == (3, 2, 2) and ls.delay_p50_ns == 2_000
    hta = launch_stats(table, gpu_view(table), calls=HTA_LAUNCH_CALLS)  # HTA pairs MTIA's launch call too
    assert hta is not None and hta.matched == 2


def test_unknown_category_with_device_stream_and_correlation_is_device_work(tmp_path: Path) -> None:
    table = read_trace(write(tmp_path / "rank0.json", mtia_trace("acme_device_ops")))
    a = analyze_trace(table)
    assert a.gpu_events == 3 and not any("unknown event categories" in w for w in a.warnings)


def test_device_work_without_a_stream_arg_uses_its_trace_row(tmp_path: Path) -> None:
    events = mtia_trace()
    for e in events:
        if e["cat"] == "mtia_ccp_events":
            del e["args"]["stream"]
    table = read_trace(write(tmp_path / "rank0.json", events))
    view = gpu_view(table)
    assert len(view) == 3 and set(view.stream.tolist()) == {3}


def test_unknown_category_without_device_args_stays_other(tmp_path: Path) -> None:
    table = read_trace(write(tmp_path / "rank0.json", [ev("mystery", "thing", 1, 2, device=0)]))
    a = analyze_trace(table)
    assert a.gpu_events == 0 and any("unknown event categories kept as 'other': mystery" in w for w in a.warnings)
