"""Timing a watched model's forward from torch's own per-instance call slot, with no module hook.

A module with any forward hook takes torch's slow ``Module._call_impl`` path: a closure, a set, loops over
the hook dictionaries and a try block, on every call (issue 20: +9 to +15 us of a real step, most of
stepscope's cost). ``Module.__call__`` first reads ``self._compiled_call_impl`` (where ``module.compile()``
puts its compiled call) and calls it in place of ``_call_impl``. A watched model gets a function there
(``timed_slot``) that times the call and calls the real one (``_call_impl``, or what ``module.compile()`` had
put there); torch then runs the model's forward on its fast path, inside stepscope's timing.

The slot is torch's private attribute: it is used only where :func:`slot_fault` finds, on the installed torch,
that a module calls what is put there exactly once per call and leaves it out of its pickled state; otherwise
every model keeps public forward hooks (modules.py).

Nothing of it travels with the model: torch's ``Module.__getstate__`` leaves ``_compiled_call_impl`` out
of pickles, ``torch.save`` and deep copies; TorchScript records a function there as an attribute it could
not compile, used by no scripted method. DataParallel's replicas (``__dict__`` copies) are given the slot's
previous value back. A model whose class changes any of these (its own ``__getstate__``,
``__deepcopy__``, ``__reduce__``, ``__call__``: DDP, a parametrized root, ``torch.compile``'s wrapper)
keeps forward hooks (``wrappable``). ``module.compile()`` called on a watched model replaces the slot;
``recheck`` (run on the flush thread) wraps the new value.
"""

from __future__ import annotations

import pickle
import threading
from collections.abc import Callable
from typing import Any

SLOT = "_compiled_call_impl"

Call = Callable[[Any, Callable[..., Any], tuple[Any, ...], dict[str, Any]], Any]
"""``call(model, impl, args, kwargs)``: the hooks around ``impl(*args, **kwargs)`` (``python_call``)."""

SlotMaker = Callable[[Any, Callable[..., Any]], Callable[..., Any]]
"""``make(model, impl)``: what goes in the model's call slot, the hooks around ``impl`` (``python_slots``)."""


def python_call(pre: Callable[[Any, Any], None], post: Callable[[Any, Any, Any], None]) -> Call:
    """The pre-hook, the call, and the post-hook also when the call raises (the hooks' ``always_call``)."""

    def call(model: Any, impl: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        pre(model, args)
        try:
            return impl(*args, **kwargs)
        finally:
            post(model, args, None)

    return call


def wrappable(model: Any) -> bool:
    """Whether the model's call can be timed from its call slot: its class keeps torch's ``__call__`` and the
    copy and pickle methods that leave the slot out. A TorchScript model takes no module hooks, and copies, saves
    and replicates itself through its C++ module, never its ``__dict__``: the slot serves it."""
    import torch
    from torch import nn

    cls = type(model)
    if isinstance(model, torch.jit.ScriptModule):
        return cls.__call__ is nn.Module.__call__ and SLOT in vars(nn.Module)
    same = ("__call__", "__getstate__", "__setstate__", "__reduce__", "__reduce_ex__",
            "_replicate_for_data_parallel")
    try:
        return (isinstance(model, nn.Module) and all(getattr(cls, n) is getattr(nn.Module, n) for n in same)
                and not hasattr(cls, "__deepcopy__") and not hasattr(cls, "__copy__") and SLOT in vars(nn.Module))
    except AttributeError:  # a torch without one of these: keep the hooks
        return False


def python_slots(pre: Callable[[Any, Any], None], post: Callable[[Any, Any, Any], None]) -> SlotMaker:
    """The slot maker: ``timed_slot`` of ``python_call(pre, post)``."""
    call = python_call(pre, post)
    tracing = _dynamo_tracing()

    def make(model: Any, impl: Callable[..., Any]) -> Callable[..., Any]:
        return timed_slot(call, model, impl, tracing)

    return make


def _dynamo_tracing() -> Callable[[], bool]:
    """``torch.compiler.is_dynamo_compiling``: False when run, True to dynamo tracing the call (a constant in its
    graph); where this torch has none, never."""
    try:
        from torch.compiler import is_dynamo_compiling
    except ImportError:
        return lambda: False
    return is_dynamo_compiling


def timed_slot(call: Call, model: Any, impl: Callable[..., Any], tracing: Callable[[], bool]) -> Callable[..., Any]:
    """The Python function put in the model's call slot. TorchScript, finding a function among a module's
    attributes, tries to compile it and, failing, leaves it out. Dynamo tracing the model's call (``torch.compile``
    of a module holding the watched model, ``fullgraph=True`` included) traces through this function: ``tracing()``
    is True there, and the model's call goes into the graph without the hooks (which read clocks dynamo cannot
    trace)."""

    def _compiled_call_impl(*args: Any, **kwargs: Any) -> Any:
        if tracing():
            return impl(*args, **kwargs)
        return call(model, impl, args, kwargs)

    return _compiled_call_impl


class CallSlots:
    """The watched models timed from their call slot: install, recheck, remove. The flush thread's recheck and the
    training thread's install and remove hold one lock, so a recheck never wraps a slot the session gave back."""

    def __init__(self, make: SlotMaker) -> None:
        self.make = make
        """what goes in each slot"""
        self.slots: list[tuple[Any, Callable[..., Any], bool, Any]] = []
        """(model, our function, whether the slot had a value of the model's own, that value)"""
        self._replicate: Any = None
        self._lock = threading.Lock()

    def install(self, model: Any) -> None:
        own = vars(model)
        prev = own.get(SLOT)
        with self._lock:
            self._wrap(model, SLOT in own, prev, prev if prev is not None else model._call_impl)
            if self._replicate is None:
                self._patch_replicate()

    def recheck(self) -> None:
        """Wrap what replaced a model's slot (``module.compile()`` after the model was watched; or the slot emptied).
        Runs on the flush thread: one dict read per model, and a store (atomic under the GIL) only when it
        changed."""
        with self._lock:
            for entry in list(self.slots):
                model, fn = entry[0], entry[1]
                own = vars(model)
                cur = own.get(SLOT)
                if cur is not fn:  # set to None or deleted: torch calls _call_impl, timed as at install
                    self.slots.remove(entry)
                    self._wrap(model, SLOT in own, cur, cur if cur is not None else model._call_impl)

    def remove(self) -> None:
        with self._lock:
            for model, fn, had, prev in self.slots:
                _give_back(vars(model), fn, had, prev)
            self.slots = []
            if self._replicate is not None:
                from torch import nn

                nn.Module._replicate_for_data_parallel = self._replicate  # type: ignore[method-assign]
                self._replicate = None

    def _wrap(self, model: Any, had: bool, prev: Any, impl: Callable[..., Any]) -> None:
        fn = self.make(model, impl)
        vars(model)[SLOT] = fn
        self.slots.append((model, fn, had, prev))

    def _patch_replicate(self) -> None:
        """DataParallel's replicas copy the model's ``__dict__``: give each the slot's previous value, or none,
        so that a replica runs its own forward and not the watched model's."""
        from torch import nn

        orig: Callable[[Any], Any] = nn.Module._replicate_for_data_parallel
        ours = self

        def _replicate_for_data_parallel(module: Any) -> Any:
            replica = orig(module)
            with ours._lock:
                for _model, fn, had, prev in ours.slots:
                    _give_back(vars(replica), fn, had, prev)
            return replica

        self._replicate = orig
        nn.Module._replicate_for_data_parallel = _replicate_for_data_parallel  # type: ignore[method-assign]


def _give_back(own: dict[str, Any], fn: Callable[..., Any], had: bool, prev: Any) -> None:
    """A module's ``__dict__`` given the slot it had before ``fn`` was put there, where ``fn`` is still there
    (a value put there since is the user's, and stays)."""
    if own.get(SLOT) is not fn:
        return
    if had:
        own[SLOT] = prev
    else:
        del own[SLOT]


def slot_fault() -> str | None:
    """None where, on this torch, a module with a function in its call slot calls that function exactly once per
    call with the call's arguments, returns what it returns, and pickles without it; else why not (the models
    then keep public forward hooks). Checked on a tiny module."""
    try:
        import torch
        from torch import nn

        if SLOT not in vars(nn.Module):
            return f"torch.nn.Module has no {SLOT}"
        m = nn.Identity()
        x = torch.zeros(1)
        calls: list[tuple[Any, ...]] = []
        marker = torch.ones(1)

        def slot(*args: Any, **kwargs: Any) -> Any:
            calls.append(args)
            return marker

        vars(m)[SLOT] = slot
        out = m(x)
        kept = SLOT in m.__getstate__()  # type: ignore[no-untyped-call]
        clone = pickle.loads(pickle.dumps(m))
    except Exception as e:
        return f"a module with its {SLOT} set failed ({type(e).__name__}: {e})"
    if len(calls) != 1 or len(calls[0]) != 1 or calls[0][0] is not x or out is not marker:
        return f"a module called its {SLOT} {len(calls)} times for one call, or ignored what it returned"
    if kept or SLOT in vars(clone):
        return f"a module keeps {SLOT} in its pickled state"
    return None
