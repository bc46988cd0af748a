"""Rules about several ranks: communication not overlapped with computation, imbalance between ranks."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from stepscope.analyze.advisor.base import AdvisorInput, Finding, finding, worst_trace
from stepscope.analyze.advisor.commfacts import CommOp
from stepscope.analyze.advisor.tracefacts import TraceFacts

COMM_EXPOSED_SHARE = 0.15
LOAD_BALANCE = 0.90
ACCUMULATION = 4
"""Micro-batches per all-reduce assumed for the saving of gradient accumulation (no_sync)."""


class CommNotOverlapped:
    id: ClassVar[str] = "comm-not-overlapped"
    title: ClassVar[str] = "Communication is not overlapped with computation"
    explanation: ClassVar[str] = ("Gradient all-reduce (or other collectives) runs while no compute runs, so "
                                  "the step waits for the network.")
    threshold: ClassVar[str] = (f"communication kernels not overlapped with compute >= {COMM_EXPOSED_SHARE:.0%} of "
                                f"the window's GPU span (trace), or time in torch.distributed calls >= "
                                f"{COMM_EXPOSED_SHARE:.0%} of the step (steps)")
    suggestion: ClassVar[str] = ("Let DDP / FSDP overlap buckets with backward: keep find_unused_parameters=False, "
                                 "avoid synchronous dist calls and .item() inside the step; communicate less "
                                 "often with gradient accumulation under model.no_sync().")

    def evaluate(self, inp: AdvisorInput) -> Finding | None:
        t = worst_trace(inp, lambda t: (t.comm_ns - t.comm_overlapped_ns) / t.gpu_span_ns
                        if t.comm_ns and t.gpu_span_ns else None, COMM_EXPOSED_SHARE)
        ev: dict[str, float | int | str]
        if t is not None:
            exposed = (t.comm_ns - t.comm_overlapped_ns) / t.steps_in_window / 1e9
            room = max(0.0, t.gpu_busy_ns - t.comm_ns) / t.steps_in_window / 1e9  # compute running without comm
            ev = {"rank": t.rank, "comm_per_step_s": t.comm_ns / t.steps_in_window / 1e9,
                  "comm_overlap_share": t.comm_overlap_share or 0.0, "exposed_comm_per_step_s": exposed,
                  "exposed_comm_share_of_window": (t.comm_ns - t.comm_overlapped_ns) / t.gpu_span_ns,
                  "compute_without_comm_per_step_s": room}
            source = "trace"
            traced = t
        else:
            ranks = [r for r in inp.summary.ranks if r.steps.phases[4].share is not None]
            if not ranks:
                return None
            r = max(ranks, key=lambda r: r.steps.phases[4].share or 0.0)
            comm = r.steps.phases[4]
            if (comm.share or 0.0) < COMM_EXPOSED_SHARE:
                return None
            exposed = (comm.mean_ns or 0.0) / 1e9
            backward = r.steps.phases[2].mean_ns
            room = backward / 1e9 if backward is not None else exposed
            ev = {"rank": r.rank, "comm_share_of_step": comm.share or 0.0, "comm_per_step_s": exposed}
            if backward is not None:
                ev["backward_per_step_s"] = room
            source = "steps"
            traced = None
        return self._advice(inp, ev, exposed, room, source, traced)

    def _advice(self, inp: AdvisorInput, ev: dict[str, float | int | str], exposed: float, room: float,
                source: str, traced: TraceFacts | None) -> Finding:
        cf = inp.comm
        main = cf.main_collective() if cf is not None else None
        if main is None and traced is not None and traced.comm_bytes_median is not None:
            main = CommOp("communication kernels", traced.comm_calls / traced.steps_in_window,
                          traced.comm_bytes_median, traced.comm_ns / traced.steps_in_window)
        if main is not None:
            ev["collective"] = main.op
            ev["calls_per_step"] = main.calls_per_step
            if main.bytes_median is not None:
                ev["bytes_per_call"] = main.bytes_median
        sync = cf.sync_share if cf is not None else None
        if sync is not None:
            ev["peer_wait_share"] = sync
        mpi = main is not None and is_mpi_op(main.op)
        if main is not None and main.latency_bound:
            ev["bound"] = "latency"
            save = exposed * (1 - 1 / ACCUMULATION) * (1 - (sync or 0.0))
            waiting = ", less its share spent waiting for slower ranks (rank-imbalance)" if sync else ""
            if mpi:
                remedy = (f"Communicate less often (one call for several steps' data, e.g. the {main.op} every k "
                          f"steps), or start it early with its non-blocking form ({_nonblocking(main.op)} / Isend, "
                          "then Wait after independent work) so the wait overlaps with computation; a larger "
                          "payload per call costs little more.")
                basis = (f"communicating once per {ACCUMULATION} steps: {1 - 1 / ACCUMULATION:.0%} of the exposed "
                         "communication" + waiting)
            else:
                remedy = ("Communicate less often: accumulate gradients over k micro-batches and skip the all-reduce "
                          "on all but the last (with model.no_sync(): loss.backward()), or take fewer, larger steps "
                          "(a larger batch per rank). Smaller buckets (bucket_cap_mb) or gradient compression cannot "
                          "help: there are no bytes to split or shrink.")
                basis = (f"with no_sync() accumulation over {ACCUMULATION} micro-batches the all-reduce runs once "
                         f"per {ACCUMULATION} steps: {1 - 1 / ACCUMULATION:.0%} of the exposed communication"
                         + waiting + f"; the effective batch grows {ACCUMULATION}×")
            return finding(self, inp, ev, per_step_s=save, source=source,
                           title="Communication is latency-bound: small collectives every step", suggestion=(
                f"Each step sends only {nbytes(main.bytes_median)} per {main.op} call "
                f"({main.calls_per_step:.3g} per step): the call's fixed latency and waiting for the other ranks "
                "cost the time, not the bytes. " + remedy), basis=basis)
        save = min(exposed, room)
        suggestion = self.suggestion
        if main is not None and main.latency_bound is False and mpi:
            ev["bound"] = "bandwidth"
            suggestion = (f"{main.op} moves {nbytes(main.bytes_median)} per call: bandwidth-bound. Overlap it with "
                          f"computation through its non-blocking form ({_nonblocking(main.op)}, Wait when the result "
                          "is needed), send fewer bytes (float32 or bf16 instead of float64, only what changed) "
                          "or communicate less often.")
        elif main is not None and main.latency_bound is False:
            ev["bound"] = "bandwidth"
            suggestion = (f"{main.op} moves {nbytes(main.bytes_median)} per call: bandwidth-bound. Overlap it with "
                          "backward: DDP(..., bucket_cap_mb=...) (smaller first buckets start sooner), "
                          "static_graph=True, gradient_as_bucket_view=True, find_unused_parameters=False; halve the "
                          "bytes with the bf16 compression hook (model.register_comm_hook(None, "
                          "torch.distributed.algorithms.ddp_comm_hooks.default_hooks.bf16_compress_hook)); "
                          "communicate less often with no_sync() gradient accumulation.")
        return finding(self, inp, ev, per_step_s=save, source=source, suggestion=suggestion,
                       basis="exposed communication hidden behind the compute it could overlap with (upper "
                             "bound: no more than that compute's time per step)", upper_bound=True)


_MPI_PICKLE_COLLECTIVES = frozenset({"bcast", "allreduce", "allgather", "alltoall", "scan", "exscan"})


def is_mpi_op(op: str) -> bool:
    """An mpi4py call's row (collect/mpi/mpi.py keeps mpi4py's method names: ``Bcast``, ``Iallreduce``, the pickle
    API's ``bcast``, ``allreduce``); torch.distributed's are snake_case (``all_reduce``, ``broadcast``). The names
    both share (``gather``, ``reduce``, ``barrier``, ``scatter``) count as torch.distributed."""
    return op[:1].isupper() or op in _MPI_PICKLE_COLLECTIVES


def _nonblocking(op: str) -> str:
    """mpi4py's non-blocking form of a collective: ``Bcast`` -> ``Ibcast`` (an ``I...`` call stays itself)."""
    return op if op[:1] == "I" and op[1:2].islower() else "I" + op[:1].lower() + op[1:]


def nbytes(n: float | None) -> str:
    if n is None:
        return "an unknown number of bytes"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} bytes"


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
            busy = {t.rank: t.gpu_busy_ns / t.steps_in_window for t in inp.traces}
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
