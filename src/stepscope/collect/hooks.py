"""Zero-code hooks into torch: optimizer steps mark steps, autograd backward is timed, DataLoader and
module hooks (loader.py, modules.py) add data wait, samples and forward time. Installed once torch has
finished importing; every hook catches its own errors; ``remove_all`` undoes everything."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from stepscope.collect.options import ENV_DATABENCH
from stepscope.collect.pystate import StepState
from stepscope.collect.session import Session

_UNDO: list[Callable[[], None]] = []
FAULT_ENV = "STEPSCOPE_DEBUG_FAULT"
"""Test switch: a comma list of hook names (optimizer, sampler) that raise on purpose, to prove that
a failing hook never breaks training. Read once at install."""
_WATCH: dict[str, Any] = {}
_NAN = float("nan")
ENV_PURE_HOOKS = "STEPSCOPE_PURE_HOOKS"
"""Set (non-empty) to install the Python hook bodies even where the compiled ones (``_hooks``) were built.
Read at each install."""


def compiled_hooks() -> Any:
    """The compiled hook bodies (the optional C extension ``stepscope.collect._hooks``; None: not built)."""
    try:
        from stepscope.collect import _hooks
    except ImportError:  # not built (the extension is optional): the Python bodies serve
        return None
    return _hooks


def use_compiled() -> Any:
    """The compiled hook bodies to install now: None where not built or ``STEPSCOPE_PURE_HOOKS`` is set."""
    return None if os.environ.get(ENV_PURE_HOOKS) else compiled_hooks()


def install_torch_hooks(session: Session) -> None:
    """Install every zero-code hook into an imported torch. Each part fails alone. A part that this run's
    options leave off is not imported at all (start-up: benchmarks/overhead.py)."""
    o = session.options
    parts: list[tuple[str, Callable[[], None]]] = [
        ("optimizer", lambda: _install_optimizer_hooks(session)),
        ("backward", lambda: _install_backward_hook(session)),
        ("dataloader", lambda: _install_part("loader", "install_loader_hooks")(session, _UNDO)),
        ("modules", lambda: _install_modules(session)),
        ("cuda", lambda: _install_cuda(session)),
        ("comm", lambda: _install_comm(session)),
        ("window", lambda: _install_window(session)),
        ("flops", lambda: _install_part("flops", "install_flop_meter")(session)),
    ]
    if os.environ.get(ENV_DATABENCH):
        parts.append(("databench", lambda: _install_part("databench", "install_databench")(session, _UNDO)))
    if o.sample_stacks_hz > 0:
        parts.append(("stacks", lambda: _install_part("stacks", "install_stacks")(session, _UNDO)))
    if o.memory_snapshot_steps > 0:
        parts.append(("memory-snapshot", lambda: _install_part("memsnapshot", "install_memory_snapshot")(session)))
    if o.mlflow:
        parts.append(("mlflow", lambda: _install_part("mlflowrun", "install_mlflow_probe")(session)))
    for name, install in parts:
        try:
            install()
        except Exception as e:
            session.warn_once(f"install:{name}", f"could not install the {name} hook ({e})")


def _install_part(module: str, function: str) -> Callable[..., None]:
    """``stepscope.collect.<module>.<function>``, imported now."""
    import importlib

    fn: Callable[..., None] = getattr(importlib.import_module(f"stepscope.collect.{module}"), function)
    return fn


def _install_modules(session: Session) -> None:
    from stepscope.collect.modules import ModuleWatch

    _WATCH["modules"] = ModuleWatch(session, _UNDO)


def _install_cuda(session: Session) -> None:
    from stepscope.collect.cuda import install_cuda_timer

    install_cuda_timer(session)


def _install_comm(session: Session) -> None:
    if session.options.comm_timing:
        try:
            from stepscope.collect.comm import install_comm_hooks
        except ImportError:
            return
        install_comm_hooks(session, _UNDO)


def _install_window(session: Session) -> None:
    if session.options.profile_steps > 0:
        from stepscope.collect.window import install_window

        install_window(session)


def _install_optimizer_hooks(session: Session) -> None:
    """Time every optimizer's ``step()`` and mark a step at the end of the first optimizer's.

    One Python call a step: torch wraps each optimizer class's ``step`` once (``Optimizer.profile_hook_step``,
    applied by ``Optimizer._patch_step_function`` in every optimizer's ``__init__``), and that wrapper calls
    the real ``step`` through its closure cell ``func``. stepscope puts its timing function in that cell (for
    the classes wrapped already, and for each class wrapped later), so every way of calling ``step`` goes
    through it (``opt.step()``, an LR scheduler's or Accelerate's instance wrapper, a subclass's
    ``super().step()``) and nothing is added to the optimizer objects or classes. Before this, a global
    step pre-hook and post-hook (two calls, torch iterating its hook dictionaries) did the same work.

    Where the compiled hook bodies are built (and ``STEPSCOPE_PURE_HOOKS`` is unset), the function in the cell
    is ``_hooks.OptimizerStep`` (the Python ``step`` below is its reference): the common step mark in C, the
    first step and other optimizers' adoption through ``rest``."""
    from torch.optim.optimizer import Optimizer

    perf = time.perf_counter_ns
    fault = "optimizer" in os.environ.get(FAULT_ENV, "").split(",")
    depth = 0
    adopted: set[int] = set()
    """ids of the optimizers whose models are watched already (ModuleWatch.adopt is asked once each)"""
    wrapped: list[tuple[Any, Any]] = []
    """(closure cell of a torch step wrapper now holding our function, the real ``step`` it held)"""

    def rest(opt: Any, t1: int) -> None:
        """A step of an optimizer other than the marker: the first one marks; each new one's models watched
        (the uncommon branch of both timers, compiled and Python)."""
        watch = _WATCH.get("modules")
        if marks.marker is None:
            marks.marker = opt
            if watch is not None:
                watch.finish(opt)
                watch.adopt(opt)  # discovery ended before this step (no-op otherwise)
            adopted.add(id(opt))
            session.mark_step(t1, source="optimizer")
        elif id(opt) not in adopted:
            adopted.add(id(opt))
            if watch is not None:
                watch.adopt(opt)  # every model an optimizer updates is watched, not only the marker's

    compiled = use_compiled()
    timer: Any = compiled.OptimizerTimer(session, _NAN, fault, rest) if compiled is not None else None
    marks: Any = timer if timer is not None else SimpleNamespace(marker=None)
    """Holds ``marker``, the optimizer whose steps mark steps (the first to step)."""

    def timed(orig: Callable[..., Any]) -> Callable[..., Any]:
        if timer is not None:  # the compiled timer (_hooks.OptimizerStep), the same semantics as step below
            wrapped_step: Callable[..., Any] = timer.wrap(orig)
            return wrapped_step

        def step(*args: Any, **kwargs: Any) -> Any:
            nonlocal depth
            if depth:  # a step inside a step (a subclass's super().step(), ZeRO's inner optimizer): timed once
                depth += 1
                try:
                    return orig(*args, **kwargs)
                finally:
                    depth -= 1
            st0 = session.step  # nesting.enter written out (the hot path)
            a0 = st0.data_wait + st0.forward + st0.backward + st0.optimizer + st0.comm
            depth = 1
            t0 = perf()
            try:
                out = orig(*args, **kwargs)
            except BaseException:
                depth = 0  # a step that raises marks no step (as torch's post-hooks never ran)
                raise
            t1 = perf()
            depth = 0
            if session.disabled:
                return out
            try:
                if fault:
                    raise RuntimeError("injected fault (STEPSCOPE_DEBUG_FAULT=optimizer)")
                # own time only: a closure (Lightning, LBFGS) runs forward and backward inside the step
                # (nesting.own_time written out)
                st = session.step
                nested = st0.data_wait + st0.forward + st0.backward + st0.optimizer + st0.comm - a0
                if st is not st0:
                    nested += st.data_wait + st.forward + st.backward + st.optimizer + st.comm
                own = t1 - t0 - nested
                if own > 0:
                    st.optimizer += own
                opt = args[0]
                if opt is marks.marker:
                    if session.step_source == "optimizer" and session.active and not session.extras:
                        # Session.mark_step's common case written out (a training step, no per-step
                        # collector left): one row appended, one new StepState (the compiled timer refills the old
                        # one in place where nothing else holds it: the same to anyone); keep the two in step
                        o = session.options
                        samples = o.samples_per_step if o.samples_per_step is not None else (
                            st.samples if st.fetched or st.samples else _NAN)
                        tokens = o.tokens_per_step if o.tokens_per_step is not None else (st.tokens or _NAN)
                        session.step_row((
                            session.step_index, t1 if st.start is None else st.start, t1, samples, tokens,
                            st.data_wait if st.fetched else _NAN, st.forward or _NAN, st.backward or _NAN,
                            st.optimizer or _NAN, st.comm or _NAN, st.epoch, 0))
                        session.step_index += 1
                        if st.epoch >= 0:
                            session.epoch = st.epoch
                        session.step = StepState(t1, session.epoch)
                    else:
                        session.mark_step(t1, source="optimizer")
                    return out
                rest(opt, t1)
            except Exception as e:
                session.warn_once("optimizer", f"step marking failed ({e})")
            return out

        step._stepscope_step = True  # type: ignore[attr-defined]
        return step

    def wrap(cls: type) -> None:
        """Time ``cls``'s step if torch has wrapped it (its own ``step`` attribute only: an inherited one is
        its base class's, wrapped once there)."""
        fn = cls.__dict__.get("step")
        cell = _func_cell(fn) if getattr(fn, "hooked", False) else None
        if cell is None or getattr(cell.cell_contents, "_stepscope_step", False):
            return
        wrapped.append((cell, cell.cell_contents))
        cell.cell_contents = timed(cell.cell_contents)

    if _func_cell(Optimizer.profile_hook_step(_subclasses)) is None:
        raise RuntimeError("this torch's optimizer step wrapper has no 'func' cell to time the step through")
    for cls in _subclasses(Optimizer):
        wrap(cls)
    orig_patch = Optimizer._patch_step_function

    def _patch_step_function(self: Any) -> None:
        orig_patch(self)
        try:
            wrap(type(self))
        except Exception as e:
            session.warn_once("optimizer", f"could not time {type(self).__name__}.step ({e})")

    Optimizer._patch_step_function = _patch_step_function  # type: ignore[method-assign]

    def undo() -> None:
        Optimizer._patch_step_function = orig_patch  # type: ignore[method-assign]
        for cell, orig in reversed(wrapped):
            cell.cell_contents = orig
        wrapped.clear()

    _UNDO.append(undo)


def _func_cell(fn: Any) -> Any:
    """The closure cell named ``func`` of torch's optimizer step wrapper ``fn`` (None: not that wrapper)."""
    code = getattr(fn, "__code__", None)
    if code is None or fn.__closure__ is None or "func" not in code.co_freevars:
        return None
    return fn.__closure__[code.co_freevars.index("func")]


def _subclasses(cls: type) -> list[type]:
    """``cls`` and every subclass of it defined so far."""
    out, todo = [], [cls]
    while todo:
        c = todo.pop()
        if c not in out:
            out.append(c)
            todo.extend(c.__subclasses__())
    return out


def _install_backward_hook(session: Session) -> None:
    """Time ``torch.autograd.backward`` (own time) as the step's backward: the compiled body
    (``_hooks.Backward``, the same semantics) where built, else the Python one."""
    import torch.autograd

    orig = torch.autograd.backward
    compiled = use_compiled()
    backward = compiled.Backward(session, orig) if compiled is not None else _py_backward(session, orig)
    torch.autograd.backward = backward

    def restore() -> None:
        torch.autograd.backward = orig

    _UNDO.append(restore)


def _py_backward(session: Session, orig: Callable[..., Any]) -> Callable[..., Any]:
    """The Python backward wrapper (the reference of ``_hooks.Backward``)."""
    perf = time.perf_counter_ns

    def backward(*args: Any, **kwargs: Any) -> Any:
        st0 = session.step  # nesting.enter and own_time written out (the hot path)
        a0 = st0.data_wait + st0.forward + st0.backward + st0.optimizer + st0.comm
        t0 = perf()
        try:
            return orig(*args, **kwargs)
        finally:
            try:
                t1 = perf()
                st = session.step
                nested = st0.data_wait + st0.forward + st0.backward + st0.optimizer + st0.comm - a0
                if st is not st0:
                    nested += st.data_wait + st.forward + st.backward + st.optimizer + st.comm
                if t1 - t0 > nested:
                    st.backward += t1 - t0 - nested
                if st.start is None:
                    st.start = t0
                if not session.active and not session.disabled:
                    session.activate()  # a backward pass is training: the run is observed
            except Exception as e:
                session.warn_once("backward", f"backward timing failed ({e})")

    backward.__wrapped__ = orig  # type: ignore[attr-defined]
    return backward


def watch_model(model: Any) -> None:
    watch = _WATCH.get("modules")
    if watch is not None:
        watch.watch(model)


def remove_all() -> None:
    """Undo every hook (tests prove nothing is left behind)."""
    while _UNDO:
        undo = _UNDO.pop()
        try:
            undo()
        except Exception:
            pass
    _WATCH.clear()


def installed() -> int:
    return len(_UNDO)
