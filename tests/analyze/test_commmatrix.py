"""The communication matrix: hand-built CommTables (every convention), a 4-rank gloo job with a known
send/recv pattern, and a single-rank run."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from stepscope.analyze.commmatrix import comm_matrix, comm_matrix_from_tables
from stepscope.model.tables import CommTable
from tests.conftest import SCRIPTS, Result, load

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
