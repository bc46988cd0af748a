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

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from stepscope.collect.core import nesting
from stepscope.collect.core.batch import batch_size, first_tensor, sequence_first
from stepscope.collect.core.session import Session
from stepscope.collect.torch.modelcall import CallSlots, SlotMaker, python_slots, slot_fault, wrappable
from stepscope.collect.torch.modelsummary import output_shape, summarize_model

DISCOVERY_LIMIT = 5000
"""Top-level forward calls watched before giving up on discovery (an inference-only script)."""
REDISCOVERY_STEPS = 3
"""Steps of an optimizer whose models were not among the roots seen (first called after discovery ended: in
another thread, or a later training phase) during which the global hooks look for them again."""


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
        self.tracing = jit_tracing(torch)
        """Whether torch.jit.trace (or an ONNX export) is running a model now: its run is no training, and reading
        sizes then makes torch warn (TracerWarning)."""
        self.local = threading.local()
        """Per thread, while the global hooks are on: ``depth`` of module calls and ``span`` of the top-level one
        (two threads' forward calls interleave)."""
        self.shapes: dict[int, Any] = {}
        self.roots: dict[int, Any] = {}
        """Top-level modules seen during discovery (candidates for optimizers that step later)."""
        self.last_call: dict[int, int] = {}
        """Per root (id): the number of its latest call among the top-level calls seen (``calls``)."""
        self.calls = 0
        self.models: list[Any] = []
        self.watched: set[int] = set()
        self.optimizers: set[int] = set()
        self.sampled: Any = None
        """The step state whose samples came from a forward argument (once per step)."""
        self.first_input: dict[int, tuple[Any, tuple[int, ...]]] = {}
        """Per thread, while discovering: its first top-level module called and the shape of that call's first
        tensor argument (step 0's samples, once the models and the thread that owns the steps are known)."""
        self.seq_first: dict[int, str] = {}
        """Models (id) whose input is read as sequence-first (batch.sequence_first), and why."""
        self.discovering = True
        self.trained = False
        """A top-level forward ran in training mode while discovering (eval-mode ones before it are validation)."""
        self.rediscover: dict[int, int] = {}
        """Optimizers (id) whose models were not among the roots seen: steps looked for since."""
        self._pending: dict[int, Any] = {}
        """Optimizers that stepped while discovering: adopted when it ends."""
        self._lock = threading.RLock()
        """Held choosing and adding models: other threads' optimizers adopt theirs concurrently."""
        self._global: list[Any] = []
        self._hook_check: Callable[[], None] | None = None
        self._start_global()
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
    def _start_global(self) -> None:
        """Torch's global module hooks on, with a fresh per-thread depth; dynamo's warning about global hooks
        left to hooks of the user's own (quiet_compile_warning)."""
        from torch.nn.modules import module as m

        self.local = threading.local()
        self._global = [m.register_module_forward_pre_hook(self._pre),
                        m.register_module_forward_hook(self._post, always_call=True)]
        self._hook_check = quiet_compile_warning(m, {h.id for h in self._global})

    def _stop_global(self) -> None:
        for h in self._global:
            h.remove()
        self._global = []
        if self._hook_check is not None:
            self._hook_check()
            self._hook_check = None

    def _sample_input(self, st: Any, module: Any, args: Any) -> None:
        """The step's samples from a forward's first tensor argument, where no batch was fetched in the step (the
        caller checks ``st.fetched``; once a step; the batches count once one comes)."""
        if self.sampled is st or self.tracing():
            return
        try:
            if self.session.options.samples_per_step is None:
                self.sampled = st
                n = batch_size(args)
                if self.seq_first and id(module) in self.seq_first:
                    n = self._seq_samples(module, args, n)
                if n:
                    st.samples = n
        except Exception as e:
            self.session.warn_once("module-samples", f"reading the batch size from the forward input failed ({e})")

    def _seq_samples(self, module: Any, args: Any, n: float | None) -> float | None:
        """Samples of a sequence-first model's input: dimension 1 of its first tensor argument (``n``, dimension
        0, where it has fewer than two); the run notes once that this is a guess."""
        x = first_tensor(args)
        if x is None or len(x.shape) < 2:
            return n
        self._seq_note(module)
        return float(x.shape[1])

    def _seq_note(self, module: Any) -> None:
        name = getattr(module, "original_name", None) or type(module).__name__
        self.session.note_once(f"seq-first:{id(module)}", f"samples per step: dimension 1 of {name}'s input, read as "
                               f"sequence-first because {self.seq_first.get(id(module))}; a guess: give "
                               "--samples-per-step N if it is wrong")

    def _enter(self, module: Any, args: Any) -> nesting.Span:
        """A watched forward's outermost call begins: the step starts here at the latest; the span to time."""
        t0 = time.perf_counter_ns()
        st = self.session.step
        if st.start is None:
            st.start = t0
        if not st.fetched:  # checked here: a batch was fetched in most steps, and a call saved is a µs (cold)
            self._sample_input(st, module, args)
        return nesting.enter(self.session, t0)

    def _exit(self, span: nesting.Span) -> int:
        """A watched forward's outermost call ended: its own time added to the step's forward; the end time."""
        t1 = time.perf_counter_ns()
        self.session.step.forward += nesting.own_time(self.session, span, t1)
        return t1

    # -- hooks (global while discovering; the models' own, hidden from copies, are _model_hooks) -------
    def _pre(self, module: Any, args: Any) -> None:
        if not self._global or self.tracing():
            return
        local = self.local
        depth = getattr(local, "depth", 0)
        local.depth = depth + 1
        if depth or not self.discovering:
            return  # rediscovering: the roots only (the watched models time themselves)
        owner = self.session.owner
        me = threading.get_ident()
        if owner is not None and owner != me:  # another thread's forward: its roots only
            local.span = None
            return
        if me not in self.first_input:
            shape: tuple[int, ...] = ()
            try:
                x = first_tensor(args)
                shape = tuple(x.shape) if x is not None else ()
            except Exception:  # an unreadable argument: _sample_input says so
                pass
            self.first_input[me] = (module, shape)
        local.training = getattr(module, "training", True)
        local.span = self._enter(module, args)

    def _post(self, module: Any, args: Any, out: Any) -> None:
        if not self._global or self.tracing():
            return
        try:
            local = self.local
            depth = getattr(local, "depth", 0) - 1
            if depth < 0:  # a call entered before the hooks (re)started
                return
            local.depth = depth
            self.shapes[id(module)] = output_shape(out)
            if depth:
                return
            self.roots.setdefault(id(module), module)
            self.last_call[id(module)] = self.calls
            self.calls += 1
            span = getattr(local, "span", None)
            local.span = None
            if span is not None and self.discovering:
                t1 = self._exit(span)
                if getattr(local, "training", True):
                    self.trained = True
                elif self._validation_before_training(module):
                    self._drop_pre_training(t1)
            if self.calls > DISCOVERY_LIMIT:
                if self.discovering:
                    self.finish(None)
                else:
                    self._give_up_rediscovery()
        except Exception as e:
            self.session.warn_once("module-watch", f"model forward timing failed ({e})")

    def _model_hooks(self) -> tuple[Callable[[Any, Any], None], Callable[[Any, Any, Any], None], SlotMaker]:
        """The watched models' own forward pre- and post-hook (``_pre`` and ``_post`` without the discovery
        branches; one pair for all models, their nesting depth shared), and the maker of what goes in a model's
        call slot to run both around its call (modelcall.py)."""
        session = self.session
        is_grad_enabled = self.torch.is_grad_enabled
        get_ident = threading.get_ident
        depth = 0
        span: nesting.Span | None = None
        training = True

        def pre(module: Any, args: Any) -> None:
            nonlocal depth, span, training
            owner = session.owner
            if owner is not None and owner != get_ident():  # another thread's forward: not the steps' (post alike)
                return
            if depth == 0:
                try:  # the mode the forward is called in (read here, where the model's attributes are warm)
                    training = module.training
                except Exception as e:
                    training = True
                    session.warn_once("module-watch", f"model forward timing failed ({e})")
                span = self._enter(module, args)
            depth += 1

        def post(module: Any, args: Any, out: Any) -> None:
            nonlocal depth, span
            owner = session.owner
            if owner is not None and owner != get_ident():
                return
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

    def _validation_before_training(self, module: Any) -> bool:
        """An eval-mode top-level forward with gradients off, of a module with trainable parameters, before any
        training-mode one and before any step: a sanity check or an initial evaluation. A frozen model's
        forward (no trainable parameter: a teacher, an embedding) stays part of the step."""
        if self.trained or self.session.step_source not in (None, "optimizer") or self.torch.is_grad_enabled():
            return False
        return any(p.requires_grad for p in module.parameters())

    def _drop_pre_training(self, t1: int) -> None:
        """A sanity check's batch (Lightning's, or a script's own pass before training) is no step, as with
        Lightning's callback: step 0 starts after it, without its batches' samples and data wait."""
        from stepscope.collect.core.pystate import StepState

        s = self.session
        s.step = StepState(t1, s.epoch)
        self.first_input.pop(threading.get_ident(), None)
        self.sampled = None

    def _mark_validation(self, t1: int) -> None:
        """An eval-mode forward with gradients off ended at ``t1``: a validation step."""
        from stepscope.model.tables import Phase  # here: numpy is not imported at start-up for it

        self.session.mark_step(t1, source="optimizer", phase=Phase.VALIDATION)

    # -- choosing the models ------------------------------------------------------------------------
    def finish(self, optimizer: Any) -> None:
        """At the first step: pick the models, emit their summaries, time only their forward; step 0's samples
        read again from the first input of the thread that owns the steps (its model may be sequence-first)."""
        with self._lock:
            if not self.discovering:
                return
            self.discovering = False
            if not self.rediscover:
                self._stop_global()
            picked = list(self.models) or self._owned(optimizer) or list(self.roots.values())[:1]
            self.models = []
            for model in picked:
                self._add(model)
            if optimizer is not None:
                self.optimizers.add(id(optimizer))
            self._step0_samples()
            pending = list(self._pending.values())
            self._pending.clear()
            for opt in pending:
                self.adopt(opt)

    def _step0_samples(self) -> None:
        s = self.session
        st = s.step
        first = self.first_input.get(s.owner) if s.owner is not None else None
        self.first_input = {}
        if first is None or self.sampled is not st or st.fetched or s.options.samples_per_step is not None:
            return
        module, shape = first
        if id(module) in self.seq_first and len(shape) >= 2:
            self._seq_note(module)
            st.samples = float(shape[1])
        elif shape:
            st.samples = float(shape[0])

    def adopt(self, optimizer: Any) -> bool:
        """An optimizer stepped: watch the top-level modules whose parameters it updates (once each). False: ask
        again at its next step (discovery still on; or its models not seen yet, and the global hooks look for
        them during its next REDISCOVERY_STEPS steps)."""
        with self._lock:
            key = id(optimizer)
            if key in self.optimizers:
                return True
            if self.discovering:
                self._pending[key] = optimizer
                return False
            owned = self._owned(optimizer)
            tries = self.rediscover.get(key, 0)
            if not owned and tries < REDISCOVERY_STEPS:
                self.rediscover[key] = tries + 1
                if not self._global:
                    self.calls = 0
                    self._start_global()
                return False
            self.optimizers.add(key)
            self.rediscover.pop(key, None)
            if not self.rediscover:
                self._stop_global()
            for model in owned:
                self._add(model)
            return True

    def _give_up_rediscovery(self) -> None:
        with self._lock:
            self.optimizers.update(self.rediscover)
            self.rediscover.clear()
            self._stop_global()

    def _owned(self, optimizer: Any) -> list[Any]:
        if optimizer is None:
            return []
        owned = {id(p) for g in optimizer.param_groups for p in g["params"]}
        roots = list(self.roots.values())  # a snapshot: other threads' forwards add roots meanwhile
        # latest called first; a root whose parameters are all a root's taken already is the same model in another
        # wrapper (torch.jit.trace checks its trace on the original module, then the traced one trains)
        roots.sort(key=lambda r: -self.last_call.get(id(r), -1))
        out: list[Any] = []
        covered: set[int] = set()
        for r in roots:
            mine = {id(p) for p in r.parameters()} & owned
            if mine and not mine <= covered:
                out.append(r)
                covered |= mine
        return out

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
        why = sequence_first(model)
        if why is not None:
            self.seq_first[id(model)] = why
        try:
            self._time_forward(model)
        except Exception as e:  # the model stays listed; its forward goes untimed
            say = self.session.note_once if isinstance(model, self.torch.jit.ScriptModule) else self.session.warn_once
            say(f"module-watch:{id(model)}", f"the forward of {type(model).__name__} is not timed ({e})")

    def _time_forward(self, model: Any) -> None:
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
        with self._lock:
            if self.discovering:
                if all(model is not m for m in self.models):
                    self.models.append(model)
            else:
                self._add(model)

    def remove(self) -> None:
        self._stop_global()
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


def jit_tracing(torch: Any) -> Callable[[], bool]:
    """``torch.jit.is_tracing``, or the C function it ends in (one C call, no Python frame: the samples read calls it
    once a step) where this torch has it and it answers False outside a trace, as here."""
    fn = getattr(torch._C, "_is_tracing", None)
    try:
        if callable(fn) and fn() is False:
            return fn  # type: ignore[no-any-return]
    except Exception:
        pass
    return torch.jit.is_tracing  # type: ignore[no-any-return]


def quiet_compile_warning(m: Any, ours: set[int]) -> Callable[[], None] | None:
    """While stepscope's global module hooks are on, torch's ``_has_any_global_hook`` (read only by
    ``torch.compile``'s module wrapper, to warn that global hooks fire once more for it) counts the user's hooks
    only, so a compiled model warns under stepscope exactly when it warns bare. The dictionaries are those the
    function itself reads (its code's names). Returns the undo; None where this torch has no such function (the
    warning then shows, nothing else changes)."""
    orig = getattr(m, "_has_any_global_hook", None)
    names = [n for n in getattr(getattr(orig, "__code__", None), "co_names", ()) if n.startswith("_global_")]
    if orig is None or not names or not all(isinstance(getattr(m, n, None), dict) for n in names):
        return None

    def _has_any_global_hook() -> bool:
        return any(k not in ours for n in names for k in getattr(m, n))

    m._has_any_global_hook = _has_any_global_hook

    def undo() -> None:
        if m._has_any_global_hook is _has_any_global_hook:
            m._has_any_global_hook = orig

    return undo


def _contains(outer: Any, inner: Any) -> bool:
    try:
        return outer is not inner and any(m is inner for m in outer.modules())
    except Exception:
        return False
