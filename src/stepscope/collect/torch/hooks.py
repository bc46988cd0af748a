"""Zero-code hooks into torch: optimizer steps mark steps, autograd backward is timed, DataLoader and
module hooks (loader.py, modules.py) add data wait, samples and forward time. Installed once torch has
finished importing; every hook catches its own errors; ``undo.remove_all`` undoes everything."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from stepscope.collect.core import nesting
from stepscope.collect.core.options import ENV_DATABENCH, ENV_OVERRIDES
from stepscope.collect.core.session import Session
from stepscope.collect.core.undo import UNDO

FAULT_ENV = "STEPSCOPE_DEBUG_FAULT"
"""Test switch: a comma list of hook names (optimizer, sampler) that raise on purpose, to prove that
a failing hook never breaks training. Read once at install."""
_WATCH: dict[str, Any] = {}


def install_torch_hooks(session: Session) -> None:
    """Install every zero-code hook into an imported torch. Each part fails alone. A part that this run's
    options leave off is not imported at all (start-up: benchmarks/overhead.py)."""
    o = session.options
    parts: list[tuple[str, Callable[[], object]]] = [
        ("optimizer", lambda: _install_optimizer_hooks(session)),
        ("backward", lambda: _install_backward_hook(session)),
        ("dataloader", lambda: _install_part("torch.loader", "install_loader_hooks")(session, UNDO)),
        ("modules", lambda: _install_modules(session)),
        ("cuda", lambda: _install_cuda(session)),
        ("comm", lambda: _install_comm(session)),
        ("window", lambda: _install_window(session)),
        ("flops", lambda: _install_part("torch.flops", "install_flop_meter")(session)),
    ]
    if os.environ.get(ENV_DATABENCH):
        parts.append(("databench", lambda: _install_part("torch.databench", "install_databench")(session, UNDO)))
    if o.sample_stacks_hz > 0:
        parts.append(("stacks", lambda: _install_part("system.stacks", "install_stacks")(session, UNDO)))
    if o.memory_snapshot_steps > 0:
        snapshot = _install_part("torch.memsnapshot", "install_memory_snapshot")
        parts.append(("memory-snapshot", lambda: snapshot(session)))
    if o.mlflow:
        parts.append(("mlflow", lambda: _install_part("torch.mlflowrun", "install_mlflow_probe")(session)))
    if os.environ.get(ENV_OVERRIDES):  # last: the loader hooks' self-check builds a DataLoader of its own
        parts.append(("overrides", lambda: _install_overrides(session)))
    installed: list[str] = []
    refused: dict[str, str] = {}
    for name, install in parts:
        n0 = len(UNDO)
        try:
            out = install()
        except Exception as e:
            session.warn_once(f"install:{name}", f"could not install the {name} hook ({e})")
            refused[name] = str(e)
            continue
        if isinstance(out, tuple):  # (the path it took, why a private path was refused: None if it was not)
            installed.append(out[0])
            if out[1]:
                refused[f"{name} (private path)"] = out[1]
        elif len(UNDO) > n0:
            installed.append(name)
    note = getattr(session, "note_hooks", None)  # the session API that says which hooks a process has
    if note is not None:
        import torch

        note("torch", getattr(torch, "__version__", None), installed=installed, refused=refused)


def _install_overrides(session: Session) -> tuple[str, None] | None:
    from stepscope.collect.torch.overrides import install_overrides

    name = install_overrides(session, UNDO)
    return (name, None) if name else None


def _install_part(module: str, function: str) -> Callable[..., object]:
    """``stepscope.collect.<room>.<module>.<function>`` (``module``: "room.module"), imported now."""
    import importlib

    fn: Callable[..., object] = getattr(importlib.import_module(f"stepscope.collect.{module}"), function)
    return fn


def _install_modules(session: Session) -> tuple[str, str | None]:
    from stepscope.collect.torch.modules import ModuleWatch

    watch = _WATCH["modules"] = ModuleWatch(session, UNDO)
    UNDO.append(_WATCH.clear)  # undone first: a removed watch is no longer asked to watch
    if watch.slot_refused:
        return "modules (forward hooks)", f"Module._compiled_call_impl: {watch.slot_refused}"
    return "modules (call slot, self-checked)", None


def _install_cuda(session: Session) -> None:
    from stepscope.collect.torch.cuda import install_cuda_timer

    install_cuda_timer(session)


def _install_comm(session: Session) -> None:
    if session.options.comm_timing:
        try:
            from stepscope.collect.torch.comm import install_comm_hooks
        except ImportError:
            return
        install_comm_hooks(session, UNDO)


def _install_window(session: Session) -> None:
    if session.options.profile_steps > 0:
        from stepscope.collect.torch.window import install_window

        install_window(session)


def _install_optimizer_hooks(session: Session) -> tuple[str, str | None]:
    """Time every optimizer's ``step()`` (own time) and mark a step at the end of the first optimizer's, through
    torch's public global step hooks (``register_optimizer_step_pre_hook`` / ``..._post_hook``), which torch calls
    around every way of calling ``step`` (``opt.step()``, an LR scheduler's or Accelerate's instance wrapper, a
    subclass's ``super().step()``).

    A step inside a step (a subclass's ``super().step()``, ZeRO's inner optimizer) is timed once, as part of the
    outer one. A step that raises runs no post-hook: its entry stays on the stack of open steps, and is dropped
    as stale at the next step whose caller it does not enclose (each entry keeps torch's calling frame). That
    needs torch to call both hooks of a step from one frame, as it does today: the first step checks it, and
    where it does not hold the stack is matched by depth alone.

    Only the thread that owns the steps (``Session.owner``: the first whose optimizer steps) times and marks; in
    other threads a step only has its models watched (``others``), so the stack and the marker are one thread's."""
    from torch.optim import optimizer as optim

    register_pre = getattr(optim, "register_optimizer_step_pre_hook", None)
    register_post = getattr(optim, "register_optimizer_step_post_hook", None)
    if register_pre is None or register_post is None:
        raise RuntimeError("this torch has no global optimizer step hooks (torch.optim.optimizer."
                           "register_optimizer_step_pre_hook)")
    by_frame: list[bool] = []
    """whether torch calls a step's pre- and post-hook from one frame (learnt at the first step)"""
    fault = "optimizer" in os.environ.get(FAULT_ENV, "").split(",")
    marker: list[Any] = []
    """the optimizer whose steps mark steps (the first to step)"""
    adopted: set[int] = set()
    """ids of the optimizers whose models are watched already (ModuleWatch.adopt is asked once each)"""
    open_steps: list[tuple[Any, nesting.Span]] = []
    """(torch's frame calling the hooks, the span) of each step in progress, outermost first"""
    get_ident = threading.get_ident
    noted: list[str] = []
    """the first other thread seen stepping (the run notes it once)"""
    getframe = sys._getframe
    home = vars(optim)
    """the globals of torch's step wrapper (torch.optim.optimizer): a hook's caller with these is the frame
    ``_caller`` would return, found with no call of it (a hook runs cold, after milliseconds of torch work, where
    every Python call and lookup it saves is a microsecond: benchmarks/step_phases.py)"""

    def pre(opt: Any, args: Any, kwargs: Any) -> None:
        me = get_ident()
        owner = session.owner
        if owner != me and (owner is not None or session.claim_steps(me) != me):
            return  # another thread's step (post handles it)
        try:
            caller = getframe(1)
            if caller.f_globals is not home:  # not torch's step wrapper: maybe dynamo's frames in between
                caller = _caller(caller)
            if open_steps and by_frame and by_frame[0]:  # rare: a nested step, or a stale entry of a raised step
                _drop_stale(open_steps, caller)
            open_steps.append((caller, nesting.enter(session)))
        except Exception as e:
            session.warn_once("optimizer", f"step timing failed ({e})")

    def post(opt: Any, args: Any, kwargs: Any) -> None:
        t1 = time.perf_counter_ns()
        me = get_ident()
        owner = session.owner
        if owner != me and (owner is not None or session.claim_steps(me) != me):
            others(opt)
            return
        try:
            caller = getframe(1)
            if caller.f_globals is not home:
                caller = _caller(caller)
            if not by_frame and open_steps:
                by_frame.append(open_steps[-1][0] is caller)
            while by_frame and by_frame[0] and open_steps and open_steps[-1][0] is not caller:
                open_steps.pop()  # inner steps that raised
            if not open_steps:
                return
            _, span = open_steps.pop()
            if open_steps or session.disabled:
                return  # an inner step: timed as part of the outer one
            if fault:
                raise RuntimeError("injected fault (STEPSCOPE_DEBUG_FAULT=optimizer)")
            # own time only: a closure (Lightning, LBFGS) runs forward and backward inside the step
            session.step.optimizer += nesting.own_time(session, span, t1)
            if marker and opt is marker[0]:
                session.mark_step(t1, source="optimizer")
                return
            watch = _WATCH.get("modules")
            if not marker:
                marker.append(opt)
                adopted.add(id(opt))
                if watch is not None:
                    try:  # a model that cannot be watched never costs the step its mark
                        watch.finish(opt)
                        watch.adopt(opt)  # discovery ended before this step (no-op otherwise)
                    except Exception as e:
                        session.warn_once("module-watch", f"could not watch the model ({e})")
                session.mark_step(t1, source="optimizer")
            else:
                adopt(opt)
        except Exception as e:
            session.warn_once("optimizer", f"step marking failed ({e})")

    def adopt(opt: Any) -> None:
        """Watch the models ``opt`` updates (every model an optimizer updates, not only the marker's); asked again
        at its next steps until ModuleWatch.adopt has found them or given up."""
        if id(opt) in adopted:
            return
        watch = _WATCH.get("modules")
        if watch is None or watch.adopt(opt):
            adopted.add(id(opt))

    def others(opt: Any) -> None:
        """A step of a thread other than the owner's: no step, not timed (its phases overlap the owner's steps);
        its models are watched all the same, and the run says once whose steps it records."""
        if session.disabled:
            return
        try:
            adopt(opt)
            if not noted:
                noted.append(threading.current_thread().name)
                owner = next((t.name for t in threading.enumerate() if t.ident == session.owner), "?")
                session.note_once("threads", f"optimizers step in more than one thread: the steps are those of thread "
                                  f"{owner!r} (the first to step); other threads' steps, phases and samples are left "
                                  f"out (first seen: {noted[0]!r})")
        except Exception as e:
            session.warn_once("optimizer", f"step marking failed ({e})")

    # not wrapped in torch.compiler.disable: that imports torch._dynamo (about 860 modules, seconds) at install and
    # adds about 1 µs a call; a compiled optimizer step (torch.compile(opt.step)) therefore traces these hooks
    handles = [register_pre(pre), register_post(post)]

    def undo() -> None:
        for h in handles:
            h.remove()
        open_steps.clear()

    UNDO.append(undo)
    return "optimizer (public step hooks)", None


def _caller(f: Any) -> Any:
    """Torch's step wrapper, from ``f``, the frame that called an optimizer hook (frames of dynamo's in between
    skipped)."""
    while f is not None and f.f_globals.get("__name__", "").startswith("torch._dynamo"):
        f = f.f_back
    return f


def _drop_stale(open_steps: list[tuple[Any, Any]], caller: Any) -> None:
    """Drop the entries of ``open_steps`` whose frame does not enclose ``caller`` (steps that raised)."""
    enclosing = set()
    f = caller.f_back
    while f is not None:
        enclosing.add(id(f))
        f = f.f_back
    open_steps[:] = [e for e in open_steps if id(e[0]) in enclosing]


def _install_backward_hook(session: Session) -> tuple[str, str | None]:
    """Time ``torch.autograd.backward`` (own time) as the step's backward: a wrapper of the public function."""
    import torch.autograd

    orig = torch.autograd.backward
    perf = time.perf_counter_ns
    get_ident = threading.get_ident

    def backward(*args: Any, **kwargs: Any) -> Any:
        owner = session.owner
        if owner is not None and owner != get_ident():  # another thread's: not the recorded steps' backward
            return orig(*args, **kwargs)
        span = nesting.enter(session)
        try:
            return orig(*args, **kwargs)
        finally:
            try:
                t1 = perf()
                st = session.step
                st.backward += nesting.own_time(session, span, t1)
                if st.start is None:
                    st.start = span[2]
                if not session.active and not session.disabled:
                    session.activate()  # a backward pass is training: the run is observed
            except Exception as e:
                session.warn_once("backward", f"backward timing failed ({e})")

    backward.__wrapped__ = orig  # type: ignore[attr-defined]
    torch.autograd.backward = backward

    def restore() -> None:
        torch.autograd.backward = orig

    UNDO.append(restore)
    return "backward (torch.autograd.backward)", None


def watch_model(model: Any) -> None:
    watch = _WATCH.get("modules")
    if watch is not None:
        watch.watch(model)


