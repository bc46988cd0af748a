"""FLOPs per step, achieved FLOP/s and model-FLOPs utilisation (MFU) of a run.

Definitions: FLOPs per step are the model FLOPs of one training step on one rank (matmul, convolution
and attention ops of forward + backward, counted by PyTorch's FLOP counter, see collect/torch/flops.py; or
given with ``--flops-per-step``). Achieved FLOP/s of a rank = FLOPs per step / its median step time
(warm-up and traced steps excluded); the run's figure adds up the ranks. MFU = achieved FLOP/s /
(peak FLOP/s of one device x ranks), with the peak given by ``--peak-flops`` or looked up in
``PEAK_TABLE`` from the device name and the precision the step's matmuls ran in (bf16/fp16 dense
tensor-core peak; tf32 when float32 matmuls may use TF32; else fp32). No GPU and no ``--peak-flops``:
MFU is None (a CPU's peak depends on its vector units and clocks; give it if you know it).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from stepscope.analyze.run.steps import StepStats
from stepscope.analyze.trace.gpu_peaks import flops_table
from stepscope.model.tables import RankData, RunData

PEAK_TABLE: tuple[tuple[str, dict[str, float]], ...] = flops_table()
"""(regex on the device name, {precision: dense peak FLOP/s of one device}), first match wins: the rows of
:data:`stepscope.analyze.trace.gpu_peaks.GPUS` (vendor data sheets, sources there). Precisions a device lacks fall
back to fp32."""


@dataclass(frozen=True, slots=True)
class FlopsSummary:
    """FLOPs and MFU of a run (see the module docstring for the definitions).

    flops_per_step: rank 0's FLOPs per training step. source: 'measured' (FLOP counter) or 'given'
    (--flops-per-step). precision: 'bf16' / 'fp16' / 'tf32' / 'fp32' (dtype holding most FLOPs; None
    when not known). achieved_flops: FLOP/s summed over ranks. peak_flops: one device's peak used for
    MFU, peak_source says where it comes from. mfu: 0-1, None without a peak. measured_step: the step
    counted (None if given). measure_cost_ns: how much longer the counted step took than the median
    step (the one-off cost of counting); None when unknown or not resolved (the counted step no slower than
    the slowest measured step: reports say "not resolved", never "+0"). ranks: ranks with a FLOPs figure.
    rnn_flops: FLOPs of recurrent layers added by formula (PyTorch's counter sees none). uncounted:
    layers (types) counted neither way: when not empty, FLOPs per step, achieved FLOP/s and MFU are
    lower bounds (reports say "partial").
    """

    flops_per_step: float
    source: str
    precision: str | None
    achieved_flops: float | None
    peak_flops: float | None
    peak_source: str | None
    mfu: float | None
    device_name: str | None
    measured_step: int | None
    measure_cost_ns: float | None
    ranks: int
    rnn_flops: float = 0.0
    uncounted: tuple[str, ...] = ()

    @property
    def partial(self) -> bool:
        return bool(self.uncounted)


def peak_for(device_name: str | None, precision: str | None) -> tuple[float, str] | None:
    """Dense peak FLOP/s of one device from PEAK_TABLE, and a label saying which entry; None if unknown."""
    if not isinstance(device_name, str) or not device_name:  # absent, or a damaged record's non-string
        return None
    prec = precision or "fp32"
    for pattern, peaks in PEAK_TABLE:
        if re.search(pattern, device_name, flags=re.IGNORECASE):
            p = prec if prec in peaks else "fp32"
            return peaks[p], f"{device_name}, {p} dense peak"
    return None


def precision_of(by_dtype: dict[str, Any], tf32: bool) -> str | None:
    """The precision of the dtype holding most of the counted FLOPs (None: no dtype with a count; a damaged record's
    non-numeric counts are ignored)."""
    counts = {k: float(v) for k, v in by_dtype.items() if isinstance(v, (int, float)) and not isinstance(v, bool)} \
        if isinstance(by_dtype, dict) else {}
    if not counts:
        return None
    dtype = max(counts, key=counts.__getitem__)
    if dtype in ("bfloat16", "float16"):
        return "bf16" if dtype == "bfloat16" else "fp16"
    if dtype == "float32":
        return "tf32" if tf32 else "fp32"
    return dtype


def flops_summary(data: RunData, step_stats: list[StepStats]) -> FlopsSummary | None:
    """FLOPs / MFU of ``data``; ``step_stats`` are the ranks' step statistics (same order). None when
    neither measured nor given."""
    opts = data.run.options
    given = opts.get("flops_per_step")
    peak_given = opts.get("peak_flops")
    if given is not None and float(given) <= 0:
        return None
    per_rank: list[tuple[float, float | None]] = []  # (flops per step, median step s)
    first: dict[str, Any] | None = None
    for rank, st in zip(data.ranks, step_stats):
        recs = [r for r in rank.extra.get("flops", []) if _well_formed(r)]
        if given is None and not recs:
            continue
        flops = float(given) if given is not None else float(recs[-1]["flops"])
        if first is None and recs:
            first = recs[-1]
        median = st.step_time.p50 if st.step_time else None
        per_rank.append((flops, median * 1e-9 if median else None))
    if not per_rank:
        return None
    achieved = [f / t for f, t in per_rank if t]
    total = sum(achieved) if achieved else None
    precision = precision_of(first.get("by_dtype", {}), bool(first.get("tf32"))) if first else None
    device_name = first.get("device_name") if first else None
    if device_name is None and data.ranks and data.ranks[0].stream.gpus and first is None:
        device_name = data.ranks[0].stream.gpus[0].name
    peak: tuple[float, str] | None
    peak = (float(peak_given), "--peak-flops") if peak_given else peak_for(device_name, precision)
    mfu = total / (peak[0] * len(achieved)) if peak and total is not None and achieved else None
    cost = None
    if first is not None and step_stats and step_stats[0].step_time:
        wall, d = float(first.get("step_wall_ns", 0)), step_stats[0].step_time
        if wall > d.max:  # within the measured steps' own range, a cost cannot be told from their noise
            cost = wall - d.p50
    return FlopsSummary(
        flops_per_step=per_rank[0][0], source="given" if given is not None else "measured", precision=precision,
        achieved_flops=total, peak_flops=peak[0] if peak else None, peak_source=peak[1] if peak else None,
        mfu=mfu, device_name=device_name, measured_step=int(first["step"]) if first else None,
        measure_cost_ns=cost, ranks=len(per_rank),
        rnn_flops=float(first.get("rnn_flops") or 0) if first and given is None else 0.0,
        uncounted=tuple(str(u) for u in first.get("uncounted", [])) if first and given is None else (),
    )


def _well_formed(rec: Any) -> bool:
    """A FLOP record with the types the collector writes (a damaged record line is ignored, not fatal)."""
    def num(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

    return (isinstance(rec, dict) and num(rec.get("flops")) and isinstance(rec.get("step"), int)
            and isinstance(rec.get("device_name") or "", str) and isinstance(rec.get("by_dtype") or {}, dict)
            and num(rec.get("step_wall_ns", 0)) and num(rec.get("rnn_flops") or 0)
            and isinstance(rec.get("uncounted") or [], list))


def counted_steps(rank: RankData) -> tuple[tuple[int, int], ...]:
    """The step whose FLOPs were counted (slowed by counting: kept out of step statistics)."""
    steps = [int(r["step"]) for r in rank.extra.get("flops", []) if isinstance(r.get("step"), int)]
    return tuple((k, k) for k in steps)
