"""`stepscope run -- CMD`: create the run, start CMD with stepscope injected, pass everything through.

Injection is a sitecustomize on PYTHONPATH, which reaches `python script.py`, `python -m module`, the
torchrun launcher and every worker it starts, and processes that re-launch themselves (Lightning). The
child inherits stdin/stdout/stderr untouched; Ctrl-C reaches it directly (same process group) while the
launcher waits; SIGTERM / SIGHUP sent to the launcher are forwarded.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import stepscope
from stepscope.collect.core.options import ENV_OPTIONS, ENV_RUN_DIR, ENV_RUN_ID, Options
from stepscope.collect.startup.metadata import git_info, host_info, hostname, software_info
from stepscope.errors import UserError
from stepscope.model.run import GitInfo, Run, RunStatus
from stepscope.store.index import Index
from stepscope.store.rundir import process_start_ticks, write_end, write_manifest
from stepscope.store.store import Store

BOOT_DIR = Path(__file__).resolve().parent / "boot"


@dataclass(frozen=True, slots=True)
class LaunchResult:
    run_id: str
    run_dir: Path
    exit_code: int
    """The child's exit code; for a child killed by a signal, 128 + the signal number."""
    signal: int | None
    """The signal that killed the child, if one did."""
    status: RunStatus


def check_command(command: list[str]) -> None:
    """Fail before anything is written when the command cannot start."""
    if not command:
        raise UserError("no command to run — usage: stepscope run [OPTIONS] -- python train.py [ARGS]")
    exe = command[0]
    if os.sep in exe:
        if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
            raise UserError(f"cannot run {exe!r}: no such executable file — check the path")
    elif shutil.which(exe) is None:
        raise UserError(f"command not found: {exe!r} — check the spelling, or that it is on PATH")


def child_env(run_id: str, run_dir: Path, options: Options, base: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    paths = [str(BOOT_DIR)]
    pkg_parent = str(Path(stepscope.__file__).resolve().parent.parent)
    if "site-packages" not in pkg_parent and "dist-packages" not in pkg_parent:
        paths.append(pkg_parent)  # a source checkout: make the package importable in the child
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env[ENV_RUN_DIR] = os.path.abspath(run_dir)  # the training may chdir (Hydra does)
    env[ENV_RUN_ID] = run_id
    env[ENV_OPTIONS] = options.to_env()
    return env


def guess_world_size(command: list[str]) -> int:
    """World size from torchrun / mpirun arguments where given (streams correct it later)."""
    def arg(names: tuple[str, ...]) -> int | None:
        for i, a in enumerate(command):
            for n in names:
                if a == n and i + 1 < len(command):
                    v = command[i + 1]
                elif a.startswith(n + "="):
                    v = a.split("=", 1)[1]
                else:
                    continue
                try:
                    return int(v)
                except ValueError:
                    return None
        return None

    per_node = arg(("--nproc-per-node", "--nproc_per_node"))
    nodes = arg(("--nnodes",))
    mpi = arg(("-n", "-np", "--np"))
    if per_node:
        return per_node * (nodes or 1)
    return mpi or 1


RELEVANT_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "TF_NUM_INTEROP_THREADS", "TF_NUM_INTRAOP_THREADS",
                "PYTORCH_CUDA_ALLOC_CONF", "CUDA_VISIBLE_DEVICES", "STEPSCOPE_OVERRIDES")
"""Environment variables that change a training's speed, recorded with the run (with every ``NCCL_*``) so that
`advise --verify` re-runs the command as it ran."""


def relevant_env(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in sorted(env.items()) if k in RELEVANT_ENV or k.startswith("NCCL_")}


INDEX_NOTICE_S = 2.0
"""When the index stays locked longer than this while the run starts, the launcher says so (one line)."""


def create_run(store: Store, command: list[str], *, name: str | None, params: dict[str, str],
               tags: dict[str, str], options: Options, group: str | None = None,
               index_now: bool = True, env: Mapping[str, str] | None = None) -> tuple[Run, Path]:
    """The run's manifest in a new run directory, and (``index_now``) its index row. ``env``: the child's
    environment where it is not this process's (its speed-relevant variables are recorded)."""
    try:
        _ = store.index  # connect first: an unreachable database leaves no half-written run directory
    except UserError:
        if store.db_url.startswith(("postgresql://", "postgres://")):
            raise
        # a new SQLite index another process holds locked: the training starts; its row is written later
    run_id, run_dir = store.new_run_dir()
    run_dir = Path(os.path.abspath(run_dir))  # the training may chdir: everything handed on is absolute
    script = next((Path(a).stem for a in command if a.endswith(".py")), Path(command[0]).name)
    start_ns = time.time_ns()
    git: list[GitInfo | None] = []
    asking_git = threading.Thread(target=lambda: git.append(git_info(Path.cwd())), daemon=True,
                                  name="stepscope-git")
    asking_git.start()  # git's processes run while this thread reads the host (both mostly wait)
    host, software = host_info(), software_info()
    asking_git.join()
    run = Run(id=run_id, name=name or script, status=RunStatus.RUNNING, start_ns=start_ns, end_ns=None,
              command=tuple(command), cwd=os.getcwd(), exit_code=None, git=git[0] if git else None, host=host,
              software=software, world_size=guess_world_size(command), params=params, tags=tags,
              options=asdict(options), group=group,
              extra={"launcher_pid": os.getpid(), "launcher_host": hostname(),
                     "launcher_start": process_start_ticks(), "env": relevant_env(os.environ if env is None else env)})
    write_manifest(run_dir, run)
    if index_now:
        store.index.upsert_run(run, str(run_dir))
    return run, run_dir


class _IndexInBackground:
    """The run's first index row, written while the training runs: a locked index (another process
    holding SQLite's write lock) never delays the training's start. Past :data:`INDEX_NOTICE_S` the
    launcher says so in one line; a failure is one warning (``stepscope store reindex`` repairs)."""

    def __init__(self, store: Store, run: Run, run_dir: Path) -> None:
        self.error: str | None = None
        self._run_dir = run_dir
        self._thread = threading.Thread(target=self._upsert, args=(store, run, run_dir), daemon=True,
                                        name="stepscope-index")
        self._done = threading.Event()
        self._stop = threading.Event()
        self._thread.start()
        self._notice = threading.Timer(INDEX_NOTICE_S, self._say_waiting)
        self._notice.daemon = True
        self._notice.start()

    def _upsert(self, store: Store, run: Run, run_dir: Path) -> None:
        try:
            while True:  # a connection of this thread's own (sqlite3 objects stay in theirs)
                try:
                    index = Index(store.db_url, store_key=store.key, groups_dir=store.root / "groups")
                    break
                except UserError:  # a new index still locked by another process: retry until the run ends
                    if self._stop.wait(0.2):
                        raise
            try:
                index.upsert_run(run, str(run_dir))
            finally:
                index.close()
        except BaseException as e:
            self.error = f"{type(e).__name__}: {e}" if not isinstance(e, UserError) else str(e)
        finally:
            self._done.set()

    def _say_waiting(self) -> None:
        if not self._done.is_set():
            print(f"stepscope: the index is busy (locked by another process); the training runs and is recorded "
                  f"in {self._run_dir}; it is indexed when the lock frees", file=sys.stderr, flush=True)

    def wait(self) -> None:
        self._stop.set()
        self._thread.join()
        self._notice.cancel()


def _warn(text: str) -> None:
    """A stepscope failure after the child started: one line, never the exit code."""
    print(f"stepscope: warning: {text}", file=sys.stderr, flush=True)


def launch(store: Store, command: list[str], *, name: str | None = None, params: dict[str, str] | None = None,
           tags: dict[str, str] | None = None, options: Options | None = None, group: str | None = None,
           extra_env: dict[str, str] | None = None, meanwhile: Callable[[], None] | None = None) -> LaunchResult:
    """Run ``command`` observed; return when it has exited and the end record is written.

    ``meanwhile``: the launcher's own work done while the child runs (such as importing what prints the summary),
    on a thread started once the child has started, finished before this returns; its errors are ignored (the
    work is done again where it is needed, and fails there with its own message).

    Everything stepscope does after the child started is guarded: a full disk, a read-only or deleted
    run directory or a locked index become one-line warnings, and the child's exit code passes through."""
    check_command(command)
    options = options or Options()
    run, run_dir = create_run(store, command, name=name, params=dict(params or {}), tags=dict(tags or {}),
                              options=options, group=group, index_now=False,
                              env={**os.environ, **extra_env} if extra_env else None)
    env = child_env(run.id, run_dir, options)
    env.update(extra_env or {})
    indexing = _IndexInBackground(store, run, run_dir)
    rc = _run_child(command, env, meanwhile)
    end_ns = time.time_ns()
    sig = -rc if rc < 0 else None
    exit_code = 128 + sig if sig is not None else rc
    status = RunStatus.INCOMPLETE if sig is not None else (RunStatus.COMPLETED if rc == 0 else RunStatus.FAILED)
    try:
        write_end(run_dir, status=status, end_ns=end_ns, exit_code=exit_code,
                  reason=f"signal:{signal.Signals(sig).name}" if sig else None)
    except Exception as e:
        _warn(f"could not write the run's end record in {run_dir} ({_why(e)}); the run reads as incomplete")
    indexing.wait()
    if indexing.error:
        _warn(f"could not index the run at its start ({indexing.error})")
    try:
        store.index.upsert_run(replace(run, status=status, end_ns=end_ns, exit_code=exit_code), str(run_dir))
    except Exception as e:
        _warn(f"could not index the run ({_why(e)}); `stepscope store reindex` adds it")
    return LaunchResult(run.id, run_dir, exit_code, sig, status)


def _why(e: BaseException) -> str:
    if isinstance(e, OSError):
        return e.strerror or str(e)
    return str(e) if isinstance(e, UserError) else f"{type(e).__name__}: {e}"


def _run_child(command: list[str], env: dict[str, str], meanwhile: Callable[[], None] | None = None) -> int:
    try:
        proc = subprocess.Popen(command, env=env)
    except OSError as e:
        raise UserError(f"cannot start {command[0]!r}: {e.strerror or e}") from None
    helper = None
    if meanwhile is not None:
        helper = threading.Thread(target=_quietly, args=(meanwhile,), daemon=True, name="stepscope-meanwhile")
        helper.start()

    def forward(signum: int, frame: Any) -> None:
        try:
            proc.send_signal(signum)
        except ProcessLookupError:
            pass

    def ignore(signum: int, frame: Any) -> None:
        """A terminal's Ctrl-C reaches the child directly (same process group); forwarding it would
        deliver it twice. (A Python handler, not SIG_IGN, which the child would inherit.)"""

    previous = {}
    for sig, handler in ((signal.SIGTERM, forward), (signal.SIGHUP, forward), (signal.SIGINT, ignore)):
        try:
            previous[sig] = signal.signal(sig, handler)
        except (ValueError, OSError):
            pass
    try:
        while True:
            try:
                return proc.wait()
            except KeyboardInterrupt:
                continue
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
        if helper is not None:
            helper.join()


def _quietly(work: Callable[[], None]) -> None:
    try:
        work()
    except BaseException:  # done again where it is needed, which reports its own failure
        pass
