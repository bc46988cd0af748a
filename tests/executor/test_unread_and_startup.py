"""Issue 44, item 3: `stepscope trace analyze` exits non-zero (3) when any rank could not be read, naming it, on the
local pool and on Dask alike; a Dask cluster that cannot start (every worker dies at start-up, or cannot make its
temporary folder) is one line and exit 2, never Dask's 40-line traceback or its log lines. Real CLI processes, a real
LocalCluster, real worker processes that die."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.executor.rankset import write_rank_set


def _trace(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "stepscope", "trace", *args], capture_output=True, text=True,
                          timeout=180, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT / "src"), **(env or {})})


@pytest.fixture(scope="module")
def damaged_set(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Ranks 0 to 3, rank 2's file cut in half (not readable)."""
    out = tmp_path_factory.mktemp("ranks4")
    paths = write_rank_set(out, 4, seconds=0.05)
    data = paths[2].read_bytes()
    paths[2].write_bytes(data[: len(data) // 2])
    return out


def _dask_installed() -> bool:
    try:
        import distributed  # noqa: F401
    except ImportError:
        return False
    return True


EXECUTORS = [["--workers", "1"], ["--workers", "2"]]
if _dask_installed():
    EXECUTORS.append(["--dask", "local:1"])


@pytest.mark.parametrize("where", EXECUTORS, ids=lambda w: " ".join(w))
def test_an_unreadable_rank_is_named_and_the_exit_status_is_3(damaged_set: Path, where: list[str]) -> None:
    """Before: exit 0, the missing rank only inside the printed tables (comm-matrix: among its notes)."""
    for action in (["analyze"], ["analyze", "--json"], ["kernels"], ["comm-matrix"]):
        out = _trace(*action, str(damaged_set), *where)
        assert out.returncode == 3, out.stderr[-2000:]
        assert out.stdout  # the figures of the three other ranks are printed
        lines = [ln for ln in out.stderr.splitlines() if ln.startswith("stepscope: error:")]
        assert lines == [lines[0]] and "1 of 4 traces could not be read (rank 2)" in lines[0], out.stderr
        assert "Traceback" not in out.stderr


def test_a_readable_set_exits_0(tmp_path: Path) -> None:
    write_rank_set(tmp_path, 2, seconds=0.05)
    out = _trace("analyze", str(tmp_path), "--workers", "1")
    assert out.returncode == 0 and "could not be read" not in out.stderr, out.stderr[-2000:]


needs_dask = pytest.mark.skipif(not _dask_installed(), reason="Dask's distributed is not installed")


def _one_line_failure(out: subprocess.CompletedProcess[str]) -> str:
    assert out.returncode == 2, out.stderr[-3000:]
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("stepscope: error: --dask local:2"), out.stderr[-3000:]
    return lines[0]


@needs_dask
def test_workers_that_die_at_start_up_are_one_line(tmp_path: Path, damaged_set: Path) -> None:
    """A worker preload that exits the worker process: before, a 40-line `RuntimeError: Nanny failed to start`
    traceback and exit 1."""
    die = tmp_path / "die_at_start.py"
    die.write_text("import os\n\n\ndef dask_setup(worker):\n    os._exit(1)\n")
    out = _trace("analyze", str(damaged_set), "--dask", "local:2",
                 env={"DASK_DISTRIBUTED__WORKER__PRELOAD": f'["{die}"]'})
    assert "could not start" in _one_line_failure(out)


@needs_dask
def test_a_temporary_folder_the_workers_cannot_make_is_one_line(tmp_path: Path, damaged_set: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    out = _trace("analyze", str(damaged_set), "--dask", "local:2",
                 env={"DASK_TEMPORARY_DIRECTORY": str(blocker / "sub")})
    line = _one_line_failure(out)
    assert "could not start" in line and "Not a directory" in line


_LOG_IN_WORKER = """
import functools, logging
from stepscope.executor.dask import DaskExecutor

if __name__ == "__main__":
    ex = DaskExecutor(local_workers=1)
    log = functools.partial(logging.Logger.error, logging.getLogger("distributed.worker"))
    out = ex.map(log, ["Failed to communicate with scheduler during heartbeat."])
    ex.close()
    print("done", [o.error for o in out])
"""


@needs_dask
def test_dask_log_lines_of_the_workers_are_silenced(tmp_path: Path) -> None:
    """The line a heartbeat that fails at shut-down logs (ERROR, from the worker process), logged on purpose in a
    real worker: nothing reaches stderr. Before: `distributed.worker - ERROR - Failed to communicate ...`."""
    script = tmp_path / "log_in_worker.py"
    script.write_text(_LOG_IN_WORKER)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=180, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert out.returncode == 0 and "done [None]" in out.stdout, out.stdout + out.stderr[-2000:]
    assert "Failed to communicate" not in out.stderr and "distributed." not in out.stderr, out.stderr[-2000:]
