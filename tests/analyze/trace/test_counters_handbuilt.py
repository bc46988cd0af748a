"""Queue length, copy bandwidth, memory timeline, kernel sequences and annotations on hand-built traces whose
figures are derived by hand (in each test's docstring), read by both trace readers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from stepscope.analyze.trace.annotations import gpu_annotations
from stepscope.analyze.trace.bandwidth import bandwidth
from stepscope.analyze.trace.memory_timeline import memory_timeline
from stepscope.analyze.trace.queues import HTA_QUEUE_CALLS, queue_lengths
from stepscope.analyze.trace.sequences import kernel_sequences
from stepscope.model.events import EventTable
from stepscope.traces import compiled
from stepscope.traces.kineto import read_trace
from tests.traces.tracebuild import PROFILER_SPAN, ev, graph_trace, kernel, launch, write

READERS = ["python", "c"] if compiled.AVAILABLE else ["python"]


def _read(tmp_path: Path, events: list[dict[str, Any]], reader: str) -> EventTable:
    return read_trace(write(tmp_path / "rank0.json", [PROFILER_SPAN, *events]), reader=reader)


@pytest.mark.parametrize("reader", READERS)
def test_queue_reaches_three_pending(tmp_path: Path, reader: str) -> None:
    """Launches at 10, 11, 12 µs; their kernels start at 20, 30, 40 on stream 7. Pending: 1 at 10, 2 at 11,
    3 at 12, 2 at 20, 1 at 30, 0 at 40. HTA's mean over the six changes: 9/6 = 1.5; over time [10, 40]:
    (1·1 + 2·1 + 3·8 + 2·10 + 1·10) / 30 = 1.9. At or above 3: [12, 20) = 8 µs; at or above 2: [11, 30) = 19 µs.
    A kernel on stream 9 launched at 13, started at 14: its own queue, max 1."""
    events = [launch(10, 0.5, 1), launch(11, 0.5, 2), launch(12, 0.5, 3), launch(13, 0.5, 4),
              kernel("k1", 20, 5, 1), kernel("k2", 30, 5, 2), kernel("k3", 40, 5, 3), kernel("k4", 14, 1, 4, stream=9)]
    table = _read(tmp_path, events, reader)
    q = queue_lengths(table, threshold=3)
    assert q is not None and [s.stream for s in q.streams] == [7, 9]
    s7, s9 = q.streams
    assert s7.ts_ns.tolist() == [10_000, 11_000, 12_000, 20_000, 30_000, 40_000]
    assert s7.length.tolist() == [1, 2, 3, 2, 1, 0]
    assert s7.max == 3 and s7.mean == pytest.approx(1.5) and s7.changes == 6
    assert s7.time_mean == pytest.approx(1.9)
    assert s7.full_ns == 8_000
    assert queue_lengths(table, threshold=2).streams[0].full_ns == 19_000  # type: ignore[union-attr]
    assert s9.max == 1 and s9.length.tolist() == [1, 0]


def test_graph_launch_is_one_queue_entry(tmp_path: Path) -> None:
    """graph_trace: cudaGraphLaunch at 100 µs launches G1 (starts 140), G2, G3; a plain launch at 200 starts K at
    206. The graph is one entry until G1 starts: 1 on [100, 140), 0, 1 on [200, 206), 0 (never 3). HTA's calls
    leave the graph launch out: only [200, 206)."""
    table = read_trace(write(tmp_path / "rank0.json", graph_trace()))
    q = queue_lengths(table)
    assert q is not None and q.launches == 2
    (s,) = q.streams
    assert s.ts_ns.tolist() == [100_000, 140_000, 200_000, 206_000] and s.length.tolist() == [1, 0, 1, 0]
    hta = queue_lengths(table, calls=HTA_QUEUE_CALLS)
    assert hta is not None and hta.streams[0].ts_ns.tolist() == [200_000, 206_000]


@pytest.mark.parametrize("reader", READERS)
def test_copy_bandwidth_by_hand(tmp_path: Path, reader: str) -> None:
    """HtoD copy A [0, 1000) µs of 1 MiB and B [500, 1500) of 2 MiB, neither with a bandwidth arg: A moves
    1,048,576 B / 10^6 ns = 1.048576 GB/s, B 2.097152 GB/s; together 3.145728 on [500, 1000). A DtoH copy with
    Kineto's arg 7.5 GB/s keeps it (its bytes / duration would say 0.001). Average HtoD: 3 MiB over the 1500 µs
    some copy ran = 2.097152 GB/s."""
    events = [ev("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 0, 1000, pid=0, tid=7, bytes=1 << 20, stream=7,
                 device=0),
              ev("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 500, 1000, pid=0, tid=7, bytes=2 << 20, stream=7,
                 device=0),
              ev("gpu_memcpy", "Memcpy DtoH (Device -> Pinned)", 2000, 1, bytes=1, pid=0, tid=7,
                 **{"memory bandwidth (GB/s)": 7.5, "stream": 7, "device": 0})]
    bw = bandwidth(_read(tmp_path, events, reader))
    assert bw is not None and bw.from_bytes == 2
    dtoh, htod = bw.kinds
    assert (dtoh.kind, htod.kind) == ("Memcpy DtoH", "Memcpy HtoD")
    assert htod.ts_ns.tolist() == [0, 500_000, 1_000_000, 1_500_000]
    np.testing.assert_allclose(htod.gbps, [1.048576, 3.145728, 2.097152, 0.0], rtol=1e-12)
    assert htod.gbps[-1] == 0.0  # exactly zero once both copies ended
    assert htod.count == 3 and htod.max == pytest.approx(3.145728)
    assert htod.average_gbps == pytest.approx(2.097152) and htod.busy_ns == 1_500_000
    assert dtoh.max == 7.5 and dtoh.items == 1


def _mem(ts: float, delta: int, total: int, addr: int, *, reserved: int = 0, key: str = "Bytes",
         cat: str = "cpu_instant_event", device: int = -1, dtype: int = 0) -> dict[str, Any]:
    return {"ph": "i", "cat": cat, "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": ts,
            "args": {"Total Reserved": reserved, "Total Allocated": total, key: delta, "Device Id": device,
                     "Device Type": dtype, "Addr": addr}}


def memory_trace(key: str = "Bytes", cat: str = "cpu_instant_event") -> list[dict[str, Any]]:
    """4096 B allocated before the trace. "## fwd ##" [90, 500) holds aten::linear [100, 200) (calling aten::empty
    [110, 115)) and aten::relu [300, 400). Records: 112 +1000 @1 (5096), 150 +500 @2 (5596), 310 +2000 @3 (7596:
    the peak, in aten::relu), 320 -1000 @1 (6596), 350 +100 @4 (6696). Live at the peak: aten::linear 1500 B
    (2 allocations), aten::relu 2000 B; 3500 = 7596 - 4096. CUDA device 0 has one record at 600, outside every
    host event: 8 MiB reserved, no owner."""
    return [
        ev("user_annotation", "## fwd ##", 90, 410),
        ev("cpu_op", "aten::linear", 100, 100), ev("cpu_op", "aten::empty", 110, 5),
        ev("cpu_op", "aten::relu", 300, 100),
        _mem(112, 1000, 5096, 1, key=key, cat=cat), _mem(150, 500, 5596, 2, key=key, cat=cat),
        _mem(310, 2000, 7596, 3, key=key, cat=cat), _mem(320, -1000, 6596, 1, key=key, cat=cat),
        _mem(350, 100, 6696, 4, key=key, cat=cat),
        _mem(600, 512, 512, 9, reserved=8 << 20, key=key, cat=cat, device=0, dtype=1),
    ]


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize(("key", "cat"), [("Bytes", "cpu_instant_event"), ("Bytes Delta", "[memory]")])
def test_memory_timeline_peak_and_owner(tmp_path: Path, reader: str, key: str, cat: str) -> None:
    mt = memory_timeline(_read(tmp_path, memory_trace(key, cat), reader))
    assert mt is not None and mt.records == 6
    cpu, cuda = mt.devices
    assert (cpu.device_type, cpu.device, cuda.device_type, cuda.device) == ("cpu", -1, "cuda", 0)
    assert cpu.allocated.tolist() == [5096, 5596, 7596, 6596, 6696]
    assert cpu.peak_bytes == 7596 and cpu.peak_ts_ns == 310_000 and cpu.before_bytes == 4096
    assert (cpu.peak_owner, cpu.peak_top_op, cpu.peak_annotation) == ("aten::relu", "aten::relu", "## fwd ##")
    assert (cpu.allocations, cpu.frees) == (4, 1)
    assert [(o.name, o.bytes, o.count) for o in cpu.live_at_peak] == [("aten::relu", 2000, 1),
                                                                     ("aten::linear", 1500, 2)]
    assert sum(o.bytes for o in cpu.live_at_peak) == cpu.peak_bytes - cpu.before_bytes
    assert cuda.reserved is not None and cuda.peak_reserved_bytes == 8 << 20 and cuda.peak_owner is None


def test_memory_owner_inside_a_nested_call(tmp_path: Path) -> None:
    """A record at 112 inside aten::empty [110, 115) inside aten::linear: owner aten::empty, top aten::linear."""
    events = [ev("cpu_op", "aten::linear", 100, 100), ev("cpu_op", "aten::empty", 110, 5), _mem(112, 64, 64, 1)]
    mt = memory_timeline(_read(tmp_path, events, "python"))
    assert mt is not None
    d = mt.devices[0]
    assert (d.peak_owner, d.peak_top_op, d.peak_annotation) == ("aten::empty", "aten::linear", None)


@pytest.mark.parametrize("reader", READERS)
def test_repeating_kernel_triple(tmp_path: Path, reader: str) -> None:
    """A (2 µs) B (3 µs) C (5 µs) four times on stream 7, then D on stream 8 just after. Length 3: ABC 4 times,
    10 µs each (40 µs in all), BCA and CAB 3 times each; no window spans streams 7 and 8 (no "B C D" / "C D")."""
    events = []
    t, corr = 0.0, 1
    for _ in range(4):
        for name, d in (("A", 2), ("B", 3), ("C", 5)):
            events += [launch(t, 0.1, corr), kernel(name, t + 1, d, corr)]
            t, corr = t + 10, corr + 1
    events += [launch(t, 0.1, corr), kernel("D", t + 1, 1, corr, stream=8)]
    seqs = kernel_sequences(_read(tmp_path, events, reader), min_length=2, max_length=3, top=5)
    assert seqs is not None
    by = {(s.names, s.stream): s for s in seqs.sequences}
    abc = by[(("A", "B", "C"), 7)]
    assert (abc.count, abc.total_ns, abc.mean_ns) == (4, 40_000, 10_000.0)
    assert by[(("B", "C", "A"), 7)].count == 3 and by[(("C", "A", "B"), 7)].count == 3
    assert by[(("A", "B"), 7)].count == 4 and by[(("C", "A"), 7)].count == 3
    assert not any("D" in names for names, _ in by)  # D occurs once, on its own stream
    assert [len(s.names) for s in seqs.sequences] == [2, 2, 2, 3, 3, 3]
    with pytest.raises(ValueError):
        kernel_sequences(_read(tmp_path, events, reader), min_length=4, max_length=3)


@pytest.mark.parametrize("reader", READERS)
def test_annotations_from_host_ranges(tmp_path: Path, reader: str) -> None:
    """"fwd" [0, 100) on thread 1 launches K1 (10 µs) at 10 and K2 (20 µs) at 50; "bwd" [100, 200) launches
    K3 (5 µs) at 150; a launch at 20 on thread 2 (K4, 7 µs) is inside no range of its thread."""
    events = [ev("user_annotation", "fwd", 0, 100), ev("user_annotation", "bwd", 100, 100),
              launch(10, 1, 1), launch(50, 1, 2), launch(150, 1, 3),
              ev("cuda_runtime", "cudaLaunchKernel", 20, 1, tid=2, correlation=4),
              kernel("K1", 12, 10, 1), kernel("K2", 60, 20, 2), kernel("K3", 160, 5, 3), kernel("K4", 90, 7, 4)]
    ann = gpu_annotations(_read(tmp_path, events, reader))
    assert ann is not None and not ann.on_gpu
    rows = {r.name: r for r in ann.rows}
    assert (rows["fwd"].gpu_ns, rows["fwd"].items) == (30_000, 2)
    assert (rows["bwd"].gpu_ns, rows["bwd"].items) == (5_000, 1)
    assert rows["fwd"].total_ns == 100_000 and rows["fwd"].count == 1


def test_annotations_without_gpu_work_say_not_measured(tmp_path: Path) -> None:
    """Host ranges in a trace without launched GPU work: durations, and no GPU time (None, not 0)."""
    ann = gpu_annotations(_read(tmp_path, [ev("user_annotation", "fwd", 0, 100)], "python"))
    assert ann is not None and not ann.on_gpu
    (r,) = ann.rows
    assert (r.total_ns, r.gpu_ns, r.items) == (100_000, None, 0)


def test_annotations_on_gpu(tmp_path: Path) -> None:
    """Two gpu_user_annotation spans "step" of 100 and 50 µs: count 2, total 150, mean 75, min 50, max 100."""
    events = [ev("gpu_user_annotation", "step", 0, 100, pid=0, tid=7), ev("gpu_user_annotation", "step", 200, 50,
                                                                          pid=0, tid=7)]
    ann = gpu_annotations(_read(tmp_path, events, "python"))
    assert ann is not None and ann.on_gpu
    (r,) = ann.rows
    assert (r.count, r.total_ns, r.mean_ns, r.min_ns, r.max_ns) == (2, 150_000, 75_000.0, 50_000, 100_000)


def test_torch_memory_records_read_alike(tmp_path: Path) -> None:
    """A real CPU profile with profile_memory=True: both readers give the same records, and each record's change
    is the difference of the allocator's totals the trace writes beside it."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    model = torch.nn.Linear(32, 32)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        for _ in range(3):
            model(torch.randn(16, 32)).relu().sum().backward()
    path = tmp_path / "mem.json"
    prof.export_chrome_trace(str(path))
    tables = [read_trace(path, reader=r) for r in READERS]
    mem = tables[0].memory
    assert mem["ts_ns"].size > 10
    for other in tables[1:]:
        assert other.memory.keys() == mem.keys()
        for k in mem:
            np.testing.assert_array_equal(other.memory[k], mem[k])
    assert np.array_equal(np.diff(mem["allocated"]), mem["bytes"][1:])
    mt = memory_timeline(tables[0])
    assert mt is not None and mt.devices[0].peak_bytes == int(mem["allocated"].max())
    assert mt.devices[0].peak_top_op is not None


@pytest.mark.parametrize("reader", READERS)
def test_damaged_memory_records_are_read_as_not_measured(tmp_path: Path, reader: str) -> None:
    """A record without a usable time is dropped and counted; a figure of the wrong type (an array, a word) is
    not measured (-1, a change of 0) and counted; the rest of the trace is read as before."""
    good = _mem(10, 64, 64, 1)
    no_time = {**_mem(11, 64, 128, 2), "ts": "soon"}
    wrong = _mem(12, 64, 192, 3)
    wrong["args"] = {**wrong["args"], "Bytes": [64], "Total Allocated": "lots"}
    table = _read(tmp_path, [ev("cpu_op", "aten::empty", 0, 100), good, no_time, wrong], reader)
    assert table.meta.dropped_events == 1 and table.meta.wrong_type_values >= 1
    assert table.memory["bytes"].tolist() == [64, 0] and table.memory["allocated"].tolist() == [64, -1]
    mt = memory_timeline(table)
    assert mt is not None and mt.devices[0].peak_bytes == 64 and mt.devices[0].peak_owner == "aten::empty"
