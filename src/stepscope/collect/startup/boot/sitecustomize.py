"""Injected by `stepscope run` (through PYTHONPATH) into every Python process of the observed command.

Chain-loads the user's own sitecustomize, then waits: stepscope's recorder starts only when the process first
imports a framework it observes (``WATCHED``) or stepscope itself. A process that imports none of them (a
launcher script, a data-preparation step, ``python -c pass``) never loads stepscope and pays one name
comparison per import. Never raises.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing itself is not imported: most processes never need it
if TYPE_CHECKING:
    from collections.abc import Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType

WATCHED = frozenset({"torch", "tensorflow", "keras", "jax", "mpi4py"})
"""Top-level packages under which collect/startup/bootstrap.py's ``attach`` watches imports (a test keeps the two
equal): the recorder starts before the first of them runs its body, so each framework's own watcher still wraps it."""
_OWN = "stepscope"
_booted = False


def _chain_user_sitecustomize() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    import importlib.machinery
    import importlib.util

    path = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


def _boot() -> None:
    """Start the recorder once (a second thread arriving during the first's boot skips it)."""
    global _booted
    if _booted:
        return
    _booted = True
    try:
        from stepscope.collect.startup.bootstrap import boot

        boot()
    except Exception as e:
        print(f"stepscope: cannot observe this process ({e!r}); it runs unobserved", file=sys.stderr)


def _find(fullname: str, path: Sequence[str] | None, target: ModuleType | None, skip: object) -> ModuleSpec | None:
    """The spec as the finders other than ``skip`` give it (those of frameworks with finders of their own too)."""
    for finder in list(sys.meta_path):
        find = getattr(finder, "find_spec", None) if finder is not skip else None
        if find is not None:
            spec: ModuleSpec | None = find(fullname, path, target)
            if spec is not None:
                return spec
    return None


class FirstImportBoot:
    """A finder on ``sys.meta_path`` that starts the recorder at the first lookup of a watched package (before
    its body runs; the frameworks' own watchers then wrap it) or once ``stepscope`` itself has been imported
    (the recorder is part of that package), then leaves ``sys.meta_path``. A lookup of stepscope that imports
    nothing (``importlib.util.find_spec``) leaves it in place. Duck-typed: importing importlib.abc would cost
    every process a few ms."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if fullname not in WATCHED and fullname != _OWN:
            return None
        if fullname in WATCHED:
            self._leave()
            _boot()
            return _find(fullname, path, target, self)
        spec = _find(fullname, path, target, self)
        loader = spec.loader if spec is not None else None
        exec_module = getattr(loader, "exec_module", None)
        if exec_module is None:
            return spec

        def exec_then_boot(module: ModuleType) -> None:
            exec_module(module)
            sys.modules.setdefault(fullname, module)
            self._leave()
            _boot()

        loader.exec_module = exec_then_boot  # type: ignore[union-attr,method-assign]
        return spec

    def _leave(self) -> None:
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass


try:
    _chain_user_sitecustomize()
except Exception as _e:  # the user's own sitecustomize failed: say so, as Python would
    print(f"Error in user sitecustomize (loaded by stepscope): {_e!r}", file=sys.stderr)

if os.environ.get("STEPSCOPE_RUN_DIR") and not os.environ.get("STEPSCOPE_DISABLE"):
    if any(name in sys.modules for name in (*WATCHED, _OWN)):
        _boot()  # the user's sitecustomize imported one already
    else:
        sys.meta_path.insert(0, FirstImportBoot())
