"""mpi4py call timing (collect/mpi/mpi.py) on real `mpirun` jobs: exact bytes, peers and tags per call, the EXARL-like
learner/actor example with a sleeping actor (straggler, learner waiting, roles), and the CLI screens on its run."""

from __future__ import annotations

import importlib.util
import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from stepscope.analyze.ranks.commmatrix import comm_matrix_from_tables
from stepscope.analyze.ranks.ranks import analyze_ranks
from stepscope.analyze.ranks.roles import analyze_roles
from stepscope.cli import main
from tests.conftest import EXAMPLES, SCRIPTS, load

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun is not installed (Debian: openmpi-bin)"),
    pytest.mark.skipif(importlib.util.find_spec("mpi4py") is None, reason="mpi4py is not installed (stepscope[mpi])"),
]
PROTOCOL = 5  # mpi4py's default pickle protocol (MPI.pickle.PROTOCOL) on Python >= 3.8


def _env() -> dict[str, str]:
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    env.pop("STEPSCOPE_DB", None)
    return env


def _mpirun(store: Path, n: int, script: Path, *args: str, name: str = "mpi") -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "stepscope", "run", "--store", str(store), "--quiet", "--sample-interval", "0",
           "--name", name, "--", "mpirun", "--oversubscribe", "-n", str(n), sys.executable, str(script), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _rows(rank: Any) -> list[dict[str, Any]]:
    t = rank.comm
    cols = {c: t[c].tolist() for c in ("step", "duration_ns", "bytes", "peer", "group_size", "seq", "tag")}
    return [{"op": op, **{c: cols[c][i] for c in cols}} for i, op in enumerate(t.column_strings())]


def _objects(text: str) -> list[dict[str, Any]]:
    """The JSON objects the ranks printed: mpirun forwards both ranks' output into one stream, where one
    rank's line may follow the other's without a line break between them."""
    decoder, out, i = json.JSONDecoder(), [], 0
    while (i := text.find("{", i)) >= 0:
        obj, i = decoder.raw_decode(text, i)
        out.append(obj)
    return out


def test_mpi_calls_bytes_peers_tags(tmp_path: Path) -> None:
    """Every call of tests/scripts/exarl_calls.py, on both ranks, with its exact size, peer and tag; the user's
    results unchanged by the timing."""
    store = tmp_path / "store"
    proc = _mpirun(store, 2, SCRIPTS / "exarl_calls.py")
    seen = {d["rank"]: d["seen"] for d in _objects(proc.stdout)}
    for rank, other in ((0, 1), (1, 0)):
        for s in seen[rank]:  # what the user's code received is what MPI sent, timing or not
            assert s["rbuf"] == list(range(other, other + 6)) and s["got"] == [None, ["x", other]]
            assert s["out"] == [float(other)] * 3 and s["a"] == [2.0] * 5 and s["b"] == [2.0, 2.0]
            assert s["waitany"] == [0, 1] and s["isinstance"] is True
    data = load(store)
    assert data.run.world_size == 2 and sorted(r.stream.rank for r in data.ranks) == [0, 1]
    for r in data.ranks:
        rank, other = r.stream.rank, 1 - r.stream.rank
        rows = _rows(r)
        got = [(x["op"], x["bytes"], x["peer"], x["tag"], x["group_size"]) for x in rows]
        mine, theirs = len(pickle.dumps(("x", rank), PROTOCOL)), len(pickle.dumps(("x", other), PROTOCOL))
        per_step = [
            ("isend", 6 * 4, other, 21, 2), ("irecv", 6 * 4, other, 21, 2),  # Isend/Irecv [int32 x 6] + Waitall
            ("isend", mine, other, 22, 2), ("irecv", theirs, other, 22, 2),  # pickled isend/irecv + waitall
            ("send", 3 * 8, other, 23, 2), ("recv", 3 * 8, other, 23, 2),  # Sendrecv: two rows
            ("Allreduce", 5 * 8, -1, -1, 2),  # IN_PLACE: the receive buffer's size
            ("Iallreduce", 2 * 8, -1, -1, 2),
            ("Barrier", 0, -1, -1, 1),  # on a Split communicator of one rank
            ("send", 4 * 8, 1, 24, 2) if rank == 0 else ("recv", 4 * 8, 0, 24, 2),  # 4 of 10 doubles, count given
            ("isend", 16, other, 25, 2), ("irecv", 16, other, 25, 2),  # completed by two Waitany
        ]
        assert got == per_step * 2
        assert [x["step"] for x in rows] == [0] * len(per_step) + [1] * len(per_step)
        # collectives on the world carry the same seq on both ranks (group 0); each Split piece its own group
        world = [x["seq"] for x in rows if x["op"] in ("Allreduce", "Iallreduce")]
        assert world == [0, 1, 2, 3]
        barrier_groups = [x["seq"] >> 32 for x in rows if x["op"] == "Barrier"]
        assert barrier_groups == [(rank << 16) | 1, (rank << 16) | 2]  # world rank of the piece's rank 0, index
        assert all(x["duration_ns"] > 0 for x in rows)


STEPS, SLOW_MS, ACTOR_MS, OBS, ACTIONS, BATCH = 12, 40.0, 2.0, 8, 4, 16


@pytest.fixture(scope="module")
def exarl_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("exarl") / "store"
    proc = _mpirun(store, 3, EXAMPLES / "exarl_like_mpi.py", "--steps", str(STEPS), "--slow-rank", "2",
                   "--slow-ms", str(SLOW_MS), "--actor-ms", str(ACTOR_MS), "--obs", str(OBS), "--actions",
                   str(ACTIONS), "--batch", str(BATCH), name="exarl")
    assert proc.stdout.startswith(f"learner: {STEPS} steps from 2 actors")
    return store


def test_exarl_like_bytes_peers_tags(exarl_store: Path) -> None:
    data = load(exarl_store)
    assert data.run.status.value == "completed" and data.run.world_size == 3
    ranks = {r.stream.rank: r for r in data.ranks}
    assert {k: r.stream.role for k, r in ranks.items()} == {0: "learner", 1: "actor", 2: "actor"}
    experience = BATCH * (OBS + 2) * 8  # float64 (batch, obs + action + reward)
    weights = OBS * ACTIONS * 8
    summary = len(pickle.dumps({"reward": 0.5, "actor": 1}, PROTOCOL))  # a float and a small int: fixed size
    learner = _rows(ranks[0])
    for peer in (1, 2):
        exp = [x for x in learner if x["op"] == "recv" and x["peer"] == peer and x["tag"] == 11]
        summ = [x for x in learner if x["op"] == "recv" and x["peer"] == peer and x["tag"] == 12]
        assert len(exp) == len(summ) == STEPS
        assert {x["bytes"] for x in exp} == {experience} and {x["bytes"] for x in summ} == {summary}
        # a Recv from ANY_SOURCE is numbered among the calls of the sender it matched
        assert sorted(x["seq"] for x in exp + summ) == list(range(2 * STEPS))
    for k in (1, 2):
        rows = _rows(ranks[k])
        sends = [(x["op"], x["bytes"], x["peer"], x["tag"]) for x in rows if x["op"] == "send"]
        assert sends == [("send", experience, 0, 11), ("send", summary, 0, 12)] * STEPS
    bcasts = {k: [(x["seq"], x["bytes"]) for x in _rows(r) if x["op"] == "Bcast"] for k, r in ranks.items()}
    assert bcasts[0] == bcasts[1] == bcasts[2] == [(i, weights) for i in range(STEPS)]

    m = comm_matrix_from_tables({k: r.comm for k, r in ranks.items()})
    assert m.ranks == (0, 1, 2)
    assert m.p2p_bytes[1][0] == m.p2p_bytes[2][0] == STEPS * (experience + summary)
    assert m.p2p_bytes[0][1] == m.p2p_bytes[0][2] == 0
    assert m.collective_bytes[0][1] == STEPS * weights / 2  # each Bcast's payload spread over the 2 others
    assert m.unattributed_bytes == 0


def test_exarl_like_slow_actor(exarl_store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Actor 2 sleeps SLOW_MS more per step: the learner waits for it in Recv, it is the straggler, actor 1
    waits in the weights' Bcast, and the learner role is mostly waiting."""
    data = load(exarl_store)
    ranks = {r.stream.rank: r for r in data.ranks}
    learner = [x for x in _rows(ranks[0]) if x["op"] == "recv" and x["tag"] == 11 and x["step"] >= 2]
    wait = {p: np.median([x["duration_ns"] for x in learner if x["peer"] == p]) / 1e6 for p in (1, 2)}
    # the learner cannot receive actor 2's experience before actor 2 slept SLOW_MS after the last Bcast
    assert wait[2] > 0.6 * SLOW_MS and wait[2] > wait[1]

    ra = analyze_ranks(data)
    assert [s.rank for s in ra.stragglers] == [2]
    assert ra.stragglers[0].excess_ns / 1e6 == pytest.approx(SLOW_MS, rel=0.35)
    by_rank = {r.rank: r for r in ra.ranks}
    assert by_rank[0].comm_ns is not None and by_rank[0].comm_ns / 1e6 > 0.6 * SLOW_MS
    assert by_rank[1].comm_ns is not None and by_rank[1].comm_ns / 1e6 > 0.6 * SLOW_MS
    assert ra.pop is not None and ra.pop.load_balance < 0.7
    assert ra.comm_split is not None and [o.op for o in ra.comm_split.ops] == ["Bcast"]
    assert ra.comm_split.ops[0].sync_ns > ra.comm_split.ops[0].transfer_ns  # actor 1 arrives early, waits

    roles = {r.role: r for r in analyze_roles(data).roles}
    assert roles["learner"].ranks == (0,) and roles["actor"].ranks == (1, 2)
    assert roles["learner"].waiting_share is not None and roles["learner"].waiting_share > 0.7
    assert roles["actor"].busy_share is not None and roles["actor"].busy_share > roles["learner"].busy_share  # type: ignore[operator]

    assert main(["show", "--store", str(exarl_store), "exarl", "--ranks", "--width", "200"]) == 0
    out = capsys.readouterr().out
    assert "straggler: rank 2 is slower by" in out and "learner" in out and "Bcast" in out
    assert main(["show", "--store", str(exarl_store), "exarl", "--comm-matrix", "--width", "200"]) == 0
    out = capsys.readouterr().out
    assert "2 → 0" in out and "1 → 0" in out


def test_no_mpi4py_import_without_the_user(tmp_path: Path) -> None:
    """A script that never imports mpi4py does not get it imported by stepscope."""
    script = tmp_path / "plain.py"
    script.write_text("import sys\nimport stepscope\nfor _ in stepscope.steps(range(2)):\n    pass\n"
                      "print('mpi4py' in sys.modules, 'mpi4py.MPI' in sys.modules)\n")
    cmd = [sys.executable, "-m", "stepscope", "run", "--store", str(tmp_path / "store"), "--quiet",
           "--sample-interval", "0", "--", sys.executable, str(script)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=_env())
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "False False"


def test_singleton_and_no_comm_timing(tmp_path: Path) -> None:
    """Without mpirun (a singleton MPI process) calls are timed too; --no-comm-timing leaves mpi4py untouched."""
    script = tmp_path / "single.py"
    script.write_text("import types\nfrom mpi4py import MPI\nimport stepscope\n"
                      "for _ in stepscope.steps(range(3)):\n    MPI.COMM_WORLD.Barrier()\n"
                      "print(isinstance(type(MPI.COMM_WORLD).__dict__.get('Barrier'), types.FunctionType))\n")
    for flag, wrapped, rows in (([], "True", 3), (["--no-comm-timing"], "False", 0)):
        store = tmp_path / f"store{len(flag)}"
        cmd = [sys.executable, "-m", "stepscope", "run", "--store", str(store), "--quiet", "--sample-interval", "0",
               *flag, "--", sys.executable, str(script)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=_env())
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert proc.stdout.strip() == wrapped
        (rank,) = load(store).ranks
        got = [(x["op"], x["bytes"], x["group_size"], x["step"]) for x in _rows(rank)]
        assert got == [("Barrier", 0.0, 1, i) for i in range(rows)]


def test_mpi_initialised_later(tmp_path: Path) -> None:
    """mpi4py.rc.initialize = False: nothing may touch MPI before the user's MPI.Init (Open MPI aborts the
    process); COMM_WORLD is timed from MPI.Init on."""
    script = tmp_path / "late.py"
    script.write_text("import mpi4py\nmpi4py.rc.initialize = False\nfrom mpi4py import MPI\nimport stepscope\n"
                      "assert not MPI.Is_initialized()\nMPI.Init()\n"
                      "for _ in stepscope.steps(range(2)):\n    MPI.COMM_WORLD.Barrier()\nprint('ok')\n")
    store = tmp_path / "store"
    cmd = [sys.executable, "-m", "stepscope", "run", "--store", str(store), "--quiet", "--sample-interval", "0",
           "--", sys.executable, str(script)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=_env())
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]
    (rank,) = load(store).ranks
    assert [(x["op"], x["step"]) for x in _rows(rank)] == [("Barrier", 0), ("Barrier", 1)]
