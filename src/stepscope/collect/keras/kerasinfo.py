"""What a Keras / TensorFlow process records about itself: the framework record (versions, backend, thread pools,
devices) and the model summary, once per session. Shared by the Keras and the TensorFlow hooks, which both import it
(and neither imports the other for it)."""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable
from typing import Any

from stepscope.collect.core.session import Session

_MODELS: weakref.WeakSet[Any] = weakref.WeakSet()
"""Every Keras model built in this process (the keras hooks register them at construction)."""


def describe_once(session: Session, model: Any, variables: Any = None) -> None:
    """Record the framework settings and the model summary once per session."""
    if getattr(session, "_keras_described", False):
        return
    session._keras_described = True  # type: ignore[attr-defined]
    session.record("framework", **framework_info())
    if model is None:
        model = _model_for(variables)
    if model is not None:
        session.record("model", summary=summarize_keras_model(model))


def _model_for(variables: Any) -> Any:
    """The registered Keras model that owns most of ``variables`` (the outermost one on a tie)."""
    models = list(_MODELS)
    if not models:
        return None
    wanted = {id(v) for v in variables or ()}
    best, best_score = None, -1
    for m in models:
        try:
            score = sum(1 for v in m.trainable_variables if id(v) in wanted) if wanted else 0
            size = len(m.weights)
        except Exception:
            continue
        if (score, size) > (best_score, len(best.weights) if best is not None else -1):
            best, best_score = m, score
    return best


def framework_info() -> dict[str, Any]:
    """Framework versions and settings of this process (only modules it imported are asked)."""
    out: dict[str, Any] = {"name": "keras"}
    keras = sys.modules.get("keras")
    if keras is not None:
        out["keras"] = getattr(keras, "__version__", None)
        try:
            out["backend"] = keras.backend.backend()
            out["dtype_policy"] = keras.config.dtype_policy().name
        except Exception:
            pass
    if "tensorflow" in sys.modules:
        out.update(tf_config())
    if "jax" in sys.modules and out.get("backend", "jax") == "jax":
        from stepscope.collect.keras.jax_info import jax_info

        out.update(jax_info())
    return out


def _nbytes(v: Any) -> int:
    import numpy as np

    try:
        n = 1
        for d in v.shape:
            n *= int(d)
        return n * np.dtype(str(getattr(v, "dtype", "float32"))).itemsize
    except Exception:
        return 0


def _count(v: Any) -> int:
    n = 1
    for d in v.shape:
        n *= int(d)
    return n


def summarize_keras_model(model: Any, *, max_layers: int = 2000) -> dict[str, Any]:
    """Layer table of a Keras model in the form of modelsummary.summarize_model: rows (name, type, depth,
    own params, trainable params, bytes, output shape where the model is built symbolically) and totals that
    count each variable once."""
    rows: list[dict[str, Any]] = []

    def walk(layer: Any, name: str, depth: int) -> None:
        if len(rows) >= max_layers:
            return
        children = list(getattr(layer, "_layers", None) or [])
        child_vars = {id(v) for c in children for v in c.weights}
        own = [v for v in layer.weights if id(v) not in child_vars]
        rows.append({
            "name": name, "type": type(layer).__name__, "depth": depth,
            "params": sum(_count(v) for v in own),
            "trainable_params": sum(_count(v) for v in own if getattr(v, "trainable", True)),
            "param_bytes": sum(_nbytes(v) for v in own), "buffer_bytes": 0,
            "output_shape": _output_shape(layer),
        })
        for c in children:
            walk(c, f"{name}.{c.name}" if depth else c.name, depth + 1)

    walk(model, "(root)", 0)
    unique = {id(v): v for v in model.weights}.values()
    trainable = {id(v) for v in model.trainable_weights}
    return {
        "name": getattr(model, "name", type(model).__name__),
        "type": f"{type(model).__module__}.{type(model).__qualname__}",
        "layers": rows,
        "total_params": sum(_count(v) for v in unique),
        "trainable_params": sum(_count(v) for v in unique if id(v) in trainable),
        "param_bytes": sum(_nbytes(v) for v in unique), "buffer_bytes": 0,
        "param_dtypes": sorted({str(getattr(v, "dtype", "")) for v in unique}),
        "truncated": len(rows) >= max_layers,
    }


def tf_config() -> dict[str, Any]:
    """Thread pools, devices, JIT and float settings of an imported TensorFlow (values as TF reports them:
    0 threads means TF's own default)."""
    import tensorflow as tf

    out: dict[str, Any] = {"tensorflow": getattr(tf, "__version__", None)}
    probes: dict[str, Callable[[], Any]] = {
        "inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads,
        "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads,
        "physical_devices": lambda: [f"{d.device_type}:{d.name}" for d in tf.config.list_physical_devices()],
        "logical_devices": lambda: [d.name for d in tf.config.list_logical_devices()],
        "jit": tf.config.optimizer.get_jit,
        "run_functions_eagerly": tf.config.functions_run_eagerly,
        "built_with_cuda": tf.test.is_built_with_cuda,
    }
    for key, probe in probes.items():
        try:
            v = probe()
            out[key] = v if isinstance(v, (int, float, bool, str, list)) or v is None else str(v)
        except Exception:
            out[key] = None
    return out


def _output_shape(layer: Any) -> list[int | None] | None:
    try:
        shape = layer.output.shape
        return [None if d is None else int(d) for d in shape]
    except Exception:
        return None
