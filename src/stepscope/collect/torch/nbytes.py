"""Bytes a torch tensor holds, for communication rows (comm.py's calls, ddp.py's buckets): NaN where unknown."""

from __future__ import annotations

from typing import Any


def tensor_nbytes(t: Any) -> float:
    try:
        return float(t.numel() * t.element_size())
    except Exception:
        return float("nan")
