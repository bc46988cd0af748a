"""Where a profiler window starts when the user chose no ``--profile-skip``: past the automatic warm-up. One
definition for the torch.profiler window (window.py), the TensorFlow / JAX window (fwprofile.py) and the FLOP
count's step (flops.py)."""

from __future__ import annotations

LOADER_BATCHES: list[int] = []
"""Batches per epoch of the data loaders iterated so far in this process, in order (the first is the training
loader's): the torch DataLoader hook appends them; any framework's profiler window reads them."""
MIN_SKIP = 3
MAX_AUTO_WARMUP = 10
"""analyze.steps.MAX_AUTO_WARMUP (collect may not import analyze; a test keeps the two equal)."""


def auto_skip(batches_per_epoch: int | None) -> int:
    """Steps to skip before the window when the user chose none: past the automatic warm-up."""
    if not batches_per_epoch:
        return MAX_AUTO_WARMUP
    return min(MAX_AUTO_WARMUP, max(MIN_SKIP, -(-batches_per_epoch // 10)))


def batches_per_epoch() -> int | None:
    """Batches per epoch of the first data loader iterated in this process (None: none, or no length)."""
    return LOADER_BATCHES[0] if LOADER_BATCHES else None
