"""Collection options, passed from `stepscope run` to every observed process through one env variable."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, fields
from typing import Any

ENV_OPTIONS = "STEPSCOPE_OPTIONS"
ENV_RUN_DIR = "STEPSCOPE_RUN_DIR"
ENV_RUN_ID = "STEPSCOPE_RUN_ID"
ENV_BOOT = "STEPSCOPE_BOOT_DIR"
ENV_DISABLE = "STEPSCOPE_DISABLE"
ENV_DATABENCH = "STEPSCOPE_DATABENCH"
"""Set by `stepscope data-bench` to its spec (collect/torch/databench.py); the bench is installed only then."""
ENV_OVERRIDES = "STEPSCOPE_OVERRIDES"
"""JSON of the DataLoader / thread settings `advise --verify` and `tune` apply (collect/torch/overrides.py)."""

AUTO_SKIP = -1
"""``profile_skip`` value meaning: place the window after the automatic warm-up (see collect/torch/window.py)."""


@dataclass(frozen=True, slots=True)
class Options:
    sample_interval_s: float = 1.0
    """System sampler period; 0 turns the sampler off."""
    flush_interval_s: float = 2.0
    """Records are appended to the run directory at least this often."""
    samples_per_step: float | None = None
    """Overrides the batch size read from the batch."""
    tokens_per_step: float | None = None
    warmup_steps: int | None = None
    """Steps excluded from statistics; None: automatic (see analyze/run/steps.py)."""
    profile_steps: int = 0
    """Active steps of the torch.profiler window; 0: no window."""
    profile_skip: int = 0
    """Steps skipped before the window's schedule starts; None-like 0 lets the default apply."""
    profile_wait: int = 1
    profile_warmup: int = 1
    profile_memory: bool = False
    profile_shapes: bool = True
    comm_timing: bool = True
    """Wrap torch.distributed calls to time them (see collect/torch/comm.py)."""
    memory_snapshot_steps: int = 0
    sample_stacks_hz: float = 0.0
    role: str | None = None
    mlflow: bool = False
    peak_flops: float | None = None
    """Peak FLOP/s of one device for MFU (default: from the GPU peak table)."""
    flops_per_step: float | None = None
    """Model FLOPs per training step (default: measured once with PyTorch's FLOP counter)."""

    def to_env(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_env(cls) -> Options:
        raw = os.environ.get(ENV_OPTIONS)
        if not raw:
            return cls()
        try:
            d: dict[str, Any] = json.loads(raw)
        except ValueError:
            return cls()
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})
