"""One post-import hook mechanism for every framework stepscope observes (torch, TensorFlow, Keras, JAX, mpi4py).

A :class:`PostImportWatcher` on ``sys.meta_path`` compares one module name per lookup; when that module is
looked up it asks the other finders for the spec (so packages with finders of their own, such as mpi4py's
ABI finder, are found as without stepscope) and wraps the loader so that ``install`` runs once the module's
body has run (installing from inside the module's own import would see it half-initialised).

A lookup is not an import: ``importlib.util.find_spec("keras")`` (TensorFlow's ``__init__`` makes it to find
where ``tf.keras`` lives, before it imports keras) asks the finders too, and nothing executes the spec it
gets. So the watcher stays on ``sys.meta_path`` until a wrapped loader has really executed the module, and
only then removes itself: the import that comes after such a lookup is still seen.
"""

from __future__ import annotations

import importlib.abc
import sys
import threading
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any


class PostImportWatcher(importlib.abc.MetaPathFinder):
    """Runs ``install()`` once, right after the module ``name`` has finished loading, then leaves
    ``sys.meta_path``."""

    def __init__(self, name: str, install: Callable[[], None]) -> None:
        self.name = name
        self.install = install
        self.fired = False
        self._asking = threading.local()
        """Set while this watcher asks the other finders (one of them may look the name up again)."""

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None) -> Any:
        if fullname != self.name or self.fired or getattr(self._asking, "on", False):
            return None
        self._asking.on = True
        try:
            spec = None
            for finder in list(sys.meta_path):
                if finder is self:
                    continue  # another watcher of this name wraps the loader too: each installs once
                find = getattr(finder, "find_spec", None)
                if find is not None and (spec := find(fullname, path, target)) is not None:
                    break
        finally:
            self._asking.on = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        orig_exec = spec.loader.exec_module

        def exec_module(module: ModuleType) -> None:
            orig_exec(module)  # raises: the import failed, the watcher stays for a later try
            sys.modules.setdefault(fullname, module)
            self._fire()

        spec.loader.exec_module = exec_module
        return spec

    def _fire(self) -> None:
        if self.fired:
            return
        self.fired = True
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        self.install()


def after_import(name: str, install: Callable[[], None]) -> None:
    """``install()`` now if ``name`` is loaded, else right after its import finishes."""
    module = sys.modules.get(name)
    if module is not None and not getattr(getattr(module, "__spec__", None), "_initializing", False):
        install()
    else:
        sys.meta_path.insert(0, PostImportWatcher(name, install))
