"""Finding the model being trained, and timing its forward.

Until the first step is marked, global module hooks watch every forward call (one step's cost only) to
record output shapes and the top-level modules called. At the first step the models are the top-level
modules whose parameters the marking optimizer updates (or those given with ``stepscope.watch``); the
global hooks are removed and only the models' own forward is timed from then on (two calls a step).
An eval-mode forward with gradients off marks a validation step when the optimizer marks steps.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from stepscope.collect.modelsummary import output_shape, summarize_model
from stepscope.collect.session import Session
from stepscope.model.tables import Phase

DISCOVERY_LIMIT = 5000
"""Top-level forward calls watched before giving up on discovery (an inference-only script)."""


class ModuleWatch:
    def __init__(self, session: Session, undo: list[Callable[[], None]]) -> None:
        import torch

        self.torch = torch
        self.session = session
        self.undo = undo
        self.depth = 0
        self.t0 = 0
        self.shapes: dict[int, Any] = {}
        self.roots: dict[int, Any] = {}
        self.calls = 0
        self.models: list[Any] = []
        self.model_handles: list[Any] = []
        self.discovering = True
        from torch.nn.modules import module as m

        self._global = [m.register_module_forward_pre_hook(self._pre),
                        m.register_module_forward_hook(self._post, always_call=True)]
        undo.append(self.remove)

    # -- discovery (global hooks) -----------------------------------------------------------------
    def _pre(self, module: Any, args: Any) -> None:
        if self.depth == 0:
            self.t0 = time.perf_counter_ns()
            self.session.touch(self.t0)
        self.depth += 1

    def _post(self, module: Any, args: Any, out: Any) -> None:
        try:
            self.depth -= 1
            self.shapes[id(module)] = output_shape(out)
            if self.depth == 0:
                t1 = time.perf_counter_ns()
                self.session.step.forward += t1 - self.t0
                self.roots.setdefault(id(module), module)
                self.calls += 1
                if self.calls > DISCOVERY_LIMIT:
                    self.finish(None)
        except Exception as e:
            self.session.warn_once("module-discovery", f"model discovery failed ({e})")

    def finish(self, optimizer: Any) -> None:
        """Pick the models, emit their summaries, move from global to per-model hooks."""
        if not self.discovering:
            return
        self.discovering = False
        for h in self._global:
            h.remove()
        self._global = []
        if not self.models:
            self.models = self._pick(optimizer)
        for model in self.models:
            self.session.record("model", summary=summarize_model(model, self.shapes))
            self._attach(model)
        self.shapes.clear()
        self.roots.clear()

    def _pick(self, optimizer: Any) -> list[Any]:
        roots = list(self.roots.values())
        if optimizer is None:
            return roots[:1]
        owned = {id(p) for g in optimizer.param_groups for p in g["params"]}
        picked = [r for r in roots if any(id(p) in owned for p in r.parameters())]
        return picked or roots[:1]

    def watch(self, model: Any) -> None:
        if self.discovering:
            self.models.append(model)
        elif model not in self.models:
            self.models.append(model)
            self.session.record("model", summary=summarize_model(model, {}))
            self._attach(model)

    # -- steady state (per-model hooks) -----------------------------------------------------------
    def _attach(self, model: Any) -> None:
        state = {"depth": 0, "t0": 0}

        def pre(module: Any, args: Any) -> None:
            if state["depth"] == 0:
                state["t0"] = time.perf_counter_ns()
                self.session.touch(state["t0"])
            state["depth"] += 1

        def post(module: Any, args: Any, out: Any) -> None:
            state["depth"] -= 1
            if state["depth"]:
                return
            t1 = time.perf_counter_ns()
            s = self.session
            s.step.forward += t1 - state["t0"]
            if s.step_source == "optimizer" and not module.training and not self.torch.is_grad_enabled():
                s.mark_step(t1, source="optimizer", phase=Phase.VALIDATION)

        self.model_handles += [model.register_forward_pre_hook(pre),
                               model.register_forward_hook(post, always_call=True)]

    def remove(self) -> None:
        for h in self._global + self.model_handles:
            h.remove()
        self._global, self.model_handles = [], []
