"""JAX settings of an observed process, read only from an already imported ``jax`` (never imports it)."""

from __future__ import annotations

import sys
from typing import Any


def jax_info() -> dict[str, Any]:
    """JAX and jaxlib versions, the default backend and the devices; {} where jax is not imported."""
    jax = sys.modules.get("jax")
    if jax is None:
        return {}
    out: dict[str, Any] = {"jax": getattr(jax, "__version__", None)}
    try:
        import jaxlib

        out["jaxlib"] = getattr(jaxlib, "__version__", None)
    except Exception:
        out["jaxlib"] = None
    try:
        out["jax_backend"] = jax.default_backend()
        out["jax_devices"] = [f"{d.platform}:{d.id}" for d in jax.devices()]
    except Exception:
        out["jax_backend"] = None
    return out
