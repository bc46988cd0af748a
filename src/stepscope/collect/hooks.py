"""Zero-code hooks into torch: optimizer steps mark steps, autograd backward is timed, DataLoader and
module hooks (loader.py, modules.py) add data wait, samples and forward time. Installed once torch has
finished importing; every hook catches its own errors; ``remove_all`` undoes everything."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from stepscope.collect.options import ENV_DATABENCH
from stepscope.collect.session import Session

_UNDO: list[Callable[[], None]] = []
FAULT_ENV = "STEPSCOPE_DEBUG_FAULT"
"""Test switch: a comma list of hook names (optimizer, sampler) that raise on purpose, to prove that
a failing hook never breaks training. Read once at install."""
_WATCH: dict[str, Any] = {}


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
    from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

    from stepscope.collect import nesting

    perf = time.perf_counter_ns
    fault = "optimizer" in os.environ.get(FAULT_ENV, "").split(",")
    marker: Any = None
    span: nesting.Span | None = None
    depth = 0
    adopted: set[int] = set()
    """ids of the optimizers whose models are watched already (ModuleWatch.adopt is asked once each)"""

    def pre(opt: Any, args: Any, kwargs: Any) -> None:
        nonlocal span, depth
        if depth == 0:
            st = session.step  # nesting.enter written out (the hot path: one call a step saved)
            span = (st, st.data_wait + st.forward + st.backward + st.optimizer + st.comm, perf())
        depth += 1

    def post(opt: Any, args: Any, kwargs: Any) -> None:
        nonlocal marker, depth
        t1 = perf()
        depth -= 1
        if depth or session.disabled:
            return
        try:
            if fault:
                raise RuntimeError("injected fault (STEPSCOPE_DEBUG_FAULT=optimizer)")
            # own time only: a closure (Lightning) runs forward and backward inside the step
            # (nesting.own_time written out)
            st0, a0, t0 = span  # type: ignore[misc]
            st = session.step
            nested = st0.data_wait + st0.forward + st0.backward + st0.optimizer + st0.comm - a0
            if st is not st0:
                nested += st.data_wait + st.forward + st.backward + st.optimizer + st.comm
            own = t1 - t0 - nested
            if own > 0:
                st.optimizer += own
            if opt is marker:
                session.mark_step(t1, source="optimizer")
                return
            watch = _WATCH.get("modules")
            if marker is None:
                marker = opt
                if watch is not None:
                    watch.finish(opt)
                    watch.adopt(opt)  # discovery ended before this step (no-op otherwise)
                adopted.add(id(opt))
                session.mark_step(t1, source="optimizer")
            elif id(opt) not in adopted:
                adopted.add(id(opt))
                if watch is not None:
                    watch.adopt(opt)  # every model an optimizer updates is watched, not only the marker's
        except Exception as e:
            session.warn_once("optimizer", f"step marking failed ({e})")

    handles = [register_optimizer_step_pre_hook(pre), register_optimizer_step_post_hook(post)]

    def undo() -> None:
        for h in handles:
            h.remove()

    _UNDO.append(undo)


def _install_backward_hook(session: Session) -> None:
    import torch.autograd

    orig = torch.autograd.backward
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
    torch.autograd.backward = backward

    def restore() -> None:
        torch.autograd.backward = orig

    _UNDO.append(restore)


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
