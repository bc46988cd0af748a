"""Post-import hook for mpi4py: the MPI call timing (collect/mpi/mpi.py) goes in right after ``mpi4py.MPI``
has finished loading. Imports nothing of mpi4py itself: a script that never imports it pays one string
comparison per import."""

from __future__ import annotations

import sys

from stepscope.collect.core.session import Session, current
from stepscope.collect.startup.postimport import after_import

MPI_MODULE = "mpi4py.MPI"


def attach_mpi(session: Session) -> None:
    """Time mpi4py now if it is loaded, else right after it finishes loading."""
    if not session.options.comm_timing:
        return
    after_import(MPI_MODULE, lambda: install(session))


def install(session: Session) -> None:
    if current() is not session or getattr(session, "_mpi_installed", False):
        return
    session._mpi_installed = True  # type: ignore[attr-defined]
    try:
        from stepscope.collect.core.undo import UNDO
        from stepscope.collect.mpi.mpi import install_mpi_hooks

        install_mpi_hooks(session, sys.modules[MPI_MODULE], UNDO)
    except Exception as e:
        session.warn_once("install:mpi", f"could not time mpi4py calls ({e})")
