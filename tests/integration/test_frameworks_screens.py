"""The CLI screens on runs of the non-PyTorch examples (issue 16): a Keras `fit` run, a JAX + optax run and
the EXARL-like mpi4py learner/actor script under `mpirun` (2 and 3 ranks), each recorded once for the whole
module by `stepscope run` (the four runs start together; the TensorFlow and JAX imports dominate), then
`show`, `show --json`, `report`, `advise` and `diff` on each, `show --ranks` / `show --comm-matrix` on the MPI
run and `scaling` over the 2- and 3-rank runs. `sweep` over a TensorFlow script is
tests/collect/test_cosmoflow_sweep.py. Every number asserted is computed here from the flags passed."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import pickle
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLES, PY, stepscope_cmd

pytestmark = pytest.mark.slow

# -- what each run is asked to do (every expected number below derives from these) ------------------------
KERAS_SAMPLES, KERAS_VAL, KERAS_BATCH, KERAS_EPOCHS = 100, 40, 16, 2
KERAS_FEATURES, KERAS_HIDDEN, KERAS_CLASSES = 20, 64, 3  # the example's defaults (3 classes in its model)
JAX_SAMPLES, JAX_BATCH, JAX_EPOCHS = 100, 16, 2
MPI_STEPS, MPI_OBS, MPI_ACTIONS, MPI_BATCH, MPI_ACTOR_MS = 6, 8, 4, 16, 2
MPI_SIZES = (2, 3)
PROTOCOL = 5  # mpi4py's pickle protocol (MPI.pickle.PROTOCOL on Python >= 3.8)
TRACEBACK = "Traceback (most recent call last)"


def _batches(samples: int, batch: int) -> list[int]:
    return [min(batch, samples - i) for i in range(0, samples, batch)]


@dataclass
class Runs:
    store: Path
    env: dict[str, str]
    cwd: Path

    def cli(self, *args: str, timeout: float = 180) -> str:
        """`stepscope ARGS` on the module's store: exit 0 and no traceback, else the test fails; its stdout."""
        proc = subprocess.run(stepscope_cmd(*args), capture_output=True, text=True, timeout=timeout, cwd=self.cwd,
                              env=self.env)
        assert proc.returncode == 0, f"stepscope {' '.join(args)}: rc {proc.returncode}\n{proc.stderr[-3000:]}"
        assert TRACEBACK not in proc.stdout + proc.stderr, proc.stderr[-3000:]
        return proc.stdout


def _missing() -> str | None:
    for module, extra in (("tensorflow", "tensorflow"), ("keras", "tensorflow"), ("jax", "jax"), ("optax", "jax"),
                          ("mpi4py", "mpi")):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed (extra {extra})"
    if shutil.which("mpirun") is None:
        return "mpirun is not installed (Debian: openmpi-bin)"
    return None


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    """The four runs, started at once (one TensorFlow and one JAX import in parallel with the MPI jobs)."""
    if (why := _missing()) is not None:
        pytest.skip(why)
    tmp = tmp_path_factory.mktemp("fwscreens")
    env = {**os.environ, "STEPSCOPE_HOME": str(tmp / "store"), "OMPI_ALLOW_RUN_AS_ROOT": "1",
           "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}
    env.pop("STEPSCOPE_DB", None)
    base = ("run", "--quiet", "--sample-interval", "0.5")
    commands = {
        "keras": stepscope_cmd(*base, "--name", "keras", "--", PY, str(EXAMPLES / "train_keras.py"),
                               "--epochs", str(KERAS_EPOCHS), "--samples", str(KERAS_SAMPLES),
                               "--val-samples", str(KERAS_VAL), "--batch-size", str(KERAS_BATCH),
                               "--features", str(KERAS_FEATURES), "--hidden", str(KERAS_HIDDEN)),
        "jax": stepscope_cmd(*base, "--name", "jax", "--", PY, str(EXAMPLES / "train_jax.py"),
                             "--epochs", str(JAX_EPOCHS), "--samples", str(JAX_SAMPLES),
                             "--batch-size", str(JAX_BATCH)),
    }
    for n in MPI_SIZES:
        commands[f"mpi{n}"] = stepscope_cmd(
            *base, "--name", f"mpi{n}", "--tag", "study=exarl", "--", "mpirun", "--oversubscribe", "-n", str(n),
            PY, str(EXAMPLES / "exarl_like_mpi.py"), "--steps", str(MPI_STEPS), "--obs", str(MPI_OBS),
            "--actions", str(MPI_ACTIONS), "--batch", str(MPI_BATCH), "--actor-ms", str(MPI_ACTOR_MS))
    procs = {name: subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp, env=env)
             for name, cmd in commands.items()}
    failed = []
    for name, p in procs.items():
        out, err = p.communicate(timeout=400)
        if p.returncode != 0 or TRACEBACK in out + err:
            failed.append(f"{name}: rc {p.returncode}\n{err[-2000:]}")
    assert not failed, "\n".join(failed)
    yield Runs(store=tmp / "store", env=env, cwd=tmp)


def _json(text: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(text)
    return out


def _steps(runs: Runs, name: str) -> list[dict[str, Any]]:
    from stepscope.store import open_store

    st = open_store(runs.store)
    try:
        data = st.load(name)
        out = []
        for r in data.ranks:
            t = r.steps
            cols = {c: t[c].tolist() for c in ("index", "phase", "samples", "epoch")}
            out.extend({"rank": r.stream.rank, **{c: cols[c][i] for c in cols}} for i in range(len(cols["index"])))
        return out
    finally:
        st.close()


# -- the step counts behind every screen --------------------------------------------------------------------

def test_recorded_steps_match_the_scripts(runs: Runs) -> None:
    keras = _steps(runs, "keras")
    train = [s for s in keras if s["phase"] == 0]
    val = [s for s in keras if s["phase"] == 1]
    per_epoch = _batches(KERAS_SAMPLES, KERAS_BATCH)
    assert [s["samples"] for s in train] == per_epoch * KERAS_EPOCHS
    assert [s["samples"] for s in val] == _batches(KERAS_VAL, KERAS_BATCH) * KERAS_EPOCHS
    assert sorted({s["epoch"] for s in train}) == list(range(KERAS_EPOCHS))
    jax = _steps(runs, "jax")
    assert [s["samples"] for s in jax] == _batches(JAX_SAMPLES, JAX_BATCH) * JAX_EPOCHS
    mpi = _steps(runs, "mpi3")
    assert sorted(s["rank"] for s in mpi) == sorted(list(range(3)) * MPI_STEPS)
    assert all(math.isnan(s["samples"]) for s in mpi), "items of range() have no batch size: samples unknown"


# -- show, show --json ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["keras", "jax", "mpi3"])
def test_show(runs: Runs, name: str) -> None:
    out = runs.cli("show", name, "--width", "160")
    assert f"  {name}  completed" in out
    # no warnings box: the examples run as documented (train_jax.py passes no name / params that the launcher
    # would ignore with a warning)
    assert "Speed" in out and "Time per step by phase" in out and "warnings" not in out
    steps = {"keras": KERAS_EPOCHS * len(_batches(KERAS_SAMPLES, KERAS_BATCH)),
             "jax": JAX_EPOCHS * len(_batches(JAX_SAMPLES, JAX_BATCH)), "mpi3": MPI_STEPS}[name]
    assert re.search(rf"steps recorded\s*│\s*{steps} \(", out), out
    if name == "keras":
        params = (KERAS_FEATURES * KERAS_HIDDEN + KERAS_HIDDEN) + (KERAS_HIDDEN * KERAS_CLASSES + KERAS_CLASSES)
        assert f"{params:,} parameters" in out and "steps marked by keras" in " ".join(out.split())  # any wrap
        assert re.search(rf"epochs\s*│\s*{KERAS_EPOCHS}\b", out)
        val_steps = KERAS_EPOCHS * len(_batches(KERAS_VAL, KERAS_BATCH))
        assert re.search(rf"validation steps / throughput\s*│\s*{val_steps} /", out)
        assert "framework: keras: tensorflow" in out
        assert re.search(r"data wait\s*│\s*[\d.]+ [mµ]?s\s*│", out), out  # fit's data wait is measured, shown
    if name == "jax":
        assert "framework: jax: jax" in out and "train_step" in out
    if name == "mpi3":
        assert "world size 3" in out and "learner" in out and "actor" in out
        assert "0.0 samples/s" not in out, "samples unknown must not read as a throughput of 0"


@pytest.mark.parametrize("name", ["keras", "jax", "mpi3"])
def test_show_json(runs: Runs, name: str) -> None:
    d = _json(runs.cli("show", name, "--json"))
    assert d["run"]["name"] == name and d["run"]["status"] == "completed"
    steps = {"keras": KERAS_EPOCHS * len(_batches(KERAS_SAMPLES, KERAS_BATCH)),
             "jax": JAX_EPOCHS * len(_batches(JAX_SAMPLES, JAX_BATCH)), "mpi3": MPI_STEPS}[name]
    assert d["headline"]["steps"] == steps
    if name == "keras":
        assert d["framework"]["name"] == "keras" and d["framework"]["backend"] == "tensorflow"
        assert d["run"]["streams"][0]["step_source"] == "keras"
    if name == "jax":
        assert d["run"]["streams"][0]["step_source"] == "api"
    if name == "mpi3":
        assert d["run"]["world_size"] == 3 and len(d["ranks"]) == 3
        assert d["headline"]["samples_per_s"] is None


# -- report, advise, diff ------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["keras", "jax", "mpi3"])
def test_report(runs: Runs, name: str) -> None:
    page = runs.cwd / f"{name}.html"
    runs.cli("report", name, "-o", str(page))
    html = page.read_text(encoding="utf-8")
    sections = re.findall(r"<h2[^>]*>([^<]+)", html)
    for wanted in ("Overview", "Speed", "Time", "System"):
        assert wanted in sections, sections
    if name == "keras":
        assert "Model" in sections
    assert name in html


@pytest.mark.parametrize("name", ["keras", "jax", "mpi3"])
def test_advise(runs: Runs, name: str) -> None:
    out = runs.cli("advise", name, "--width", "160")
    assert "Recommendations" in out or "no recommendation" in out.lower(), out
    flat = " ".join(out.split())
    assert "TORCHINDUCTOR" not in flat and "no_sync" not in flat and "bucket_cap_mb=" not in flat, out
    if "[long-first-steps]" in flat and name != "mpi3":  # fires where compiling took >= 1 s (here: always)
        assert {"keras": "tf.function", "jax": "jax_compilation_cache_dir"}[name] in flat, out
    if name == "mpi3":  # the learner waits in Recv / Bcast for the sleeping actors: >= 15% of its step
        assert "[comm-not-overlapped]" in flat and re.search(r"non-blocking form \(I[a-z]+ ", flat), out


@pytest.mark.parametrize("name", ["keras", "jax", "mpi3"])
def test_diff_run_against_itself(runs: Runs, name: str) -> None:
    out = runs.cli("diff", name, name, "--width", "160")
    verdict = re.search(r"experiment vs baseline: (\S+(?: \S+)?)", out)
    assert verdict is not None, out
    assert verdict.group(1).upper().startswith(("INCONCLUSIVE", "NO CHANGE")), verdict.group(0)
    assert not re.search(r"\b(FASTER|SLOWER)\b", out), out


# -- MPI: ranks, communication matrix, scaling ---------------------------------------------------------------

def test_show_ranks_roles(runs: Runs) -> None:
    out = runs.cli("show", "mpi3", "--ranks", "--width", "200")
    assert "POP metrics" in out and "Roles" in out and "Bcast" in out
    d = _json(runs.cli("show", "mpi3", "--ranks", "--json"))
    assert [r["rank"] for r in d["ranks"]] == [0, 1, 2]
    (bcast,) = [o for o in d["comm_split"]["ops"] if o["op"] == "Bcast"]
    assert bcast["bytes_per_call"] == MPI_OBS * MPI_ACTIONS * 8  # the float64 weights


def test_comm_matrix_bytes(runs: Runs) -> None:
    out = runs.cli("show", "mpi3", "--comm-matrix", "--width", "200")
    assert "Bytes (row sends to column)" in out
    d = _json(runs.cli("show", "mpi3", "--comm-matrix", "--json"))
    experience = MPI_BATCH * (MPI_OBS + 2) * 8  # float64 rows: observation, action, reward
    weights = MPI_OBS * MPI_ACTIONS * 8
    for actor in (1, 2):
        summary = len(pickle.dumps({"reward": 0.5, "actor": actor}, PROTOCOL))  # floats pickle to 9 bytes each
        assert d["p2p_bytes"][actor][0] == MPI_STEPS * (experience + summary)
        assert d["p2p_bytes"][0][actor] == 0
    for src in range(3):  # each rank's Bcast payload spread over the 2 others; the closing Barrier has 0 bytes
        for dst in range(3):
            assert d["collective_bytes"][src][dst] == (0 if src == dst else MPI_STEPS * weights / 2)


def test_scaling_of_the_mpi_runs(runs: Runs) -> None:
    out = runs.cli("scaling", "--tag", "study=exarl", "--width", "200")
    assert "world sizes 2, 3" in out
    d = _json(runs.cli("scaling", "--tag", "study=exarl", "--json"))
    assert d["sizes"] == list(MPI_SIZES)
    rows = d["tables"][0]["rows"]
    assert [r["world_size"] for r in rows] == list(MPI_SIZES)
    for r in rows:
        assert r["total_time_mean_s"] > 0 and 0 < r["comm_share"] <= 1
        assert r["samples"] is None and r["total_throughput_mean"] is None, "no samples: no throughput of 0"
