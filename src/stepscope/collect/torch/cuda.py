"""Honest GPU step timing: CUDA events recorded at step boundaries and read back steps later.

Never synchronises: an event pair is read only once ``query()`` says both completed, so the training
loop is not stalled. Peak allocated / reserved memory per step comes from the caching allocator's
counters, reset at each boundary.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from stepscope.collect.core.session import DONE, Session


class CudaStepTimer:
    def __init__(self, session: Session) -> None:
        import torch

        self.torch = torch
        self.session = session
        self.pending: deque[tuple[int, Any]] = deque()
        self.prev: Any = None
        self.prev_index = -1

    @staticmethod
    def usable() -> bool:
        import torch

        return bool(torch.cuda.is_initialized() and torch.cuda.is_available())  # type: ignore[no-untyped-call]

    @staticmethod
    def available() -> bool:
        """A GPU this process can use (fixed for the process: torch caches the device count)."""
        import torch

        return bool(torch.cuda.is_available())

    def on_step(self) -> None:
        torch = self.torch
        if not torch.cuda.is_initialized():
            return
        index = self.session.step_index - 1  # the step just ended
        ev = torch.cuda.Event(enable_timing=True)
        ev.record()
        if self.prev is not None:
            self.pending.append((index, (self.prev, ev)))
        self.prev = ev
        mem = {"index": index, "mem_allocated_peak_bytes": float(torch.cuda.max_memory_allocated()),
               "mem_reserved_peak_bytes": float(torch.cuda.max_memory_reserved())}
        torch.cuda.reset_peak_memory_stats()
        self.session.buffers.add_other({"kind": "step_device", **mem})
        self.drain(block=False)

    def drain(self, *, block: bool) -> None:
        while self.pending:
            index, (a, b) = self.pending[0]
            if not block and not b.query():
                return
            if block:
                b.synchronize()
            self.pending.popleft()
            self.session.buffers.add_other({"kind": "step_device", "index": index,
                                            "device_ns": a.elapsed_time(b) * 1e6})


def install_cuda_timer(session: Session) -> None:
    """Per-step CUDA timing, once CUDA is in use (checked at each boundary, cheap)."""
    holder: dict[str, CudaStepTimer] = {}

    def on_step() -> object:
        timer = holder.get("t")
        if timer is None:
            if not CudaStepTimer.usable():
                return DONE if not CudaStepTimer.available() else None  # no GPU: never checked again
            timer = holder["t"] = CudaStepTimer(session)
            session.timing = "cuda_events"
            session.update_stream(timing="cuda_events")
            session.closers.insert(0, lambda: timer.drain(block=True))
        timer.on_step()
        return None

    session.extras.append(on_step)
