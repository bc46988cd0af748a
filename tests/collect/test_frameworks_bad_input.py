"""Issue 16's bad input for the frameworks beyond PyTorch, each on a real run: a TensorFlow version stepscope
does not know (warned once, the training goes on), `mpirun` where mpi4py is not installed (ranks named from
the MPI environment), and an MPI rank that dies mid-run (the run is failed, that rank incomplete, `show
--ranks` reads it). A Keras version stepscope does not know: tests/collect/test_keras.py; a profile directory
without XPlane files: tests/traces/test_xla.py."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from stepscope.cli import main
from tests.conftest import PY, SCRIPTS, load, stepscope_cmd

pytestmark = pytest.mark.slow
needs_mpirun = pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun is not installed (openmpi-bin)")


def _env(store: Path, *first_on_path: Path) -> dict[str, str]:
    env = {**os.environ, "STEPSCOPE_HOME": str(store), "OMPI_ALLOW_RUN_AS_ROOT": "1",
           "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    env.pop("STEPSCOPE_DB", None)
    if first_on_path:
        env["PYTHONPATH"] = os.pathsep.join([*map(str, first_on_path), *filter(None, [os.environ.get("PYTHONPATH")])])
    return env


def test_unknown_tensorflow_version_warns_once_and_training_goes_on(tmp_path: Path) -> None:
    env = _env(tmp_path / "store", SCRIPTS / "fake_tf_old")
    r = subprocess.run(stepscope_cmd("run", "--quiet", "--", PY, str(SCRIPTS / "old_tensorflow.py")),
                       capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert r.returncode == 0 and "trained" in r.stdout, r.stderr[-3000:]
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    rank = load(tmp_path / "store").ranks[0]
    assert len(rank.steps) == 2
    said = "TensorFlow 2.10.0 is not one stepscope knows"
    assert sum(said in n for n in rank.notes) == 1
    assert r.stderr.count(said) == 1


@needs_mpirun
def test_mpirun_without_mpi4py_names_the_ranks_from_the_mpi_environment(tmp_path: Path) -> None:
    store = tmp_path / "store"
    r = subprocess.run(stepscope_cmd("run", "--quiet", "--sample-interval", "0", "--", "mpirun", "--oversubscribe",
                                     "-n", "2", PY, str(SCRIPTS / "mpi_no_mpi4py.py")),
                       capture_output=True, text=True, timeout=300, cwd=tmp_path,
                       env=_env(store, SCRIPTS / "no_mpi4py"))
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.count("no mpi4py") == 2  # mpi4py really was missing in both ranks
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    data = load(store)
    assert data.run.status.value == "completed" and data.run.world_size == 2
    assert sorted(rk.stream.rank for rk in data.ranks) == [0, 1]
    for rk in data.ranks:
        assert rk.stream.world_size == 2 and rk.stream.complete and len(rk.steps) == 3
        assert rk.comm is None or len(rk.comm) == 0  # nothing to time without mpi4py


@needs_mpirun
@pytest.mark.skipif(importlib.util.find_spec("mpi4py") is None, reason="mpi4py is not installed (stepscope[mpi])")
def test_a_rank_that_dies_fails_the_run_and_is_marked_incomplete(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    r = subprocess.run(stepscope_cmd("run", "--quiet", "--sample-interval", "0", "--", "mpirun", "--oversubscribe",
                                     "-n", "2", PY, str(SCRIPTS / "mpi_dying_rank.py"), "--rank", "1",
                                     "--die-after", "2"),
                       capture_output=True, text=True, timeout=300, cwd=tmp_path, env=_env(store))
    assert r.returncode != 0  # the job failed, and stepscope run says so with mpirun's exit code
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    data = load(store)
    assert data.run.status.value == "failed"
    ranks = {rk.stream.rank: rk for rk in data.ranks}
    assert set(ranks) <= {0, 1} and 1 in ranks
    assert not ranks[1].stream.complete  # it never wrote its end record
    assert len(ranks[1].steps) <= 2  # it died at the start of its third step
    assert main(["show", "--store", str(store), "latest", "--ranks", "--width", "200"]) == 0
    out = capsys.readouterr().out
    assert "rank 1 ended without its end record" in out
