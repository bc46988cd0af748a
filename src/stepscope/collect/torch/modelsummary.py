"""Model summary: a layer table with types, output shapes (seen in one step), parameters and bytes."""

from __future__ import annotations

from typing import Any


def _shape_of(out: Any) -> list[int] | list[list[int]] | None:
    if hasattr(out, "shape"):
        return [int(d) for d in out.shape]
    if isinstance(out, (tuple, list)) and out and all(hasattr(o, "shape") for o in out[:4]):
        return [[int(d) for d in o.shape] for o in out[:4]]
    return None


def output_shape(out: Any) -> Any:
    try:
        return _shape_of(out)
    except Exception:
        return None


def summarize_model(model: Any, shapes: dict[int, Any], *, max_layers: int = 2000) -> dict[str, Any]:
    """Layer table of ``model`` (an nn.Module); ``shapes``: id(module) -> output shape, where seen.

    Fields: name, type, layers (rows: name, type, depth, params, trainable_params, param_bytes,
    buffer_bytes, output_shape), total_params, trainable_params, param_bytes, buffer_bytes, truncated.
    ``params`` of a row counts the module's own parameters (not its children's); totals count each
    parameter once even if shared.
    """
    rows: list[dict[str, Any]] = []
    for name, mod in model.named_modules():
        if len(rows) >= max_layers:
            break
        own = list(mod.parameters(recurse=False))
        bufs = list(mod.buffers(recurse=False))
        rows.append({
            "name": name or "(root)", "type": type(mod).__name__, "depth": 0 if not name else name.count(".") + 1,
            "params": sum(p.numel() for p in own),
            "trainable_params": sum(p.numel() for p in own if p.requires_grad),
            "param_bytes": sum(p.numel() * p.element_size() for p in own),
            "buffer_bytes": sum(b.numel() * b.element_size() for b in bufs),
            "output_shape": shapes.get(id(mod)),
        })
    params = {id(p): p for p in model.parameters()}.values()
    buffers = {id(b): b for b in model.buffers()}.values()
    return {
        "name": type(model).__name__,
        "type": f"{type(model).__module__}.{type(model).__qualname__}",
        "layers": rows,
        "total_params": sum(p.numel() for p in params),
        "trainable_params": sum(p.numel() for p in params if p.requires_grad),
        "param_bytes": sum(p.numel() * p.element_size() for p in params),
        "buffer_bytes": sum(b.numel() * b.element_size() for b in buffers),
        "param_dtypes": sorted({str(p.dtype).replace("torch.", "") for p in params}),
        "truncated": len(rows) >= max_layers,
    }
