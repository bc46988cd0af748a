"""Number formatting shared by every renderer: durations, bytes, rates, shares. None renders as '—'."""

from __future__ import annotations

import math

DASH = "—"


def _missing(v: float | None) -> bool:
    return v is None or (isinstance(v, float) and not math.isfinite(v))


def duration_ns(v: float | None) -> str:
    if _missing(v):
        return DASH
    assert v is not None
    a = abs(v)
    if a >= 60e9:
        return f"{v / 60e9:.1f} min"
    if a >= 1e9:
        return f"{v / 1e9:.2f} s"
    if a >= 1e6:
        return f"{v / 1e6:.2f} ms"
    if a >= 1e3:
        return f"{v / 1e3:.1f} µs"
    return f"{v:.0f} ns"


def nbytes(v: float | None) -> str:
    if _missing(v):
        return DASH
    assert v is not None
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(v) < 1024 or unit == "TiB":
            return f"{v:.0f} {unit}" if unit == "B" else f"{v:.1f} {unit}"
        v /= 1024
    return DASH


def rate(v: float | None, unit: str) -> str:
    if _missing(v):
        return DASH
    assert v is not None
    if abs(v) >= 1e6:
        return f"{v / 1e6:.2f} M{unit}/s"
    if abs(v) >= 1e4:
        return f"{v / 1e3:.1f} k{unit}/s"
    return f"{v:,.1f} {unit}/s"


def share(v: float | None) -> str:
    return DASH if _missing(v) else f"{100 * v:.1f}%"  # type: ignore[operator]


def number(v: float | None, digits: int = 3) -> str:
    if _missing(v):
        return DASH
    assert v is not None
    if float(v).is_integer() and abs(v) < 1e15:
        return f"{int(v):,}"
    return f"{v:.{digits}g}"


def metric_value(name: str, v: float | None) -> str:
    """Format a sampled metric by its name's unit suffix."""
    if name.endswith("_bytes"):
        return nbytes(v)
    if name.endswith("_bps"):
        return DASH if _missing(v) else nbytes(v) + "/s"
    if name.endswith("_pct"):
        return DASH if _missing(v) else f"{v:.1f}%"
    if name.endswith("_w"):
        return DASH if _missing(v) else f"{v:.1f} W"
    if name.endswith("_j"):
        return DASH if _missing(v) else f"{v:.1f} J"
    if name.endswith("_mhz"):
        return DASH if _missing(v) else f"{v:.0f} MHz"
    if name.endswith("_c"):
        return DASH if _missing(v) else f"{v:.0f} °C"
    return number(v)
