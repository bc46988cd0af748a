"""SIGTERM keeps its default meaning for an observed process (issue 19, item 2).

Real processes, real signals, each case run bare and under `stepscope run`: a script that creates and
terminates multiprocessing Pools in a loop (their forked workers get SIGTERM while they start), and a
2-rank gloo job whose rank 0 is blocked in C in an all-reduce. Both end within 2 s of SIGTERM, as bare,
and the observed process still writes its records before it dies.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import PY, load, stepscope_cmd

HERE = Path(__file__).resolve().parent / "collect_scripts"
pytestmark = pytest.mark.slow


def _env(store: Path) -> dict[str, str]:
    env = {**os.environ, "STEPSCOPE_HOME": str(store)}
    env.pop("STEPSCOPE_DB", None)
    return env


def _start(cmd: list[str], store: Path, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(store),
                            cwd=cwd, start_new_session=True)


def _wait_line(proc: subprocess.Popen[str], prefix: str, timeout: float = 240) -> str:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith(prefix):
            return line
    _kill_group(proc)
    raise AssertionError(f"no line {prefix!r}: {proc.stderr.read()[-3000:] if proc.stderr else ''}")


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


def _seconds_to_die(proc: subprocess.Popen[str], limit: float = 30.0) -> tuple[float, int | None]:
    """SIGTERM to ``proc`` (the launcher or the bare script); seconds until it exited, and its code."""
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        rc: int | None = proc.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        rc = None
    took = time.monotonic() - t0
    _kill_group(proc)  # whatever the signal left behind (a hung rank) goes now
    return took, rc


def test_pool_create_terminate_loop_runs_and_dies_of_sigterm_as_bare(store: Path, tmp_path: Path) -> None:
    script = str(HERE / "pool_loop.py")
    # the loop itself: 20 create/terminate cycles end (before the fix: the first cycle hung forever)
    done = subprocess.run(stepscope_cmd("run", "--quiet", "--sample-interval", "0", "--", PY, script, "20"),
                          capture_output=True, text=True, env=_env(store), cwd=tmp_path, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "cycle 20" in done.stdout
    data = load(store)
    assert data.run.status.value == "completed" and len(data.ranks) == 1 and len(data.ranks[0].steps) == 3

    # SIGTERM in the middle of the loop: the launcher and the script die of it within 2 s, as bare
    for observed in (False, True):
        cmd = stepscope_cmd("run", "--quiet", "--sample-interval", "0", "--", PY, script, "-1") if observed \
            else [PY, script, "-1"]
        proc = _start(cmd, store, tmp_path)
        _wait_line(proc, "cycle 5")
        took, rc = _seconds_to_die(proc)
        print(f"Pool loop, {'observed' if observed else 'bare'}: dead {took:.2f} s after SIGTERM")
        assert rc == -signal.SIGTERM, (observed, rc)
        assert took < 2.0, f"{'observed' if observed else 'bare'}: {took:.2f} s after SIGTERM"
    data = load(store)
    assert data.run.status.value == "incomplete" and data.run.exit_code == 128 + signal.SIGTERM
    assert data.ranks[0].stream.exit_reason == "signal:SIGTERM"  # the records were written before it died
    assert len(data.ranks[0].steps) == 3


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")


def test_gloo_rank_blocked_in_all_reduce_dies_of_sigterm_within_2s_as_bare(store: Path, tmp_path: Path) -> None:
    """SIGTERM to the rank blocked in C (as SLURM or torchrun send it): it dies within 2 s, as bare;
    then the whole job ends (torchrun sees the failed rank) no later than bare plus 2 s."""
    torchrun = [PY, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                str(HERE / "gloo_blocked.py")]
    rank_s, job_s = {}, {}
    for observed in (False, True):
        cmd = stepscope_cmd("run", "--quiet", "--sample-interval", "0", "--", *torchrun) if observed else torchrun
        proc = _start(cmd, store, tmp_path)
        pid = int(_wait_line(proc, "BLOCKED").split()[1])
        time.sleep(0.5)  # rank 0 is inside all_reduce now
        t0 = time.monotonic()
        os.kill(pid, signal.SIGTERM)
        while not _gone(pid) and time.monotonic() - t0 < 30:
            time.sleep(0.02)
        rank_s[observed] = time.monotonic() - t0
        try:
            rc: int | None = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            rc = None
        job_s[observed] = time.monotonic() - t0
        _kill_group(proc)
        assert rc is not None and rc != 0, (observed, rc)
    print(f"rank 0 dead after SIGTERM: bare {rank_s[False]:.2f} s, observed {rank_s[True]:.2f} s; job ended: "
          f"bare {job_s[False]:.2f} s, observed {job_s[True]:.2f} s")
    assert rank_s[False] < 2.0 and rank_s[True] < 2.0, rank_s
    assert job_s[True] < job_s[False] + 2.0, job_s
    data = load(store)
    by_rank = {r.stream.rank: r for r in data.ranks}
    assert sorted(by_rank) == [0, 1]
    # rank 0 was blocked in C when SIGTERM came: its records were still written, then it died of it
    assert by_rank[0].stream.exit_reason == "signal:SIGTERM"
    assert len(by_rank[0].steps) == 2


def test_forked_child_keeps_default_sigterm_and_no_wakeup_fd(store: Path, tmp_path: Path) -> None:
    """A forked child of an observed, training process runs no stepscope handler: its SIGTERM
    disposition is SIG_DFL and it has no wakeup fd of ours (which would signal the parent)."""
    code = (
        "import os, signal, sys, torch\n"
        "m = torch.nn.Linear(2, 1); o = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "m(torch.ones(1, 2)).sum().backward(); o.step()\n"
        "parent = (signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)\n"
        "r, w = os.pipe()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    fd = signal.set_wakeup_fd(-1)\n"
        "    os.write(w, f'{signal.getsignal(signal.SIGTERM) is signal.SIG_DFL} {fd}'.encode())\n"
        "    os._exit(0)\n"
        "os.waitpid(pid, 0)\n"
        "print('parent-default', parent, 'child', os.read(r, 100).decode(), flush=True)\n"
    )
    for observed in (False, True):
        cmd = stepscope_cmd("run", "--quiet", "--sample-interval", "0", "--", PY, "-c", code) if observed \
            else [PY, "-c", code]
        r = subprocess.run(cmd, capture_output=True, text=True, env=_env(store), cwd=tmp_path, timeout=120)
        assert r.returncode == 0, r.stderr[-2000:]
        # observed: the parent has stepscope's handler; the child is back to the default, no wakeup fd
        assert f"parent-default {not observed} child True -1" in r.stdout, r.stdout


def test_user_handler_is_left_alone(store: Path, tmp_path: Path) -> None:
    """A script with its own SIGTERM handler keeps it: stepscope installs nothing over it."""
    code = (
        "import os, signal, time, torch\n"
        "signal.signal(signal.SIGTERM, lambda s, f: (print('USER HANDLER', flush=True), os._exit(7)))\n"
        "m = torch.nn.Linear(2, 1); o = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "m(torch.ones(1, 2)).sum().backward(); o.step()\n"
        "print('READY', flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = _start(stepscope_cmd("run", "--quiet", "--sample-interval", "0", "--", PY, "-c", code), store, tmp_path)
    _wait_line(proc, "READY")
    took, rc = _seconds_to_die(proc)
    assert rc == 7 and took < 2.0
