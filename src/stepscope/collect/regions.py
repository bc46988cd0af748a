"""``region()``: a named, nestable timed span (context manager or decorator); ``timed`` is its decorator
form. Kept cheap (two clock reads, no lock): benchmarks/hook_costs.py times it.

Two implementations with the same semantics: the compiled ``_region.region`` (an optional C extension,
built by setup.py; issue 20's 0.5 µs budget) and :class:`PyRegion`, the pure-Python reference and fallback.
``region`` is the compiled one when it was built, unless ``STEPSCOPE_PURE_REGION=1``."""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, TypeVar, cast

from stepscope.collect.api import session_for_api
from stepscope.collect.core import session as _sessions

F = TypeVar("F", bound=Callable[..., Any])
_perf = time.perf_counter_ns
_tls = threading.local()
MAIN_STACK: list[str] = []
"""The main thread's region stack (the same list object), read by the stack sampler (stacks.py)."""


def _stack() -> list[str]:
    try:
        return _tls.stack  # type: ignore[no-any-return]
    except AttributeError:
        _tls.stack = MAIN_STACK if threading.current_thread() is threading.main_thread() else []
        return _tls.stack  # type: ignore[no-any-return]


class PyRegion:
    """Time a block: ``with region("name"):`` or ``@region("name")``. Nested regions get the path
    ``outer/inner``. Time is CPU wall clock (on CUDA: the time to launch the work, not to run it).

    The hot path: ``__init__``, ``__enter__`` and ``__exit__`` are the only Python calls, with two clock
    reads and one tuple appended to the session's lock-free region deque (tests/collect/core/test_hot_path.py)."""

    __slots__ = ("_path", "_session", "_stack", "_t0", "name")

    def __init__(self, name: str) -> None:
        self.name = f"{name}"  # str(name) without a call for a str (the usual case)

    def __enter__(self) -> PyRegion:
        s = _sessions._CURRENT
        if s is None or not s.active or s.disabled:
            s = session_for_api()  # standalone use: find or create one
        self._session = s
        try:
            stack = _tls.stack
        except AttributeError:
            stack = _stack()
        path = self._path = stack[-1] + "/" + self.name if stack else self.name
        stack.append(path)
        self._stack = stack  # the entering thread's: __exit__ runs in the same thread
        self._t0 = _perf()
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        t1 = _perf()
        stack = self._stack
        if stack:
            stack.pop()
        s = self._session
        if s is not None and not s.disabled:
            st = s.step
            if st.start is None:
                st.start = self._t0
            s.region_row((self._path, s.step_index, self._t0, t1, len(stack)))

    def __call__(self, fn: F) -> F:
        return _wrap(PyRegion, self.name, fn)


def _wrap(make: Callable[[str], AbstractContextManager[Any]], name: str, fn: F) -> F:
    """``fn`` timed as region ``name`` at every call (both implementations' ``__call__``)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with make(name):
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


ENV_PURE = "STEPSCOPE_PURE_REGION"
"""Set (non-empty) to make ``region`` the Python :class:`PyRegion` even where the compiled one was built."""

try:
    from stepscope.collect import _region
except ImportError:  # not built (the extension is optional): the Python reference serves
    CRegion: type[PyRegion] | None = None
else:
    _region.bind(globals(), vars(_sessions))
    CRegion = cast("type[PyRegion]", _region.region)  # the same interface (_region.pyi), not a subclass
region: type[PyRegion] = PyRegion if CRegion is None or os.environ.get(ENV_PURE) else CRegion
"""The region type in use: :data:`CRegion` (compiled) when built, else :class:`PyRegion`."""


def timed(name: str | Callable[..., Any] | None = None) -> Any:
    """Decorator: time every call of a function or method as a region (default name: its qualname).
    Usable bare (``@timed``) or with a name (``@timed("rollout")``)."""
    if callable(name):
        return region(getattr(name, "__qualname__", repr(name)))(name)

    def deco(fn: F) -> F:
        label: str = name if isinstance(name, str) and name else getattr(fn, "__qualname__", repr(fn))
        return region(label)(fn)

    return deco
