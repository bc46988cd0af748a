"""Post-import hook for mpi4py: the MPI call timing (collect/mpi.py) goes in right after ``mpi4py.MPI``
has finished loading. Imports nothing of mpi4py itself: a script that never imports it pays one string
comparison per import."""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from stepscope.collect.session import Session, current

MPI_MODULE = "mpi4py.MPI"


def attach_mpi(session: Session) -> None:
    """Time mpi4py now if it is loaded, else right after it finishes loading."""
    if not session.options.comm_timing:
        return
    if MPI_MODULE in sys.modules:
        install(session)
    else:
        sys.meta_path.insert(0, MpiImportWatcher(session))


def install(session: Session) -> None:
    if current() is not session or getattr(session, "_mpi_installed", False):
        return
    session._mpi_installed = True  # type: ignore[attr-defined]
    try:
        from stepscope.collect.hooks import _UNDO
        from stepscope.collect.mpi import install_mpi_hooks

        install_mpi_hooks(session, sys.modules[MPI_MODULE], _UNDO)
    except Exception as e:
        session.warn_once("install:mpi", f"could not time mpi4py calls ({e})")


class MpiImportWatcher(importlib.abc.MetaPathFinder):
    """Wraps the loader of ``mpi4py.MPI`` (an extension module, found by the finders after this one,
    mpi4py's own ABI finder included): the hooks go in once its body has run."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None) -> Any:
        if fullname != MPI_MODULE:
            return None
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        spec = None
        for finder in list(sys.meta_path):  # mpi4py 4 picks its ABI variant with its own finder
            find = getattr(finder, "find_spec", None)
            if find is not None:
                spec = find(fullname, path, target)
                if spec is not None:
                    break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader
        orig_exec = loader.exec_module
        session = self.session

        def exec_module(module: ModuleType) -> None:
            orig_exec(module)
            sys.modules.setdefault(MPI_MODULE, module)
            install(session)

        loader.exec_module = exec_module
        return spec
