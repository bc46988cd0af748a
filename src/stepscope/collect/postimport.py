"""One post-import hook mechanism for every framework stepscope observes (torch, TensorFlow, Keras, JAX, mpi4py).

A :class:`PostImportWatcher` on ``sys.meta_path`` compares one module name per import; when that module is
imported it asks the finders after itself for the spec (so packages with finders of their own, such as
mpi4py's ABI finder, are found as without stepscope) and wraps the loader so that ``install`` runs once the
module's body has run (installing from inside the module's own import would see it half-initialised).
"""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any


class PostImportWatcher(importlib.abc.MetaPathFinder):
    """Runs ``install()`` right after the module ``name`` has finished loading; removes itself on first use."""

    def __init__(self, name: str, install: Callable[[], None]) -> None:
        self.name = name
        self.install = install

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None) -> Any:
        if fullname != self.name:
            return None
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        spec = None
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            if find is not None and (spec := find(fullname, path, target)) is not None:
                break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        orig_exec, install = spec.loader.exec_module, self.install

        def exec_module(module: ModuleType) -> None:
            orig_exec(module)
            sys.modules.setdefault(fullname, module)
            install()

        spec.loader.exec_module = exec_module
        return spec


def after_import(name: str, install: Callable[[], None]) -> None:
    """``install()`` now if ``name`` is loaded, else right after its import finishes."""
    module = sys.modules.get(name)
    if module is not None and not getattr(getattr(module, "__spec__", None), "_initializing", False):
        install()
    else:
        sys.meta_path.insert(0, PostImportWatcher(name, install))
