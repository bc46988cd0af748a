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


def first_tensor(obj: Any) -> Any:
    """The first tensor in ``obj`` (a forward's arguments, a batch), as ``batch_size`` finds it; None if none."""
    return _first_tensor(obj)


def batch_size(batch: Any) -> float | None:
    """First dimension of the batch's first tensor (dict keys like ``input_ids`` first); None if none."""
    # fast path, the common batch: a tensor or a tuple / list starting with one
    t = batch[0] if (type(batch) is tuple or type(batch) is list) and batch else batch
    shape = getattr(t, "shape", None)  # read once: each read of a tensor's shape makes a new torch.Size
    if shape is None or not hasattr(t, "dtype"):
        shape = getattr(_first_tensor(batch), "shape", None)
    try:
        return float(shape[0]) if shape is not None and len(shape) > 0 else None
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


def sequence_first(model: Any) -> str | None:
    """Why the model's input holds its batch in dimension 1 (sequence-first, as word_language_model feeds
    ``[bptt, batch]``): the first of its modules with a ``batch_first`` flag (RNN, LSTM, GRU, Transformer,
    MultiheadAttention) has it False. None where no module has the flag or the first has it True: the batch
    is dimension 0. A guess either way: the model may transpose its input before that module."""
    try:
        for name, module in model.named_modules():
            flag = getattr(module, "batch_first", None)
            if isinstance(flag, bool):
                kind = getattr(module, "original_name", None) or type(module).__name__  # a scripted module's own class
                return None if flag else f"its {kind} ({name or 'the model'}) has batch_first=False"
    except Exception:  # a model whose modules cannot be listed: dimension 0, as for any other
        return None
    return None
