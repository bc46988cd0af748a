"""Stub of the compiled hook bodies (src/stepscope/collect/_hooks.c); their references are the Python hooks in
modules.py (ModuleWatch._model_hooks), hooks.py (_py_backward, _install_optimizer_hooks) and loader.py
(install_loader_hooks: __next__)."""

from collections.abc import Callable
from typing import Any

from stepscope.collect.pystate import PyPassState, PySessionCore, PyStepState

# the compiled StepState, SessionCore and PassState (_hooks_state.c, _hooks_loader.c): the attributes of their
# Python references
StepState = PyStepState
SessionCore = PySessionCore
PassState = PyPassState

class ForwardHooks:
    depth: int
    def __init__(self, session: Any, watch: Any, tensor_type: type, is_grad_enabled: Callable[[], bool],
                 batch_size: Callable[[Any], float | None], mark_validation: Callable[[int], None]) -> None: ...
    def pre(self, module: Any, args: Any, /) -> None: ...
    def post(self, module: Any, args: Any, out: Any, /) -> None: ...
    def call(self, module: Any, impl: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], /) -> Any: ...

class Backward:
    orig: Callable[..., Any]
    __wrapped__: Callable[..., Any]
    def __init__(self, session: Any, orig: Callable[..., Any]) -> None: ...
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...

class LoaderNext:
    orig_next: Callable[[Any], Any]
    __wrapped__: Callable[..., Any]
    def __init__(self, session: Any, orig: Callable[..., Any], tensor_type: type,
                 batch_size: Callable[[Any], float | None], batch_tokens: Callable[[Any], float | None],
                 pass_end: Callable[[Any], None], open_epoch: Callable[[Any, int, int], Any],
                 first_of_pass: Callable[[Any, int, Any, float], None]) -> None: ...
    def __call__(self, it: Any, /) -> Any: ...
    def forget(self) -> None: ...

def new_step_state(start: int | None, epoch: int, /) -> StepState: ...
def columns(rows: list[Any], width: int, /) -> list[tuple[Any, ...]]: ...
def clock_ns() -> int: ...
