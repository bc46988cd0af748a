"""Escaping of user strings for HTML, and JSON embedded safely inside ``<script>`` elements."""

from __future__ import annotations

import html
import json
import math
from typing import Any

_JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def esc(value: object) -> str:
    """HTML-escape any value's ``str()`` (``& < > " '``); None renders as an empty string."""
    return "" if value is None else html.escape(str(value), quote=True)


def _finite(obj: Any) -> Any:
    """JSON-safe copy: NaN / inf become None, tuples lists, NumPy scalars and arrays plain Python."""
    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    if hasattr(obj, "tolist") and not isinstance(obj, (str, bytes)):
        return _finite(obj.tolist())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def json_for_script(data: Any) -> str:
    """JSON text that is safe inside ``<script type="application/json">``: sorted keys, compact, and
    ``< > &`` and U+2028/U+2029 written as ``\\uXXXX`` escapes so no ``</script>`` or HTML comment can
    ever appear in it (JSON.parse reads the escapes back as the same characters)."""
    try:  # most data is plain and finite already: encoded as it is, without a walk copying it first
        text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (ValueError, TypeError):  # NaN / inf, NumPy values, keys of mixed types
        text = json.dumps(_finite(data), sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                          allow_nan=False)
    for ch, rep in _JSON_ESCAPES.items():
        text = text.replace(ch, rep)
    return text


def json_script(data: Any, *, element_id: str | None = None, css_class: str | None = None) -> str:
    """A ``<script type="application/json">`` element holding ``data``; read it in JS with
    ``JSON.parse(el.textContent)``."""
    attrs = ""
    if element_id:
        attrs += f' id="{esc(element_id)}"'
    if css_class:
        attrs += f' class="{esc(css_class)}"'
    return f'<script type="application/json"{attrs}>{json_for_script(data)}</script>'
