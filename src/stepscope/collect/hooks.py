"""Zero-code hooks into torch: optimizer steps mark steps, autograd backward is timed, DataLoader and
module hooks (loader.py, modules.py) add data wait, samples and forward time. Installed once torch has
finished importing; every hook catches its own errors; ``remove_all`` undoes everything."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from stepscope.collect.session import Session

_UNDO: list[Callable[[], None]] = []
FAULT_ENV = "STEPSCOPE_DEBUG_FAULT"
"""Test switch: a comma list of hook names (optimizer, sampler) that raise on purpose, to prove that
a failing hook never breaks training. Read once at install."""
_WATCH: dict[str, Any] = {}


def install_torch_hooks(session: Session) -> None:
    """Install every zero-code hook into an imported torch. Each part fails alone."""
    from stepscope.collect.databench import install_databench
    from stepscope.collect.flops import install_flop_meter
    from stepscope.collect.loader import install_loader_hooks
    from stepscope.collect.memsnapshot import install_memory_snapshot
    from stepscope.collect.mlflowrun import install_mlflow_probe
    from stepscope.collect.modules import ModuleWatch
    from stepscope.collect.stacks import install_stacks

    parts: list[tuple[str, Callable[[], None]]] = [
        ("optimizer", lambda: _install_optimizer_hooks(session)),
        ("backward", lambda: _install_backward_hook(session)),
        ("dataloader", lambda: install_loader_hooks(session, _UNDO)),
        ("databench", lambda: install_databench(session, _UNDO)),
        ("stacks", lambda: install_stacks(session, _UNDO)),
        ("modules", lambda: _WATCH.__setitem__("modules", ModuleWatch(session, _UNDO))),
        ("cuda", lambda: _install_cuda(session)),
        ("comm", lambda: _install_comm(session)),
        ("window", lambda: _install_window(session)),
        ("flops", lambda: install_flop_meter(session)),
        ("memory-snapshot", lambda: install_memory_snapshot(session)),
        ("mlflow", lambda: install_mlflow_probe(session)),
    ]
    for name, install in parts:
        try:
            install()
        except Exception as e:
            session.warn_once(f"install:{name}", f"could not install the {name} hook ({e})")


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
            span = nesting.enter(session)
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
            session.step.optimizer += nesting.own_time(session, span, t1)  # type: ignore[arg-type]
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

    from stepscope.collect import nesting

    orig = torch.autograd.backward
    perf = time.perf_counter_ns

    def backward(*args: Any, **kwargs: Any) -> Any:
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
