"""Rules about device memory."""

from __future__ import annotations

from typing import ClassVar

from stepscope.analyze.advisor.base import AdvisorInput, Finding, finding
from stepscope.analyze.advisor.changes import Change

HEADROOM_USED_SHARE = 0.50


class MemoryHeadroom:
    id: ClassVar[str] = "memory-headroom"
    title: ClassVar[str] = "Most of the GPU memory is unused"
    explanation: ClassVar[str] = ("The peak memory the training reserved is far below the device's capacity: a "
                                  "larger batch (or a larger model shard) would likely fit and use the GPU better.")
    threshold: ClassVar[str] = f"peak reserved (or NVML used) memory < {HEADROOM_USED_SHARE:.0%} of the GPU's memory"
    suggestion: ClassVar[str] = ("Try a larger batch size (scale the learning rate accordingly), fewer gradient "
                                 "accumulation steps, or turn off activation checkpointing; compare runs with "
                                 "stepscope compare.")

    def evaluate(self, inp: AdvisorInput) -> Finding | None:
        host = inp.summary.run.host
        for r in inp.summary.ranks:
            stream_gpus = [g for st in inp.summary.run.streams if st.rank == r.rank for g in st.gpus]
            cap_by_gpu: dict[int, int] = {}
            for g in (*stream_gpus, *host.gpus):
                if g.memory_bytes:
                    cap_by_gpu.setdefault(g.index, g.memory_bytes)
            for m in r.system:
                if m.name.endswith("_mem_total_bytes") and m.peak:
                    cap_by_gpu.setdefault(int(m.name[3:].split("_", 1)[0]), int(m.peak))
            peak = r.peak_gpu_mem_bytes.get(f"cuda:{r.local_rank}", r.peak_gpu_mem_bytes.get(f"gpu{r.local_rank}"))
            cap = cap_by_gpu.get(r.local_rank)
            if peak is None or not cap:
                continue
            if peak / cap < HEADROOM_USED_SHARE:
                ev: dict[str, float | int | str] = {"rank": r.rank, "peak_bytes": peak, "capacity_bytes": cap,
                                                    "used_share": peak / cap}
                return finding(self, inp, ev, per_step_s=None, source="steps",
                               measured_from="from the run's peak GPU memory against the device's capacity",
                               basis="not estimated: the gain of a larger batch depends on the model",
                               change=_batch_change(inp))
        return None


BATCH_PARAMS = ("batch_size", "batch-size", "bs")


def _batch_change(inp: AdvisorInput) -> Change | None:
    """Twice the batch as a parameter of the command line, where the run names one (``--param batch_size=N``);
    None otherwise (the batch size is in the code)."""
    params = inp.summary.run.params
    key = next((k for k in BATCH_PARAMS if k in params), None)
    if key is None:
        return None
    try:
        n = int(params[key])
    except ValueError:
        return None
    return Change("param", key, 2 * n, f"{key}={2 * n}") if n > 0 else None
