"""Stub of the compiled region (src/stepscope/collect/_region.c); regions.PyRegion is its reference."""

from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

class region:
    name: str
    _path: str
    _session: Any
    _stack: list[str]
    _t0: int
    def __init__(self, name: object) -> None: ...
    def __enter__(self) -> region: ...
    def __exit__(self, exc_type: object, exc: object, tb: object) -> None: ...
    def __call__(self, fn: F) -> F: ...

def bind(regions_globals: dict[str, Any], session_module_dict: dict[str, Any], /) -> None: ...
def clock_ns() -> int: ...
