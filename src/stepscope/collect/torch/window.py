"""The bounded torch.profiler window of `stepscope run --profile-steps N`.

The window is a pure schedule (step -> Action): ``skip`` steps untouched, ``wait`` steps idle,
``warmup`` steps traced but discarded, ``active`` steps kept, then the trace is saved and the profiler
stopped for good. Outside the window the profiler is not running: the only cost is one Python call per
step boundary. One Kineto trace per rank is saved to ``artifacts/traces/rank<R>.json.gz``; a
``profile_window`` record says which steps it covers (``first_step``..``last_step`` kept,
``traced_first_step`` where tracing began, warm-up included), the offset between the trace's
``ProfilerStep#N`` and stepscope's step index (index = N + ``profiler_step_offset``), and what the
export cost. Step statistics exclude the traced steps: tracing slows them.

Stopping the profiler and writing the trace happen at the step boundary after the window, on the
training thread (Kineto's post-processing and export hold the GIL: another thread would slow the
training just as much); that boundary's cost (seconds on a large trace) lands in the step that
begins there, so the record names it (``carried_step``, ``boundary_s``) and step statistics leave it
out like the window.

Placement: ``--profile-skip N`` steps are skipped first. By default (``AUTO_SKIP``) the window is placed
after the automatic warm-up of the step statistics (analyze/run/steps.py: 10% of the steps, at most 10):
at the first boundary the skip becomes 10% of a training loader's batches per epoch, at least 3 and
at most ``MAX_AUTO_WARMUP`` (10 when no loader is known). With ``--warmup-steps N`` it is max(3, N).
A run that ends before its window is complete says so in a note.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import Any

from stepscope.collect.core.options import AUTO_SKIP as AUTO_SKIP  # (defined with the options it is a value of)
from stepscope.collect.core.session import Session
from stepscope.collect.core.warmup import MAX_AUTO_WARMUP, auto_skip, batches_per_epoch
from stepscope.store.rundir import ARTIFACTS

KINETO_LOG_LEVEL = "KINETO_LOG_LEVEL"


@contextmanager
def quiet_kineto() -> Iterator[None]:
    """Kineto's own log lines off while the profiler starts or steps.

    Kineto reads ``KINETO_LOG_LEVEL`` once, when the schedule first starts tracing; without it each window
    prints ``USDT: ... profiler_start`` and ``profiler_stop`` on the training's stderr. Level 6 is above
    every Kineto severity (USDT is 5, above ERROR), so Kineto's errors are silenced too. A level the user
    set is kept, and the variable is removed again at once: the training's subprocesses never see it."""
    if KINETO_LOG_LEVEL in os.environ:
        yield
        return
    os.environ[KINETO_LOG_LEVEL] = "6"
    try:
        yield
    finally:
        os.environ.pop(KINETO_LOG_LEVEL, None)


class Action(Enum):
    NONE = "none"
    WARMUP = "warmup"
    RECORD = "record"
    RECORD_AND_SAVE = "record_and_save"
    DONE = "done"


def window_schedule(*, skip: int, wait: int, warmup: int, active: int) -> Callable[[int], Action]:
    """Action for step ``n`` (counted from the first step boundary). Pure; ``active`` >= 1."""
    start_warmup = skip + wait
    start_active = start_warmup + warmup
    end = start_active + active

    def action(n: int) -> Action:
        if n < start_warmup:
            return Action.NONE
        if n < start_active:
            return Action.WARMUP
        if n < end - 1:
            return Action.RECORD
        if n == end - 1:
            return Action.RECORD_AND_SAVE
        return Action.DONE

    return action


def window_steps(*, skip: int, wait: int, warmup: int, active: int) -> tuple[int, int]:
    """(first, last) training step index inside the kept window (inclusive)."""
    first = skip + wait + warmup
    return first, first + active - 1


def trace_path(run_dir: Path, rank: int) -> Path:
    return run_dir / ARTIFACTS / "traces" / f"rank{rank}.json.gz"


def memory_by_operator(prof: Any, top: int = 25) -> list[dict[str, Any]]:
    """Operators that allocate most in the window (torch.profiler's key averages with profile_memory):
    calls and allocated bytes (self: by the operator itself; total: including its children), CPU and device."""
    rows = []
    for e in prof.key_averages():
        self_dev = getattr(e, "self_device_memory_usage", getattr(e, "self_cuda_memory_usage", 0)) or 0
        dev = getattr(e, "device_memory_usage", getattr(e, "cuda_memory_usage", 0)) or 0
        rows.append({"name": e.key, "calls": int(e.count), "self_cpu_bytes": int(e.self_cpu_memory_usage),
                     "cpu_bytes": int(e.cpu_memory_usage), "self_device_bytes": int(self_dev),
                     "device_bytes": int(dev)})
    rows.sort(key=lambda r: -max(r["self_cpu_bytes"], r["self_device_bytes"]))
    return [r for r in rows[:top] if r["self_cpu_bytes"] > 0 or r["self_device_bytes"] > 0]


class ProfilerWindow:
    """Drives torch.profiler from step boundaries (Session.extras)."""

    def __init__(self, session: Session) -> None:
        import torch

        self.torch = torch
        self.session = session
        self.prof: Any = None
        self.done = False
        self.offset = 0
        self.saving = False
        self.carried: int | None = None
        self._plan(session.options.profile_skip)

    def _plan(self, skip: int) -> None:
        o = self.session.options
        self.skip = skip if skip >= 0 else MAX_AUTO_WARMUP
        self.first, self.last = window_steps(skip=self.skip, wait=o.profile_wait, warmup=o.profile_warmup,
                                             active=o.profile_steps)
        self.schedule = window_schedule(skip=self.skip, wait=o.profile_wait, warmup=o.profile_warmup,
                                        active=o.profile_steps)
        self.traced_first = self.skip + o.profile_wait

    def _torch_action(self, n: int) -> Any:
        pa = self.torch.profiler.ProfilerAction
        a = self.schedule(n)
        return {Action.NONE: pa.NONE, Action.DONE: pa.NONE, Action.WARMUP: pa.WARMUP, Action.RECORD: pa.RECORD,
                Action.RECORD_AND_SAVE: pa.RECORD_AND_SAVE}[a]

    def on_step(self) -> None:
        """Called after each step boundary: ``session.step_index`` steps have ended."""
        if self.done:
            return
        n = self.session.step_index
        if self.prof is None:
            if self.session.options.profile_skip < 0:

                self._plan(auto_skip(batches_per_epoch()))
            self._start()
            return
        t0 = time.perf_counter()
        self.saving = self.schedule(n - 1) is Action.RECORD_AND_SAVE
        with quiet_kineto():
            self.prof.step()  # the profiler now acts for step n (and writes the trace after the window)
        if self.schedule(n) is Action.DONE or self.saving:
            self._stop()
            # the trace was written at this boundary: its cost is in step n, which begins here
            self.session.record("profile_boundary", carried_step=n, boundary_s=time.perf_counter() - t0)

    def _start(self) -> None:
        p = self.torch.profiler
        acts = [p.ProfilerActivity.CPU]
        if self.torch.cuda.is_available():
            acts.append(p.ProfilerActivity.CUDA)
        o = self.session.options
        # step_num starts at 0 here; our schedule counts ended steps, so shift by the steps already done.
        offset = self.offset = self.session.step_index
        self.prof = p.profile(activities=acts, schedule=lambda k: self._torch_action(k + offset),
                              on_trace_ready=self._save, record_shapes=o.profile_shapes,
                              profile_memory=o.profile_memory, with_stack=True)
        with quiet_kineto():
            self.prof.start()

    def _save(self, prof: Any) -> None:
        stream = self.session.stream
        rank = stream.rank if stream else 0
        path = trace_path(self.session.run_dir, rank)
        path.parent.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        prof.export_chrome_trace(str(path))
        if self.session.options.profile_memory:
            self.session.record("profile_memory", operators=memory_by_operator(prof))
        self.session.record("profile_window", first_step=self.first, last_step=self.last,
                            carried_step=self.session.step_index if self.saving else None,
                            traced_first_step=self.traced_first, profiler_step_offset=self.offset,
                            trace=str(path.relative_to(self.session.run_dir)), export_s=time.perf_counter() - t0,
                            activities=[str(a) for a in prof.activities] if hasattr(prof, "activities") else [])

    def _stop(self) -> None:
        self.done = True
        if self.prof is not None:
            self.prof.stop()
            self.prof = None

    def close(self) -> None:
        """At exit inside the window: keep what was recorded (short window), never leave it running."""
        if not self.done:
            n = self.session.step_index
            self.session.warn_once("profile-window", f"the run ended after {n} steps, before its profiler window "
                                   f"(steps {self.first}-{self.last}) was complete: the trace covers "
                                   f"{max(0, n - self.first)} of {self.last - self.first + 1} steps; choose an "
                                   "earlier window with --profile-skip")
        if not self.done and self.prof is not None:
            self.done = True
            try:
                self.prof.stop()
            finally:
                self.prof = None


def install_window(session: Session) -> None:
    session._profile_window = "torch"  # type: ignore[attr-defined]
    window = ProfilerWindow(session)
    session.extras.append(window.on_step)
    session.closers.append(window.close)
