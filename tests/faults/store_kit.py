"""Helpers of the store fault tests: real stores with runs written through the store's own API, and the CLI in a
real subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from stepscope.model.run import HostInfo, Run, RunStatus, SoftwareInfo
from stepscope.store import open_store
from stepscope.store.rundir import write_end, write_manifest

ROOT = Path(__file__).resolve().parents[2]


def make_runs(root: Path, names: list[str], db: str | None = None, group: str | None = None,
              metrics: dict[str, float] | None = None) -> list[str]:
    """Runs named ``names`` in the store at ``root`` (created), each a manifest, an end record and an index row
    (with ``metrics`` when given)."""
    st = open_store(root, db, create=True)
    ids = []
    try:
        for name in names:
            run_id, path = st.new_run_dir()
            now = time.time_ns()
            run = Run(id=run_id, name=name, status=RunStatus.COMPLETED, start_ns=now, end_ns=now + 10**9,
                      command=("python", "train.py"), cwd=str(root), exit_code=0, git=None,
                      host=HostInfo("h", "Linux", None, 1, 2, 1000),
                      software=SoftwareInfo(python="3.11", stepscope="dev"), world_size=1, group=group,
                      params={"lr": "0.1"})
            write_manifest(path, run)
            write_end(path, status=RunStatus.COMPLETED, end_ns=now + 10**9, exit_code=0)
            st.index.upsert_run(run, str(path), metrics)
            ids.append(run_id)
    finally:
        st.close()
    return ids


def cli(*args: str, store: Path | None = None, db: str | None = None, cwd: Path | None = None,
        stdin: int | None = subprocess.DEVNULL, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`python -m stepscope ARGS` in a subprocess (stdin not a terminal unless given)."""
    env = {k: v for k, v in os.environ.items() if k not in ("STEPSCOPE_HOME", "STEPSCOPE_DB")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    extra = [*(["--store", str(store)] if store else []), *(["--db", db] if db else [])]
    return subprocess.run([sys.executable, "-m", "stepscope", *args, *extra], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env=env, stdin=stdin)


def one_line_error(p: subprocess.CompletedProcess[str]) -> str:
    """The single line a refused command printed on stderr (asserting there is exactly one, no traceback)."""
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode != 0, p
    assert "Traceback" not in p.stderr, p.stderr
    assert lines, p
    return lines[-1]
