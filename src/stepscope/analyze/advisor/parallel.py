"""Rules about several ranks: communication not overlapped with computation, imbalance between ranks."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from stepscope.analyze.advisor.base import AdvisorInput, Finding, finding, worst_trace

COMM_EXPOSED_SHARE = 0.15
LOAD_BALANCE = 0.90


class CommNotOverlapped:
    id: ClassVar[str] = "comm-not-overlapped"
    title: ClassVar[str] = "Communication is not overlapped with computation"
    explanation: ClassVar[str] = ("Gradient all-reduce (or other collectives) runs while no compute runs, so "
                                  "the step waits for the network.")
    threshold: ClassVar[str] = (f"communication kernels not overlapped with compute >= {COMM_EXPOSED_SHARE:.0%} of "
                                f"the window's GPU span (trace), or time in torch.distributed calls >= "
                                f"{COMM_EXPOSED_SHARE:.0%} of the step (steps)")
    suggestion: ClassVar[str] = ("Let DDP / FSDP overlap buckets with backward: keep find_unused_parameters=False, "
                                 "tune bucket_cap_mb, avoid synchronous dist calls and .item() inside the step, "
                                 "use gradient accumulation with no_sync(), or compress gradients "
                                 "(bf16 communication hooks).")

    def evaluate(self, inp: AdvisorInput) -> Finding | None:
        t = worst_trace(inp, lambda t: (t.comm_ns - t.comm_overlapped_ns) / t.gpu_span_ns
                        if t.comm_ns and t.gpu_span_ns else None, COMM_EXPOSED_SHARE)
        if t is not None:
            exposed = (t.comm_ns - t.comm_overlapped_ns) / t.profiled_steps / 1e9
            ev: dict[str, float | int | str] = {
                "rank": t.rank, "comm_per_step_s": t.comm_ns / t.profiled_steps / 1e9,
                "comm_overlap_share": t.comm_overlap_share or 0.0, "exposed_comm_per_step_s": exposed,
                "exposed_comm_share_of_window": (t.comm_ns - t.comm_overlapped_ns) / t.gpu_span_ns}
            return finding(self, inp, ev, per_step_s=exposed, source="trace",
                           basis="all exposed communication hidden behind compute (upper bound)")
        ranks = [r for r in inp.summary.ranks if r.steps.phases[4].share is not None]
        if not ranks:
            return None
        r = max(ranks, key=lambda r: r.steps.phases[4].share or 0.0)
        comm = r.steps.phases[4]
        if (comm.share or 0.0) < COMM_EXPOSED_SHARE:
            return None
        per_step = (comm.mean_ns or 0.0) / 1e9
        return finding(self, inp, {"rank": r.rank, "comm_share_of_step": comm.share or 0.0,
                                   "comm_per_step_s": per_step}, per_step_s=per_step,
                       source="steps", basis="all time blocked in torch.distributed calls hidden (upper bound)")


class RankImbalance:
    id: ClassVar[str] = "rank-imbalance"
    title: ClassVar[str] = "Ranks do unequal work: the fast ones wait"
    explanation: ClassVar[str] = ("Synchronous data parallelism runs at the pace of the slowest rank; the others "
                                  "wait in the next collective. Load balance (POP metric) = mean / max of the "
                                  "ranks' busy time per step.")
    threshold: ClassVar[str] = (f"load balance < {LOAD_BALANCE:.0%}: busy time per step = step time minus data "
                                "wait and communication (steps), or GPU busy time (traces of >= 2 ranks)")
    suggestion: ClassVar[str] = ("Find what the slow rank does differently (stepscope show RUN --ranks): uneven "
                                 "shards or sequence lengths (bucket by length, drop_last), extra work on rank 0 "
                                 "(logging, checkpointing, evaluation: move it out of the step or spread it), a "
                                 "slower device or a noisy host.")

    def evaluate(self, inp: AdvisorInput) -> Finding | None:
        busy: dict[int, float] = {}
        source = "steps"
        if len(inp.traces) >= 2:
            busy = {t.rank: t.gpu_busy_ns / t.profiled_steps for t in inp.traces}
            source = "trace"
        elif len(inp.summary.ranks) >= 2:
            for r in inp.summary.ranks:
                st = r.steps
                if st.step_time is None:
                    continue
                waits = sum(p.mean_ns or 0.0 for p in (st.phases[0], st.phases[4]))
                busy[r.rank] = max(0.0, st.step_time.mean - waits)
        if len(busy) < 2:
            return None
        vals = np.asarray(list(busy.values()))
        if vals.max() <= 0:
            return None
        lb = float(vals.mean() / vals.max())
        if lb >= LOAD_BALANCE:
            return None
        slow = max(busy, key=lambda k: busy[k])
        fast = min(busy, key=lambda k: busy[k])
        ev: dict[str, float | int | str] = {"load_balance": lb, "ranks": len(busy), "slowest_rank": slow,
                                            "slowest_busy_per_step_s": busy[slow] / 1e9,
                                            "fastest_rank": fast, "fastest_busy_per_step_s": busy[fast] / 1e9}
        return finding(self, inp, ev, per_step_s=float(vals.max() - vals.mean()) / 1e9, source=source,
                       basis="every rank as busy as the mean rank")
