"""The communication matrix: hand-built CommTables (every convention), a 4-rank gloo job with a known
send/recv pattern, and a single-rank run."""

from __future__ import annotations

import gzip
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from stepscope.analyze.ranks.commmatrix import comm_matrix, comm_matrix_from_tables
from stepscope.executor.traceset import comm_matrix_from_traces
from stepscope.model.tables import CommTable
from tests.conftest import SCRIPTS, TRACES, Result, load
from tests.traces.tracebuild import kernel, write

WORLD, DDP = 0, 0x8000


def _table(rows: list[tuple[str, float, int, int, int, int]]) -> CommTable:
    """rows: (op, bytes, duration_ns, peer, group id, group size)."""
    cols: dict[str, list[object]] = {k: [] for k in ("op", "step", "start_ns", "duration_ns", "bytes", "peer",
                                                     "group_size", "seq")}
    for i, (op, nbytes, dur, peer, gid, size) in enumerate(rows):
        for k, v in (("op", op), ("step", 0), ("start_ns", i), ("duration_ns", dur), ("bytes", nbytes),
                     ("peer", peer), ("group_size", size), ("seq", (gid << 32) | i)):
            cols[k].append(v)
    return CommTable.from_batches([cols])  # type: ignore[no-any-return]


def test_hand_built_tables_follow_the_documented_conventions() -> None:
    tables = {
        0: _table([("send", 100, 10, 1, WORLD, 3), ("all_reduce", 300, 30, -1, WORLD, 3),
                   ("ddp:all_reduce", 60, 0, -1, DDP, 3), ("batch_isend_irecv", 70, 5, -1, WORLD, 3)]),
        1: _table([("recv", 100, 12, 0, WORLD, 3), ("all_reduce", 300, 60, -1, WORLD, 3),
                   ("ddp:all_reduce", 60, 0, -1, DDP, 3), ("broadcast", 40, 8, -1, 1, 2)]),
        2: _table([("all_reduce", 300, 90, -1, WORLD, 3), ("recv", 50, 4, 0, WORLD, 3),
                   ("ddp:all_reduce", 60, 0, -1, DDP, 3), ("broadcast", 40, 6, -1, 1, 2)]),
    }
    m = comm_matrix_from_tables(tables)
    b = np.array(m.bytes)
    # p2p: 0->1 seen on both sides once (100, not 200); 0->2 only on the receiver (50)
    # all_reduce 300/2 and DDP 60/2 to each other member; broadcast of group {1, 2}: 40 each way
    expected = np.array([[0, 100 + 150 + 30, 50 + 150 + 30],
                         [150 + 30, 0, 150 + 30 + 40],
                         [150 + 30, 150 + 30 + 40, 0]], dtype=float)
    np.testing.assert_allclose(b, expected)
    assert m.p2p_bytes[0][1] == 100 and m.p2p_bytes[0][2] == 50 and m.p2p_bytes[1][0] == 0
    t = np.array(m.time_ns)
    np.testing.assert_allclose(t[0], [0, 10 + 15, 15])  # batch_isend_irecv has no peers: no time
    np.testing.assert_allclose(t[1], [12 + 30, 0, 30 + 8])
    assert m.unattributed_bytes == 70
    assert m.total_bytes == pytest.approx(expected.sum())
    assert (m.busiest[0].src, m.busiest[0].dst) == (0, 1)
    assert m.busiest[0].bytes == 280 and m.busiest[0].calls == 3


def test_four_rank_gloo_job_with_a_known_pattern(observed: Callable[..., Result], cli: Callable[..., Result],
                                                 store: Path) -> None:
    r = cli("run", "--quiet", "--sample-interval", "0", "--", sys.executable, "-m", "torch.distributed.run",
            "--nproc-per-node", "4", str(SCRIPTS / "comm_pattern.py"), timeout=240)
    assert r.rc == 0, r
    m = comm_matrix(load(store))
    assert m is not None and m.ranks == (0, 1, 2, 3)
    share = 256 * 4 / 3  # the all_reduce payload spread over the three other ranks
    expected = np.full((4, 4), share)
    np.fill_diagonal(expected, 0)
    for rank in range(4):
        expected[rank, (rank + 1) % 4] += (rank + 1) * 1000 * 4
    np.testing.assert_allclose(np.array(m.bytes), expected)
    assert (m.busiest[0].src, m.busiest[0].dst, m.busiest[0].p2p_bytes) == (3, 0, 16000)
    assert all(m.time_ns[i][(i + 1) % 4] > 0 for i in range(4))
    shown = cli("show", "latest", "--comm-matrix")
    assert shown.rc == 0 and "3 → 0" in shown.out and "15.6 KiB" in shown.out


def test_single_rank_run_says_so(observed: Callable[..., Result], cli: Callable[..., Result]) -> None:
    assert observed("plain_region.py").rc == 0
    r = cli("show", "latest", "--comm-matrix")
    assert r.rc == 2 and "needs two or more ranks" in r.err


# --- matrices from profiler traces (analyze/trace/comm.py) ---

NCCL_TRACE = TRACES / "a100_2rank_nccl" / "rank0.json.gz"
ELEMENT_BYTES = {"Float": 4, "Half": 2, "BFloat16": 2, "Double": 8, "Long": 8, "Int": 4, "Byte": 1, "Char": 1}


def _raw_collective_kernels(path: Path) -> list[dict[str, Any]]:
    events = orjson.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    return [e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"
            and "Collective name" in e.get("args", {})]


def _as_rank(src: Path, dst: Path, rank: int) -> Path:
    """A copy of a trace claiming another rank (distributedInfo.rank)."""
    doc = orjson.loads(gzip.decompress(src.read_bytes()))
    doc["distributedInfo"]["rank"] = rank
    dst.write_bytes(gzip.compress(orjson.dumps(doc), compresslevel=1))
    return dst


def test_trace_matrix_bytes_are_nelems_times_dtype_size(tmp_path: Path) -> None:
    kernels = _raw_collective_kernels(NCCL_TRACE)
    assert len(kernels) == 21 and {k["args"]["Process Group Ranks"] for k in kernels} == {"[0, 1]"}
    expected_bytes = sum(k["args"]["In msg nelems"] * ELEMENT_BYTES[k["args"]["dtype"]] for k in kernels)
    expected_ns = sum(k["dur"] for k in kernels) * 1000
    assert expected_bytes > 100e6

    m = comm_matrix_from_traces([NCCL_TRACE])  # rank 0 alone: rank 1 is named by the group
    assert m.source == "traces" and m.ranks == (0, 1) and m.untraced_ranks == (1,)
    assert m.collective_bytes[0][1] == expected_bytes and m.bytes[0][1] == expected_bytes
    assert m.time_ns[0][1] == pytest.approx(expected_ns, rel=1e-9) and m.calls[0][1] == 21
    assert m.bytes[1] == (0.0, 0.0) and m.p2p_bytes[0][1] == 0
    assert m.calls_without_bytes == 0 and m.unattributed_bytes == 0 and m.unattributed_time_ns == 0

    folder = tmp_path / "traces"
    folder.mkdir()
    shutil.copy(NCCL_TRACE, folder / "rank0.json.gz")
    _as_rank(NCCL_TRACE, folder / "rank1.json.gz", 1)
    both = comm_matrix_from_traces([folder], workers=1)
    assert both.untraced_ranks == () and both.bytes[1][0] == expected_bytes == both.bytes[0][1]
    assert both.total_bytes == 2 * expected_bytes


def test_trace_matrix_point_to_point_and_group_fallbacks(tmp_path: Path) -> None:
    def comm(name: str, ts: float, dur: float, corr: int, **args: Any) -> dict[str, Any]:
        return kernel(name, ts, dur, corr, **args)

    send = {"Collective name": "send", "In msg nelems": 1000, "Out msg nelems": 1000, "dtype": "BFloat16",
            "Group size": 3, "Process Group Ranks": "[0, 1, 2]", "Dst Rank": 2}
    gather = {"Collective name": "_allgather_base", "In msg nelems": 30, "Out msg nelems": 90, "dtype": "Float",
              "Group size": 3, "Process Group Ranks": "[]"}  # ranks not recorded: Group size == world
    rank0 = [comm("ncclDevKernel_SendRecv(ncclDevComm*)", 10, 5, 1, **send),
             comm("ncclDevKernel_AllGather_RING_LL(ncclDevComm*)", 20, 6, 2, **gather)]
    recv = {**send, "Collective name": "recv", "Src Rank": 0, "In msg nelems": 1000}
    del recv["Dst Rank"]
    rank2 = [comm("ncclDevKernel_SendRecv(ncclDevComm*)", 10, 4, 1, **recv),
             comm("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", 30, 9, 2)]  # old trace: name only
    write(tmp_path / "rank0.json", rank0, distributedInfo={"rank": 0, "world_size": 3})
    write(tmp_path / "rank2.json", rank2, distributedInfo={"rank": 2, "world_size": 3})
    m = comm_matrix_from_traces([tmp_path], workers=1)
    assert m.ranks == (0, 1, 2) and m.untraced_ranks == (1,)
    b = np.array(m.bytes)
    # send 0->2 of 1000 bf16 = 2000 B (seen on both sides: counted once); all-gather: 120 B spread over 1 and 2
    np.testing.assert_allclose(b, [[0, 60, 2000 + 60], [0, 0, 0], [0, 0, 0]])
    t = np.array(m.time_ns)
    np.testing.assert_allclose(t, [[0, 3000, 5000 + 3000], [0, 0, 0], [4000 + 4500, 4500, 0]])
    assert m.calls_without_bytes == 1 and any("no collective args" in n for n in m.notes)
