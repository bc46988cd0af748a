"""Start recording inside an observed process: a dormant Session plus hooks once torch is imported."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from stepscope.collect.core.options import ENV_DISABLE, ENV_RUN_DIR, ENV_RUN_ID, Options
from stepscope.collect.core.session import Session, current, set_current
from stepscope.collect.startup.postimport import after_import

LAUNCHER_MODULES = ("torch.distributed.run", "torch.distributed.launch", "torch.distributed.elastic")
LAUNCHER_SCRIPTS = ("torchrun",)


def is_helper_process(argv: Sequence[str]) -> bool:
    """A launcher (torchrun): observed through its workers only. (Multiprocessing children, spawned or
    forked, get a dormant session like any process: it records only if the child trains, so
    ``torch.multiprocessing.spawn`` training is observed, one stream per training child, while
    DataLoader workers, pools and the resource tracker leave nothing.)"""
    if any(os.path.basename(a) in LAUNCHER_SCRIPTS for a in argv[:3]):
        return True
    return any(m in argv[:4] for m in LAUNCHER_MODULES)


def boot() -> None:
    """Called from the injected sitecustomize."""
    run_dir = os.environ.get(ENV_RUN_DIR)
    if not run_dir or os.environ.get(ENV_DISABLE):
        return
    argv = list(getattr(sys, "orig_argv", sys.argv))
    if is_helper_process(argv):
        return
    session = Session(Path(run_dir), os.environ.get(ENV_RUN_ID, ""), Options.from_env())
    set_current(session)
    attach(session)


def attach(session: Session) -> None:
    """Install the torch hooks now if torch is loaded, else right after it finishes loading."""
    os.register_at_fork(after_in_child=session.after_fork_in_child)
    from stepscope.collect.startup.mpiboot import attach_mpi

    attach_mpi(session)  # mpi4py's calls are timed once it is imported (collect/mpi/mpi.py)
    after_import("torch", lambda: _install(session))
    from stepscope.collect.startup.keras_boot import watch_frameworks

    watch_frameworks(session)


def _install(session: Session) -> None:
    from stepscope.collect.torch.hooks import install_torch_hooks

    if current() is session and not getattr(session, "_hooks_installed", False):
        session._hooks_installed = True  # type: ignore[attr-defined]
        try:
            install_torch_hooks(session)
        except Exception as e:
            session.warn_once("install", f"could not install the torch hooks ({e})")
