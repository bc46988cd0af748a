"""Samples and tokens in a batch, read cheaply from its structure."""

from __future__ import annotations

from typing import Any


def _first_tensor(obj: Any, depth: int = 0) -> Any:
    if hasattr(obj, "shape") and hasattr(obj, "dtype"):
        return obj
    if depth >= 3:
        return None
    if isinstance(obj, (list, tuple)):
        for x in obj[:4]:
            t = _first_tensor(x, depth + 1)
            if t is not None:
                return t
    elif isinstance(obj, dict):
        for key in ("input_ids", "inputs", "input", "x", "image", "images"):
            if key in obj:
                t = _first_tensor(obj[key], depth + 1)
                if t is not None:
                    return t
        for x in list(obj.values())[:4]:
            t = _first_tensor(x, depth + 1)
            if t is not None:
                return t
    return None


def batch_size(batch: Any) -> float | None:
    """First dimension of the batch's first tensor (dict keys like ``input_ids`` first); None if none."""
    # fast path, the common batch: a tensor or a tuple / list starting with one
    t = batch[0] if (type(batch) is tuple or type(batch) is list) and batch else batch
    if not (hasattr(t, "shape") and hasattr(t, "dtype")):
        t = _first_tensor(batch)
    try:
        return float(t.shape[0]) if t is not None and len(t.shape) > 0 else None
    except Exception:
        return None


def batch_tokens(batch: Any) -> float | None:
    """Tokens in a batch that carries ``input_ids`` (a dict, as Hugging Face collators make)."""
    if isinstance(batch, dict) and "input_ids" in batch:
        ids = batch["input_ids"]
        try:
            return float(ids.numel())
        except Exception:
            return None
    return None
