"""Critical path: hand-built traces whose path is worked out by hand, and HTA's own result on every fixture
(goldens made by tests/traces/golden/make_golden_critical_path.py with HolisticTraceAnalysis 0.5.0).

Tolerance against HTA: the path's length and each kind of its breakdown within 0.01% of the length. HTA keeps
edge weights between -1 and 0 µs as they are (a child that ends a few ns after its parent in ns-resolution
traces) where stepscope counts 0, so its path is a few µs shorter per 100 ms (v100_1rank: 31 µs of 479 ms).
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from stepscope.analyze.trace.analysis import analyze_trace
from stepscope.analyze.trace.critical_path import CriticalPath, critical_path
from stepscope.analyze.trace.critical_path_graph import EdgeKind, build_graph, host_rows, step_window
from stepscope.analyze.trace.critical_path_ranks import cross_rank_path
from stepscope.analyze.trace.multirank import combine
from stepscope.analyze.trace.nesting import parents_walk
from stepscope.model.events import EventKind, EventTable
from stepscope.traces.kineto import read_trace
from tests.traces.tracebuild import ev, fixture_files, kernel, launch, write

GOLDEN = Path(__file__).resolve().parents[2] / "traces" / "golden"
FILES = fixture_files()
HTA_KINDS = {"cpu_bound": ("cpu",), "gpu_compute_bound": ("gpu_compute", "gpu_memory"),
             "gpu_communication_bound": ("gpu_communication",), "gpu_kernel_kernel_overhead": ("kernel_gap",),
             "gpu_kernel_launch_overhead": ("launch_delay",)}


def _golden(path: Path) -> dict[str, Any]:
    out: dict[str, Any] = json.loads((GOLDEN / f"{path.parent.name}__{path.name.split('.')[0]}__critical_path.json")
                                     .read_text())
    return out


def _path(tmp_path: Path, events: list[dict[str, Any]]) -> tuple[EventTable, CriticalPath]:
    table = read_trace(write(tmp_path / "rank0.json", events, distributedInfo={"rank": 0}))
    cp = critical_path(table)
    assert cp is not None
    return table, cp


def _sync(name: str, ts: float, dur: float, corr: int, stream: int = 7) -> dict[str, Any]:
    return ev("cuda_sync", name, ts, dur, pid=0, tid=stream, stream=stream, device=0, correlation=corr,
              cuda_sync_kind=name)


def sync_trace() -> list[dict[str, Any]]:
    """µs. Thread: ``step`` [0, 100) launches K1 (cudaLaunchKernel [10, 15)) and waits for it in
    cudaStreamSynchronize [20, 90); K1 runs [20, 80) on stream 7; the Stream Sync record ends at 89.

    Host only, the path is 100 - 70 (the blocking call's wait weighs 0) = 30. Through the GPU:
    step start -> launch start (10) -> K1 start (launch delay 10) -> K1 end (60) -> sync -> wait end ->
    step end (10) = 90 µs: cpu 20, launch delay 10, GPU compute 60.
    """
    return [ev("cpu_op", "step", 0, 100), launch(10, 5, 1),
            ev("cuda_runtime", "cudaStreamSynchronize", 20, 70, correlation=2),
            kernel("gemm_kernel", 20, 60, 1), _sync("Stream Sync", 80, 9, 2)]


def test_sync_edge_moves_the_path_onto_the_gpu(tmp_path: Path) -> None:
    table, cp = _path(tmp_path, sync_trace())
    assert cp.length_ns == 90_000
    b = cp.breakdown_ns
    assert (b["cpu"], b["launch_delay"], b["gpu_compute"], b["kernel_gap"]) == (20_000, 10_000, 60_000, 0)
    names = [table.names[int(table["name"][r])] for r in cp.event_rows]
    assert names == ["step", "cudaLaunchKernel", "gemm_kernel", "cudaStreamSynchronize"]
    assert EdgeKind.SYNC in cp.edge_kind.tolist()


def test_without_the_sync_record_the_wait_is_not_followed(tmp_path: Path) -> None:
    """The same trace without the Stream Sync record: no GPU -> host edge; the longest path ends at K1's end
    (10 + 10 + 60 = 80 µs) and the blocking wait is in no path."""
    _, cp = _path(tmp_path, sync_trace()[:-1])
    assert cp.length_ns == 80_000
    assert cp.breakdown_ns["cpu"] == 10_000


def two_stream_trace() -> list[dict[str, Any]]:
    """µs. ``step`` [0, 200): launches K1 (stream 7, [20, 120)) at [10, 12), K2 (stream 8, [20, 50)) at
    [14, 16), K3 (stream 8, [60, 170)) at [18, 20); cudaDeviceSynchronize [30, 190) (Context Sync record
    [185, 189)) waits for every stream.

    Queue of stream 8: +1 at 14, +1 at 18, -1 at 20 (K2 starts with K3 queued behind it: no launch edge,
    and no earlier item: K2 starts a chain), -1 at 60 (K3 was launched onto a busy queue: the gap edge from
    K2). Paths: via K1 10 + 10 + 100 + 10 = 130; via stream 8 K2 (30) + gap (10) + K3 (110) + sync + step's
    end (10) = 160; host alone 200 - 160 = 40. Longest: 160 = GPU compute 140, kernel gap 10, cpu 10.
    """
    return [ev("cpu_op", "step", 0, 200), launch(10, 2, 1), launch(14, 2, 2), launch(18, 2, 3),
            ev("cuda_runtime", "cudaDeviceSynchronize", 30, 160, correlation=4),
            kernel("k1", 20, 100, 1, stream=7), kernel("k2", 20, 30, 2, stream=8), kernel("k3", 60, 110, 3, stream=8),
            _sync("Context Sync", 185, 4, 4, stream=7)]


def test_two_streams_the_busier_queue_wins(tmp_path: Path) -> None:
    table, cp = _path(tmp_path, two_stream_trace())
    assert cp.length_ns == 160_000
    b = cp.breakdown_ns
    assert (b["gpu_compute"], b["kernel_gap"], b["cpu"], b["launch_delay"]) == (140_000, 10_000, 10_000, 0)
    names = [table.names[int(table["name"][r])] for r in cp.event_rows]
    assert names == ["k2", "k3", "cudaDeviceSynchronize", "step"]
    top = {(t.name, t.kind): t.time_ns for t in cp.top}
    assert top[("k3", "gpu_compute")] == 110_000 and top[("k2", "gpu_compute")] == 30_000 + 10_000 - 10_000
    assert top[("k2", "kernel_gap")] == 10_000  # a gap is attributed to the item before it (as HTA)


def test_nested_operators_split_time_by_exclusive_time(tmp_path: Path) -> None:
    """CPU only. Thread 1: A [0, 50) holding B [10, 20) and C [30, 45); then D [60, 70) after a 10 µs gap
    (not work: dependency edge). Thread 2: E [0, 55). Path: thread 1, 50 + 10 = 60 > 55;
    time on path: A 10 + 10 + 5 = 25, B 10, C 15, D 10."""
    _, cp = _path(tmp_path, [ev("cpu_op", "A", 0, 50), ev("cpu_op", "B", 10, 10), ev("cpu_op", "C", 30, 15),
                             ev("cpu_op", "D", 60, 10), ev("cpu_op", "E", 0, 55, tid=2)])
    assert cp.length_ns == 60_000 and cp.breakdown_ns["cpu"] == 60_000
    top = {t.name: t.time_ns for t in cp.top}
    assert top == {"A": 25_000, "C": 15_000, "B": 10_000, "D": 10_000}
    assert cp.span_ns == 70_000  # first node to last: the 10 µs gap is on the span, not in the length


def _collective(launch_at: float, ts: float, dur: float, corr: int) -> list[dict[str, Any]]:
    args: dict[str, Any] = {"Collective name": "allreduce", "Process Group Name": "0", "Process Group Ranks": "[0, 1]",
            "Group size": 2, "In msg nelems": 1024, "Out msg nelems": 1024, "dtype": "Float"}
    return [launch(launch_at, 2, corr), kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", ts, dur, corr, **args)]


def two_rank_set(tmp_path: Path) -> dict[int, CriticalPath | None]:
    """µs. Two all-reduces per rank on stream 7, then cudaDeviceSynchronize (Context Sync) and the step's end.

    Rank 0: step [0, 700); all-reduce #0 launched at 95, runs [100, 400) (it waits for rank 1); #1 launched at
    300, queued behind it, runs [400, 450); sync [310, 690). Path: 95 + 5 (launch) + 300 + 0 (gap) + 50 +
    10 (sync end to step end) = 460 µs; host alone 700 - 380 = 320.
    Rank 1: arrives at #0 at 350 (launched at 345), runs [350, 400); #1 [400, 440); sync [370, 685) in a step
    [0, 695): path 345 + 5 + 50 + 40 + 10 = 450. Rank 0 is the slowest and waited 350 - 100 = 250 µs for
    rank 1 in all-reduce #0; at #1 both arrived at 400.
    """
    plan = {0: (95.0, 100.0, 300.0, 310.0, 690.0, 700.0, 50.0), 1: (345.0, 350.0, 50.0, 370.0, 685.0, 695.0, 40.0)}
    paths = {}
    for rank, (l1, k1, d1, sync_at, sync_end, step_end, d2) in plan.items():
        events = [ev("cpu_op", "step", 0, step_end), *_collective(l1, k1, d1, 1), *_collective(l1 + 15, 400, d2, 2),
                  ev("cuda_runtime", "cudaDeviceSynchronize", sync_at, sync_end - sync_at, correlation=3),
                  _sync("Context Sync", sync_end - 5, 4, 3)]
        (tmp_path / str(rank)).mkdir()
        paths[rank] = critical_path(read_trace(write(tmp_path / str(rank) / "rank.json", events,
                                                     distributedInfo={"rank": rank, "world_size": 2})))
    return paths


def test_cross_rank_wait_names_the_late_rank(tmp_path: Path) -> None:
    paths = two_rank_set(tmp_path)
    p0, p1 = paths[0], paths[1]
    assert p0 is not None and p1 is not None
    assert (p0.length_ns, p1.length_ns) == (460_000, 450_000)
    assert [(c.name, c.instance) for c in p0.collectives] == [("allreduce", 0), ("allreduce", 1)]
    assert p0.breakdown_ns["gpu_communication"] == 350_000
    cross = cross_rank_path(paths)
    assert cross is not None and cross.slowest_rank == 0
    assert [(w.rank, w.waited_for, w.instance, w.wait_ns) for w in cross.waits] == [(0, 1, 0, 250_000)]
    assert cross.waits[0].text() == "rank 0 waited 0.250 ms for rank 1 in allreduce #0"


def test_cross_rank_needs_two_paths() -> None:
    assert cross_rank_path({0: None}) is None


def _root_sums(table: EventTable) -> int:
    """Busiest thread's summed root durations, roots found by the stack walk (the definition)."""
    rows = host_rows(table)
    ts, end = table["ts_ns"][rows], table["ts_ns"][rows] + table["dur_ns"][rows]
    par = parents_walk(table["pid"][rows], table["tid"][rows], ts, end, table["kind"][rows] == EventKind.RUNTIME)
    roots = par < 0
    keys = table["pid"][rows][roots] * 2**20 + table["tid"][rows][roots]
    sums: dict[int, int] = {}
    for k, d in zip(keys.tolist(), (end - ts)[roots].tolist()):
        sums[k] = sums.get(k, 0) + d
    return max(sums.values())


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_matches_hta(path: Path) -> None:
    gold = _golden(path)
    table = read_trace(path)
    cp = critical_path(table)
    assert cp is not None
    if "error" in gold:
        # HTA fails without GPU work (its queue-length series is None); the path is then the busiest thread's
        # top-level operators end to end
        assert not (table["kind"] == EventKind.KERNEL).any()
        assert cp.length_ns == _root_sums(table)
        return
    length = gold["length_us"] * 1e3
    tol = 1e-4 * length
    assert cp.length_ns == pytest.approx(length, abs=tol)
    graph_launch = any("GraphLaunch" in n for n in table.names)
    syncs = int((table["kind"] == EventKind.SYNC).sum())
    if graph_launch:  # HTA keeps one kernel per launching call: a CUDA graph's other kernels are not in its graph
        assert cp.graph_nodes > gold["graph_nodes"]
        return
    assert cp.graph_nodes + 2 * syncs == gold["graph_nodes"]  # HTA adds cuda_sync records as unlinked nodes
    for hta_kind, ours in HTA_KINDS.items():
        assert sum(cp.breakdown_ns[k] for k in ours) == pytest.approx(gold["breakdown_us"].get(hta_kind, 0) * 1e3,
                                                                       abs=tol), hta_kind


def test_event_rows_are_path_nodes_in_time_order(tmp_path: Path) -> None:
    table, cp = _path(tmp_path, two_stream_trace())
    ts = table["ts_ns"][cp.event_rows]
    assert cp.event_rows.size == np.unique(cp.event_rows).size
    assert ts[0] == 20_000 and int(cp.edge_weight.sum()) == cp.length_ns


def test_trace_set_names_the_wait(tmp_path: Path) -> None:
    """The same two ranks through the trace-set machinery (analyze_trace per rank, combine): the set's JSON
    carries the cross-rank path."""
    two_rank_set(tmp_path)
    analyses = [analyze_trace(read_trace(tmp_path / str(r) / "rank.json"), with_critical_path=True) for r in (0, 1)]
    s = combine(analyses)
    assert s.critical_path is not None
    d = s.to_dict()["critical_path"]
    assert d["slowest_rank"] == 0 and d["lengths_ns"] == {"0": 460_000, "1": 450_000}
    assert [w["text"] for w in d["waits"]] == ["rank 0 waited 0.250 ms for rank 1 in allreduce #0"]
    assert s.to_dict()["ranks"][0]["critical_path"]["length_ns"] == 460_000


def _text(renderable: Any) -> str:
    from rich.console import Console

    console = Console(width=160, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def test_terminal_shows_the_path_and_the_wait(tmp_path: Path) -> None:
    from stepscope.report.trace_terminal import summary_view, traceset_view

    two_rank_set(tmp_path)
    analyses = [analyze_trace(read_trace(tmp_path / str(r) / "rank.json"), with_critical_path=True) for r in (0, 1)]
    out = _text(summary_view(analyses[0]))
    assert "critical path: 460.0 µs" in out
    assert "GPU communication" in out and "350.0 µs" in out and "76.1%" in out  # 350 of 460
    assert "rank 0 waited 0.250 ms for rank 1 in allreduce #0" in _text(traceset_view(combine(analyses)))


def test_gpu_work_without_host_events_has_no_path(tmp_path: Path) -> None:
    """Kernels only (a trace recorded without CPU activities): no host node, so no path, and the rest of the
    analysis still runs."""
    table = read_trace(write(tmp_path / "rank0.json", [kernel("k1", 10, 5, 1), kernel("k2", 20, 5, 2)]))
    assert critical_path(table) is None
    assert analyze_trace(table, with_critical_path=True).critical_path is None


def test_report_table(tmp_path: Path) -> None:
    from stepscope.report.html.critical_path import critical_path_html

    _, cp = _path(tmp_path, two_stream_trace())
    html = critical_path_html(cp, 0)
    assert "160.0 µs over 4 events" in html
    assert html.index("GPU compute") < html.index("gap between kernels")  # 140 µs before 10 µs
    assert "87.5%" in html and "6.2%" in html  # 140 and 10 of 160


def sync_loop_trace(n: int) -> list[dict[str, Any]]:
    """µs. ``loop`` [0, 100 n) holds n cycles, cycle i at b = 100 i: cudaLaunchKernel [b, b+2) -> kernel
    [b+5, b+65); cudaStreamSynchronize [b+3, b+70) waits for it (Stream Sync record ending at b+69).
    Per cycle the path runs launch start -> kernel start (launch delay 5) -> kernel end (60) -> sync -> the
    wait's end -> next launch (30 of ``loop``), the last cycle's 30 to ``loop``'s end: 95 n µs, each cycle one
    more hop between the host and the GPU."""
    events = [ev("cpu_op", "loop", 0, 100 * n)]
    for i in range(n):
        b = 100 * i
        events += [launch(b, 2, 2 * i + 1), kernel("k", b + 5, 60, 2 * i + 1),
                   ev("cuda_runtime", "cudaStreamSynchronize", b + 3, 67, correlation=2 * i + 2),
                   _sync("Stream Sync", b + 64, 5, 2 * i + 2)]
    return events


def test_many_hops_fall_back_to_one_topological_pass(tmp_path: Path) -> None:
    from stepscope.analyze.trace.critical_path import MAX_ROUNDS, longest
    from stepscope.analyze.trace.critical_path_graph import build_graph

    n = 80  # more hops than MAX_ROUNDS rounds settle
    table, cp = _path(tmp_path, sync_loop_trace(n))
    assert n > MAX_ROUNDS and cp.rounds == MAX_ROUNDS
    assert cp.length_ns == 95_000 * n
    b = cp.breakdown_ns
    assert (b["launch_delay"], b["gpu_compute"], b["cpu"]) == (5_000 * n, 60_000 * n, 30_000 * n)
    g = build_graph(table)
    assert np.array_equal(longest(g).dist, longest(g, max_rounds=10 * n).dist)  # both ways agree everywhere


def test_a_cycle_is_no_path() -> None:
    from stepscope.analyze.trace.critical_path import CycleError, longest
    from stepscope.analyze.trace.critical_path_graph import PathGraph

    def a(*v: int) -> Any:
        return np.asarray(v, dtype=np.int64)

    g = PathGraph(node_row=a(0, 0), node_start=np.asarray([True, False]),
                  linked=np.asarray([False, True]), w_in=a(0, 10), kind_in=np.asarray([0, 0], np.int8),
                  attr_in=a(-1, 0), cross_src=a(1), cross_dst=a(0), cross_w=a(0),
                  cross_kind=np.asarray([5], np.int8), notes=())
    with pytest.raises(CycleError):
        longest(g)


def test_cli_critical_path_on_request(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """`stepscope trace analyze --critical-path` on the two ranks: terminal and JSON; without the flag none."""
    from stepscope.cli import main

    monkeypatch.setenv("COLUMNS", "200")
    two_rank_set(tmp_path)
    paths = [str(tmp_path / str(r) / "rank.json") for r in (0, 1)]
    assert main(["trace", "analyze", "--workers", "1", "--critical-path", *paths]) == 0
    out = capsys.readouterr().out
    assert "critical path: 460.0 µs" in out and "critical path: 450.0 µs" in out
    assert "rank 0 waited 0.250 ms for rank 1 in allreduce #0" in out
    assert main(["trace", "analyze", "--workers", "1", "--json", "--critical-path", *paths]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["critical_path"]["waits"][0]["wait_ns"] == 250_000
    assert [r["critical_path"]["length_ns"] for r in doc["ranks"]] == [460_000, 450_000]
    assert main(["trace", "analyze", "--workers", "1", "--json", *paths]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["critical_path"] is None and doc["ranks"][0]["critical_path"] is None


def test_segment_by_segment_when_offsets_would_overflow() -> None:
    """Weights near 2^59 ns: ``segments * bound`` passes int64, so the running maxima go segment by segment;
    the distances are the topological pass's. Three chains: 0-1, 2-3, 4-5; cross edges 1->2 and 3->4."""
    from stepscope.analyze.trace.critical_path import longest, topological_longest
    from stepscope.analyze.trace.critical_path_graph import PathGraph

    big = 2**59

    def a(*v: int) -> Any:
        return np.asarray(v, dtype=np.int64)

    g = PathGraph(node_row=a(0, 0, 1, 1, 2, 2), node_start=np.asarray([True, False] * 3),
                  linked=np.asarray([False, True] * 3), w_in=a(0, big, 0, 7, 0, big),
                  kind_in=np.zeros(6, np.int8), attr_in=a(-1, 0, -1, 1, -1, 2), cross_src=a(1, 3),
                  cross_dst=a(2, 4), cross_w=a(5, 0), cross_kind=np.asarray([3, 5], np.int8), notes=())
    lp = longest(g)
    assert lp.dist.tolist() == topological_longest(g).tolist() == [0, big, big + 5, big + 12, big + 12, 2 * big + 12]


def test_a_long_hop_chain_does_not_leak_into_the_next_segment() -> None:
    """Five 2-node chains of 10 ns, each end leading to the next chain's start (distances 10, 20, ..., 50), then
    a chain of weight 0 that nothing leads to: its distances are 0 (a running maximum carried over from the
    chains before it would make them up to 40)."""
    from stepscope.analyze.trace.critical_path import longest, topological_longest
    from stepscope.analyze.trace.critical_path_graph import PathGraph

    n = 6

    def a(v: list[int]) -> Any:
        return np.asarray(v, dtype=np.int64)

    g = PathGraph(node_row=a([i // 2 for i in range(2 * n)]), node_start=np.asarray([True, False] * n),
                  linked=np.asarray([False, True] * n),
                  w_in=a([0, 10] * (n - 1) + [0, 0]), kind_in=np.zeros(2 * n, np.int8),
                  attr_in=a([-1] * (2 * n)), cross_src=a([2 * i + 1 for i in range(n - 2)]),
                  cross_dst=a([2 * i + 2 for i in range(n - 2)]), cross_w=a([0] * (n - 2)),
                  cross_kind=np.full(n - 2, 3, np.int8), notes=())
    want = [0, 10, 10, 20, 20, 30, 30, 40, 40, 50, 0, 0]
    assert longest(g).dist.tolist() == topological_longest(g).tolist() == want


def test_report_gpu_section_shows_the_path(tmp_path: Path) -> None:
    """The run report's GPU section: the path's table under the rank's timeline, computed from the table when
    the analysis has none (opt-in), and the same path as the analysis's when it has one."""
    from stepscope.analyze.advisor import Advice
    from stepscope.report.html.gpu_sections import gpu_section

    table = read_trace(write(tmp_path / "rank0.json", two_stream_trace(), distributedInfo={"rank": 0}))
    advice = Advice(findings=(), checked=(), notes=())
    for a in (analyze_trace(table), analyze_trace(table, with_critical_path=True)):
        html = gpu_section({0: a}, [], advice, tables={0: table})
        assert "<h3>Critical path</h3>" in html and "160.0 µs over 4 events" in html
        assert html.index("Critical path") < html.index("Temporal breakdown")
    assert "Critical path" not in gpu_section({0: analyze_trace(table)}, [], advice)  # no table, no path


def test_cross_rank_says_when_clocks_disagree() -> None:
    """sampled_128rank's ranks 0 and 1: at one of the three SendRecv kernels on rank 0's path (#6) rank 1 starts
    24.2 ms after rank 0's kernel has ended, so the clocks disagree and no wait is given (the collectives
    analysis finds the same on these files: 6 of 10 instances)."""
    folder = next(p.parent for p in FILES if p.parent.name == "sampled_128rank")
    paths = {r: critical_path(read_trace(folder / f"rank{r}.json.gz")) for r in (0, 1)}
    cross = cross_rank_path(paths)
    assert cross is not None and cross.slowest_rank == 0
    assert [(c.name, c.instance) for c in paths[0].collectives] == [  # type: ignore[union-attr]
        ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t", i) for i in (6, 7, 8)]
    assert (cross.collectives_on_path, cross.unmatched, cross.clock_breaks) == (3, 0, 1)
    assert not cross.clocks_aligned and cross.waits == ()
    from stepscope.report.trace_terminal import cross_rank_view

    assert "the ranks' clocks disagree" in _text(cross_rank_view(cross))


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_first_profiler_step_matches_hta(path: Path) -> None:
    """HTA's default window, the first ProfilerStep (``step_window``): the same graph and path as HTA's, within
    0.05% of the length: the step is a fifth of the trace, and HTA's negative sub-µs weights cost the same 31 µs
    there (v100_1rank, all of it CPU time), as do test_rank3's graph launches (47 µs)."""
    gold = _golden(path).get("step0")
    table = read_trace(path)
    window = step_window(table)
    if gold is None or "error" in gold:  # HTA fails on the trace, or it has no ProfilerStep (a100_alexnet)
        assert window is None or not (table["kind"] == EventKind.KERNEL).any()
        return
    assert window is not None
    cp = critical_path(table, window=window)
    assert cp is not None
    length = gold["length_us"] * 1e3
    assert cp.length_ns == pytest.approx(length, abs=5e-4 * length)
    if any("GraphLaunch" in n for n in table.names):
        return  # HTA keeps one kernel per graph launch (see test_matches_hta)
    assert cp.graph_nodes == gold["graph_nodes"]
    for hta_kind, ours in HTA_KINDS.items():
        assert sum(cp.breakdown_ns[k] for k in ours) == pytest.approx(gold["breakdown_us"].get(hta_kind, 0) * 1e3,
                                                                       abs=5e-4 * length), hta_kind


def test_cli_critical_path_of_one_step(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`--critical-path-step 0` on sampled_128rank/rank0: HTA's first-step path (267,581 µs, golden step0) in the
    step's window (ProfilerStep#... [..098079292, ..098686604] µs: 607.312 ms)."""
    from stepscope.cli import main

    monkeypatch.setenv("COLUMNS", "200")
    path = next(str(p) for p in FILES if p.parent.name == "sampled_128rank" and p.name.startswith("rank0"))
    assert main(["trace", "analyze", "--workers", "1", "--json", "--critical-path-step", "0", path]) == 0
    cp = json.loads(capsys.readouterr().out)["ranks"][0]["critical_path"]
    assert cp["length_ns"] == 267_581_000 and cp["window_ns"][1] - cp["window_ns"][0] == 607_312_000
    assert main(["trace", "analyze", "--workers", "1", "--critical-path-step", "0", path]) == 0
    assert "critical path in a 607.31 ms window: 267.58 ms" in capsys.readouterr().out
    assert main(["trace", "analyze", "--workers", "1", "--critical-path-step", "-1", path]) == 2


def test_report_names_the_wait_across_ranks(tmp_path: Path) -> None:
    from stepscope.analyze.advisor import Advice
    from stepscope.report.html.gpu_sections import gpu_section

    two_rank_set(tmp_path)
    tables = {r: read_trace(tmp_path / str(r) / "rank.json") for r in (0, 1)}
    html = gpu_section({r: analyze_trace(t) for r, t in tables.items()}, [], Advice(findings=(), checked=(), notes=()),
                       tables=tables)
    assert "rank 0 has the longest (460.0 µs), with 2 collective kernels on it" in html
    assert "rank 0 waited 0.250 ms for rank 1 in allreduce #0" in html.replace("<wbr>", "")
    assert html.index("Ranks compared") < html.index("Critical path across ranks") < html.index("Rank 0:")


def test_operators_on_the_path_pay_for_the_work_they_launched(tmp_path: Path) -> None:
    """The sync trace with External ids: ``train`` (ext 5) holds ``aten::mm`` (ext 6) [8, 18), which launches the
    kernel (the call and the kernel carry ext 6). Path 90 µs: train start -> mm start (8, train's) -> call start
    (2, mm's) -> kernel start (launch delay 10) -> kernel end (60) -> sync -> wait's end -> train's end (10,
    train's). So ``aten::mm`` 2 + 10 + 60 = 72 µs, ``train`` 18 µs; the call itself none (the path leaves it at
    its start)."""
    events = [ev("cpu_op", "train", 0, 100, **{"External id": 5}), ev("cpu_op", "aten::mm", 8, 10,
                                                                     **{"External id": 6}),
              launch(10, 5, 1, 6), ev("cuda_runtime", "cudaStreamSynchronize", 20, 70, correlation=2),
              kernel("gemm_kernel", 20, 60, 1, **{"External id": 6}), _sync("Stream Sync", 80, 9, 2)]
    _, cp = _path(tmp_path, events)
    assert cp.length_ns == 90_000
    ops = {o.name: o.time_ns for o in cp.operators}
    assert ops == {"aten::mm": 72_000, "train": 18_000}
    assert sum(ops.values()) == cp.length_ns
    from stepscope.report.html.critical_path import critical_path_html
    from stepscope.report.trace_terminal import critical_path_view

    out = _text(critical_path_view(cp))
    assert "operators, with the GPU work they launched" in out and "80.0%" in out  # aten::mm: 72 of 90
    html = critical_path_html(cp, 0)
    assert 'id="cp-ops-0"' in html and "72.0 µs" in html and cp.to_dict()["operators"][0]["name"] == "aten::mm"


def _sync_edge_list(table: EventTable, g: Any) -> list[list[Any]]:
    """The graph's sync edges as the goldens list them (names cut to 80 characters, starts in whole µs: HTA holds
    a few runtime calls' starts in whole µs, e.g. a100_alexnet's cudaStreamSynchronize at ...955056.2 µs)."""
    sync = np.flatnonzero(g.cross_kind == EdgeKind.SYNC)
    out = []
    for s, d in zip(g.cross_src[sync].tolist(), g.cross_dst[sync].tolist()):
        out.append([x for n in (s, d) for x in (table.names[table["name"][g.node_row[n]]][:80],
                                               round(int(table["ts_ns"][g.node_row[n]]) / 1e3),
                                               bool(g.node_start[n]))])
    return sorted(out)


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_sync_edges_are_htas(path: Path) -> None:
    """Every sync edge HTA draws (Stream / Context Sync to the waiting call, Event Sync to cudaEventSynchronize,
    Stream Wait Event from the kernel before the cudaEventRecord to the next kernel launched on the waiting
    stream), edge for edge; a100_alexnet has 6 Stream Wait Event edges among its 31."""
    gold = _golden(path)
    if "error" in gold:
        return
    table = read_trace(path)
    ours = _sync_edge_list(table, build_graph(table))
    theirs = [[e[0], round(e[1]), e[2], e[3], round(e[4]), e[5]] for e in gold["sync_edges"]]
    assert ours == sorted(theirs)


def test_alexnet_path_follows_the_stream_waits() -> None:
    """a100_alexnet: HTA's graph (its 6 GPU -> GPU edges included) gives its path: the same events by name."""
    path = next(p for p in FILES if p.parent.name == "a100_alexnet")
    gold = _golden(path)
    table = read_trace(path)
    gpu_gpu = [e for e in gold["sync_edges"] if e[5]]  # to a kernel's start: Stream Wait Event
    assert len(gpu_gpu) == 6
    cp = critical_path(table)
    assert cp is not None
    names = [table.names[n] for n in table["name"][cp.event_rows].tolist()]
    counts = {n: names.count(n) for n in set(names)}
    assert counts == gold["path_events_by_name"]
