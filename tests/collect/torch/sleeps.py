"""Autograd work of known length for the hook tests (test_hook_impls.py, test_hook_log.py)."""

from __future__ import annotations

import time
from typing import Any


def slow_grad(seconds: float) -> Any:
    """An autograd identity whose backward sleeps ``seconds`` (``.apply(x)``)."""
    import torch

    class SlowGrad(torch.autograd.Function):  # type: ignore[misc]
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x.clone()

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            time.sleep(seconds)
            return g

    return SlowGrad
