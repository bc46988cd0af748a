"""Finding the models being trained, and timing their forward.

Nothing of stepscope may travel with the user's model: a watched model pickles, saves
(``torch.save(model)``), deep-copies, scripts (``torch.jit.script``) and round-trips its
``state_dict`` exactly as a bare one, and its copies carry nothing of stepscope.

Until the first step is marked, torch's *global* module hooks see every forward call (one step's
cost only) to record output shapes and the top-level modules called (roots). At the first step the
models are the roots whose parameters the marking optimizer updates (or those given with
``stepscope.watch``); any other optimizer that steps later adds the roots it updates (a GAN's
generator and discriminator). The global hooks are then removed and each model's call is timed by a
pre- and post-hook of its own, nothing on its submodules (a global hook would cost every module call
about 3 us). They run from the model's call slot (modelcall.py: no module hook, so torch keeps its fast
call path) where the installed torch passes that slot's self-check, or, otherwise and for a class
that changes how modules are called or copied, as forward hooks in the model's hook dictionaries,
wrapped in ``HiddenHooks``: pickling, ``copy.deepcopy`` and TorchScript see the dictionaries without
stepscope's entries (a plain ``OrderedDict``), while torch's forward still calls them. The forward
time is its own: phases run inside it (a nested backward, say) are not counted twice.

When no DataLoader batch was fetched in a step, the samples of the step are the first dimension of the
first tensor argument of the step's first watched forward call (the batch, for scripts that make
their own tensors). An eval-mode forward with gradients off marks a validation step when the
optimizer marks steps.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from stepscope.collect import nesting
from stepscope.collect.batch import batch_size
from stepscope.collect.modelcall import CallSlots, SlotMaker, python_slots, slot_fault, wrappable
from stepscope.collect.modelsummary import output_shape, summarize_model
from stepscope.collect.session import Session

DISCOVERY_LIMIT = 5000
"""Top-level forward calls watched before giving up on discovery (an inference-only script)."""


HOOK_DICTS = ("_forward_pre_hooks", "_forward_hooks", "_forward_hooks_always_called")


class HiddenHooks(OrderedDict[int, Any]):
    """A module's hook dictionary holding entries of stepscope's (ids in ``ours``) that copies never
    see: pickling and deep copies give a plain ``OrderedDict`` of the user's entries only, and
    ``values()`` (what TorchScript compiles) leaves ours out; torch's forward reads ``items()``."""

    ours: set[int]

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.ours = set()

    def __reduce__(self) -> Any:
        return OrderedDict, ([(k, v) for k, v in self.items() if k not in self.ours],)

    def __copy__(self) -> OrderedDict[int, Any]:
        return OrderedDict((k, v) for k, v in self.items() if k not in self.ours)

    def values(self) -> Any:
        return [v for k, v in self.items() if k not in self.ours]


def _hide(model: Any) -> list[HiddenHooks]:
    """Wrap the model's hook dictionaries (once) so that entries added next can be hidden."""
    out = []
    for name in HOOK_DICTS:
        d = getattr(model, name, None)
        if d is None:
            continue
        if not isinstance(d, HiddenHooks):
            d = HiddenHooks(d)
            setattr(model, name, d)
        out.append(d)
    return out


def _unhide(model: Any) -> None:
    """Give the model plain dictionaries back (its own entries only remain once ours are removed)."""
    for name in HOOK_DICTS:
        d = getattr(model, name, None)
        if isinstance(d, HiddenHooks):
            setattr(model, name, OrderedDict(d.items()))


class ModuleWatch:
    def __init__(self, session: Session, undo: list[Callable[[], None]]) -> None:
        import torch

        self.torch = torch
        self.session = session
        self.depth = 0
        self.span: nesting.Span | None = None
        self.shapes: dict[int, Any] = {}
        self.roots: dict[int, Any] = {}
        """Top-level modules seen during discovery (candidates for optimizers that step later)."""
        self.calls = 0
        self.models: list[Any] = []
        self.watched: set[int] = set()
        self.optimizers: set[int] = set()
        self.sampled: Any = None
        """The step state whose samples came from a forward argument (once per step)."""
        self.discovering = True
        from torch.nn.modules import module as m

        self._global = [m.register_module_forward_pre_hook(self._pre),
                        m.register_module_forward_hook(self._post, always_call=True)]
        self._model_handles: list[tuple[Any, list[Any]]] = []
        self._hooks: tuple[Callable[[Any, Any], None], Callable[[Any, Any, Any], None], SlotMaker] | None = None
        """The watched models' pre- and post-hook and the call timed by both (one set for all of them: their
        nesting depth is shared)."""
        self._slots: CallSlots | None = None
        """The models timed from their call slot (modelcall.py; the others have the hooks)."""
        self.slot_refused = slot_fault()
        """Why this torch's call slot is not used (None: it passed its self-check)."""
        undo.append(self.remove)

    # -- hooks (global while discovering; the models' own, hidden from copies, are _model_hooks) -------
    def _sample_input(self, st: Any, args: Any) -> None:
        """The step's samples from a forward's first tensor argument, where no batch was fetched in the step (once
        a step; the batches count once one comes)."""
        if st.fetched or self.sampled is st:
            return
        try:
            if self.session.options.samples_per_step is None:
                self.sampled = st
                n = batch_size(args)
                if n:
                    st.samples = n
        except Exception as e:
            self.session.warn_once("module-samples", f"reading the batch size from the forward input failed ({e})")

    def _enter(self, args: Any) -> nesting.Span:
        """A watched forward's outermost call begins: the step starts here at the latest; the span to time."""
        t0 = time.perf_counter_ns()
        st = self.session.step
        if st.start is None:
            st.start = t0
        self._sample_input(st, args)
        return nesting.enter(self.session, t0)

    def _exit(self, span: nesting.Span) -> int:
        """A watched forward's outermost call ended: its own time added to the step's forward; the end time."""
        t1 = time.perf_counter_ns()
        self.session.step.forward += nesting.own_time(self.session, span, t1)
        return t1

    # -- hooks (global while discovering; the models' own, hidden from copies, are _model_hooks) -------
    def _pre(self, module: Any, args: Any) -> None:
        if not self.discovering:
            return
        if self.depth == 0:
            self.span = self._enter(args)
        self.depth += 1

    def _post(self, module: Any, args: Any, out: Any) -> None:
        if not self.discovering:
            return
        try:
            self.depth -= 1
            self.shapes[id(module)] = output_shape(out)
            if self.depth or self.span is None:
                return
            self._exit(self.span)
            self.span = None
            self.roots.setdefault(id(module), module)
            self.calls += 1
            if self.calls > DISCOVERY_LIMIT:
                self.finish(None)
        except Exception as e:
            self.session.warn_once("module-watch", f"model forward timing failed ({e})")

    def _model_hooks(self) -> tuple[Callable[[Any, Any], None], Callable[[Any, Any, Any], None], SlotMaker]:
        """The watched models' own forward pre- and post-hook (``_pre`` and ``_post`` without the discovery
        branches; one pair for all models, their nesting depth shared), and the maker of what goes in a model's
        call slot to run both around its call (modelcall.py)."""
        session = self.session
        is_grad_enabled = self.torch.is_grad_enabled
        depth = 0
        span: nesting.Span | None = None
        training = True

        def pre(module: Any, args: Any) -> None:
            nonlocal depth, span, training
            if depth == 0:
                try:  # the mode the forward is called in (read here, where the model's attributes are warm)
                    training = module.training
                except Exception as e:
                    training = True
                    session.warn_once("module-watch", f"model forward timing failed ({e})")
                span = self._enter(args)
            depth += 1

        def post(module: Any, args: Any, out: Any) -> None:
            nonlocal depth, span
            try:
                depth -= 1
                if depth or span is None:
                    return
                t1 = self._exit(span)
                span = None
                if not training and session.step_source == "optimizer" and not is_grad_enabled():
                    self._mark_validation(t1)
            except Exception as e:
                session.warn_once("module-watch", f"model forward timing failed ({e})")

        return pre, post, python_slots(pre, post)

    def _mark_validation(self, t1: int) -> None:
        """An eval-mode forward with gradients off ended at ``t1``: a validation step."""
        from stepscope.model.tables import Phase  # here: numpy is not imported at start-up for it

        self.session.mark_step(t1, source="optimizer", phase=Phase.VALIDATION)

    # -- choosing the models ------------------------------------------------------------------------
    def finish(self, optimizer: Any) -> None:
        """At the first step: pick the models, emit their summaries, time only their forward."""
        if not self.discovering:
            return
        self.discovering = False
        for h in self._global:
            h.remove()
        self._global = []
        self.depth = 0
        self.span = None
        picked = list(self.models) or self._owned(optimizer) or list(self.roots.values())[:1]
        self.models = []
        for model in picked:
            self._add(model)
        if optimizer is not None:
            self.optimizers.add(id(optimizer))

    def adopt(self, optimizer: Any) -> None:
        """An optimizer stepped: watch the top-level modules whose parameters it updates (once each)."""
        if self.discovering or id(optimizer) in self.optimizers:
            return
        self.optimizers.add(id(optimizer))
        for model in self._owned(optimizer):
            self._add(model)

    def _owned(self, optimizer: Any) -> list[Any]:
        if optimizer is None:
            return []
        owned = {id(p) for g in optimizer.param_groups for p in g["params"]}
        return [r for r in self.roots.values() if any(id(p) in owned for p in r.parameters())]

    def _add(self, model: Any) -> None:
        if id(model) in self.watched:
            return
        # a model that is part of one already watched (or contains it) is timed by the outer one
        if any(model is m or _contains(m, model) for m in self.models):
            return
        self.models = [m for m in self.models if not _contains(model, m)]
        self.watched = {id(m) for m in self.models}
        self.models.append(model)
        self.watched.add(id(model))
        self.session.record("model", summary=summarize_model(model, self.shapes))
        if self._hooks is None:
            self._hooks = self._model_hooks()
        pre, post, make = self._hooks
        if self.slot_refused is None and wrappable(model):
            if self._slots is None:
                self._slots = CallSlots(make)
                self.session.on_flush.append(self._slots.recheck)
            self._slots.install(model)
            return
        dicts = _hide(model)
        handles = [model.register_forward_pre_hook(pre), model.register_forward_hook(post, always_call=True)]
        for d in dicts:
            d.ours.update(h.id for h in handles)
        self._model_handles.append((model, handles))

    def watch(self, model: Any) -> None:
        if self.discovering:
            if all(model is not m for m in self.models):
                self.models.append(model)
        else:
            self._add(model)

    def remove(self) -> None:
        for h in self._global:
            h.remove()
        self._global = []
        for model, handles in self._model_handles:
            for h in handles:
                h.remove()
            try:
                _unhide(model)
            except Exception:
                pass
        self._model_handles = []
        if self._slots is not None:
            self._slots.remove()
            if self._slots.recheck in self.session.on_flush:
                self.session.on_flush.remove(self._slots.recheck)


def _contains(outer: Any, inner: Any) -> bool:
    try:
        return outer is not inner and any(m is inner for m in outer.modules())
    except Exception:
        return False
