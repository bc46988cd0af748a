"""Collectives across ranks: skew, transfer, algbw / busbw and the last-arriving rank on a built 3-rank trace set
derived by hand; the fixtures' real collectives read consistently."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stepscope.analyze.trace.analysis import analyze_trace
from stepscope.analyze.trace.collectives import collective_kind, match_collectives
from stepscope.executor.traceset import analyze_traceset
from stepscope.traces.kineto import read_trace
from tests.traces.tracebuild import FIXTURES, kernel, write

NAMES = {"allreduce": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "allgather": "ncclDevKernel_AllGather_RING_LL",
         "broadcast": "ncclDevKernel_Broadcast_RING_LL"}
# (collective, In msg nelems, Out msg nelems, dtype, per-rank start µs, common end µs)
PLAN: list[tuple[str, int, int, str, tuple[float, float, float], float]] = [
    ("allreduce", 1_048_576, 1_048_576, "Float", (100, 130, 110), 230),
    ("allgather", 262_144, 786_432, "BFloat16", (500, 505, 540), 600),
    ("allreduce", 1_048_576, 1_048_576, "Float", (900, 950, 920), 1000),
    ("broadcast", 256, 256, "Float", (1200, 1200.005, 1200.002), 1210),
]


def _trace_set(tmp: Path, shift_us: dict[int, float] | None = None) -> list[Path]:
    paths = []
    for rank in range(3):
        shift = (shift_us or {}).get(rank, 0.0)
        events: list[dict[str, Any]] = []
        for i, (name, n_in, n_out, dtype, starts, end) in enumerate(PLAN):
            args: dict[str, Any] = {"Collective name": name, "In msg nelems": n_in, "Out msg nelems": n_out,
                                    "Group size": 3, "dtype": dtype, "Process Group Name": "0",
                                    "Process Group Ranks": "[0, 1, 2]"}
            events.append(kernel(NAMES[name], starts[rank] + shift, end - starts[rank], 100 + i, **args))
        paths.append(write(tmp / f"rank{rank}.json", events, distributedInfo={"rank": rank, "world_size": 3}))
    return paths


def test_skew_transfer_bandwidth_and_last_arrival_derived_by_hand(tmp_path: Path) -> None:
    s = analyze_traceset(_trace_set(tmp_path), workers=1).collectives
    assert s is not None and s.clocks_aligned is True and s.ranks == (0, 1, 2) and s.unmatched == 0
    got = [(i.kind, i.bytes, i.skew_ns, i.last_rank, i.transfer_ns) for i in s.instances]
    assert got == [
        # all_reduce 1,048,576 floats = 4,194,304 bytes; starts 100/130/110 µs: skew 30 µs, rank 1 last, its
        # kernel [130, 230): transfer 100 µs
        ("all_reduce", 4_194_304, 30_000, 1, 100_000),
        # all_gather: the gathered output, 786,432 bf16 = 1,572,864 bytes; starts 500/505/540: rank 2 last
        ("all_gather", 1_572_864, 40_000, 2, 60_000),
        ("all_reduce", 4_194_304, 50_000, 1, 50_000),
        # broadcast: starts 1200.000/1200.005/1200.002 µs: skew 5 ns, rank 1's kernel lasts 9.995 µs
        ("broadcast", 1024, 5, 1, 9_995),
    ]
    ar, ag, ar2, bc = s.instances
    # algbw = bytes / transfer (GB/s = bytes per ns); busbw x 2(n-1)/n = 4/3 (all_reduce), (n-1)/n = 2/3 (all_gather)
    assert ar.algbw_gbps == pytest.approx(41.94304) and ar.busbw_gbps == pytest.approx(41.94304 * 4 / 3)
    assert ag.algbw_gbps == pytest.approx(26.2144) and ag.busbw_gbps == pytest.approx(26.2144 * 2 / 3)
    assert ar2.algbw_gbps == pytest.approx(83.88608)
    assert bc.algbw_gbps == pytest.approx(1024 / 9995) and bc.busbw_gbps == bc.algbw_gbps  # factor 1
    # last arrival: rank 1 twice, rank 2 once (the broadcast's 5 ns skew is within clock noise: nobody's)
    assert (s.last_rank, s.last_count) == (1, 2)
    # waits for the last arrival: rank 0 30 + 40 + 50 µs + 5 ns; rank 1 35 µs; rank 2 20 + 30 µs + 3 ns
    assert [(r.rank, r.instances, r.last, r.wait_ns) for r in s.per_rank] == [
        (0, 4, 0, 120_005), (1, 4, 2, 35_000), (2, 4, 1, 50_003)]
    by = {(b.kind, b.bytes_lo): b for b in s.by_size}
    assert set(by) == {("all_reduce", 2**22), ("all_gather", 2**20), ("broadcast", 1024)}
    big = by[("all_reduce", 2**22)]
    assert (big.count, big.skew_median_ns, big.transfer_median_ns) == (2, 40_000, 75_000)
    assert big.algbw_median_gbps == pytest.approx((41.94304 + 83.88608) / 2)


def test_misaligned_clocks_give_no_skew(tmp_path: Path) -> None:
    s = analyze_traceset(_trace_set(tmp_path, {2: 10_000.0}), workers=1).collectives  # rank 2 10 ms late
    assert s is not None and s.clocks_aligned is False and s.last_rank is None
    assert all(i.skew_ns is None and i.busbw_gbps is None for i in s.instances) and len(s.instances) == 4
    assert any("clocks not aligned" in n for n in s.notes)
    assert [(r.rank, r.instances, r.wait_ns) for r in s.per_rank] == [(0, 4, None), (1, 4, None), (2, 4, None)]


def test_collective_names() -> None:
    assert [collective_kind(n) for n in ("allreduce", "_allgather_base", "all_gather_into_tensor_coalesced",
                                         "reduce_scatter_tensor", "_reduce_scatter_base", "alltoall_base",
                                         "AllReduce", "SendRecv", "send", "recv", "barrier", "broadcast")] == [
        "all_reduce", "all_gather", "all_gather", "reduce_scatter", "reduce_scatter", "all_to_all", "all_reduce",
        "sendrecv", None, None, None, "broadcast"]


def test_fixture_collectives_are_consistent() -> None:
    a = analyze_trace(read_trace(FIXTURES / "a100_2rank_nccl" / "rank0.json.gz"))
    kinds = [c.kind for c in a.collectives]
    assert kinds.count("all_reduce") == 15 and kinds.count("broadcast") == 6  # its 21 NCCL kernels
    assert all(c.bytes is not None and c.bytes > 0 and c.dur_ns > 0 and c.group == "0" and c.group_size == 2
               for c in a.collectives)
    one = match_collectives({0: a.collectives}, world_size=2)
    assert one.instances == () and one.unmatched == 21 and "at least two ranks" in one.notes[0]
    # rank 0 and 1 of the sampled 128-rank job: their SendRecv kernels do not overlap in time (one ends before
    # the other begins in 6 of 10), so the clocks are called not aligned and no skew is given
    pair = analyze_traceset(sorted((FIXTURES / "sampled_128rank").glob("*.json.gz")), workers=1).collectives
    assert pair is not None and pair.clocks_aligned is False and len(pair.instances) == 10
    assert all(i.skew_ns is None for i in pair.instances) and any("2 of 128" in n for n in pair.notes)


def test_windows_starting_a_collective_apart_are_aligned(tmp_path: Path) -> None:
    """Rank 0 holds the all_reduces at 100, 200, 300, 400 µs (50 µs each); rank 1's window starts one collective
    later: 205, 305, 405, 505 µs, ending with rank 0's (250, 350, 450) and at 550. Matched by position alone,
    100 would pair with 205 (and every pair look like misaligned clocks); aligned, three instances with 5 µs
    skew, rank 1 last, transfer 45 µs; rank 0's first and rank 1's last unmatched."""
    args: dict[str, Any] = {"Collective name": "allreduce", "In msg nelems": 1024, "Out msg nelems": 1024,
                            "Group size": 2, "dtype": "Float", "Process Group Name": "0"}
    starts = {0: [100.0, 200.0, 300.0, 400.0], 1: [205.0, 305.0, 405.0, 505.0]}
    paths = [write(tmp_path / f"rank{r}.json",
                   [kernel(NAMES["allreduce"], t, 50 if r == 0 else 45, i + 1, **args) for i, t in enumerate(ts)],
                   distributedInfo={"rank": r, "world_size": 2}) for r, ts in starts.items()]
    s = analyze_traceset(paths, workers=1).collectives
    assert s is not None and s.clocks_aligned is True and s.unmatched == 2
    assert [(i.starts_ns, i.skew_ns, i.last_rank, i.transfer_ns) for i in s.instances] == [
        ((200_000, 205_000), 5_000, 1, 45_000), ((300_000, 305_000), 5_000, 1, 45_000),
        ((400_000, 405_000), 5_000, 1, 45_000)]
