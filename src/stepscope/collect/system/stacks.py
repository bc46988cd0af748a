"""Sampling of Python call stacks (`stepscope run --sample-stacks HZ`).

A daemon thread wakes HZ times a second, reads the main thread's current frame with
``sys._current_frames()`` and walks it to the root. Each sample is attributed to

* the stepscope region active on the main thread (regions.py keeps a reference to the main thread's
  region stack: reading it costs the region enter/exit path nothing), and
* the step phase, read from the stack itself: the outermost frame inside DataLoader ``__next__`` is
  data wait, inside autograd ``backward`` is backward, inside ``torch/optim`` (``step`` and its
  profiling wrapper) is optimizer, inside ``Module.__call__`` is forward, anything else is other. This
  is what the step accumulators of the Session measure, without a flag to set on every phase change.

Samples are aggregated as (region, phase, stack) -> count; code objects are kept as keys and turned
into ``qualname (file:line)`` strings only when a record is written (every flush interval and at exit),
as one ``stacks`` record: ``{"process": "main"|"worker", "pid", "hz", "t0_ns", "t1_ns", "samples",
"rows": [[region, phase, "root;...;leaf", count], ...]}``. Memory is bounded: at most MAX_KEYS distinct
keys per interval (further samples count in ``dropped``) and MAX_DEPTH frames per stack.

DataLoader worker processes (forked) start their own sampler thread, which appends records of
process ``worker`` to the parent's rank file every flush interval (workers end with ``os._exit``, so the
last partial interval of a worker is lost).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any

from stepscope.collect.core.session import Session

MAX_DEPTH = 128
MAX_KEYS = 20000
PHASES = ("data_wait", "forward", "backward", "optimizer", "other", "loader_worker")
_SEP = os.sep


def classify(code: CodeType) -> str | None:
    """The step phase a frame of ``code`` puts its callees in, or None."""
    fn, name = code.co_filename, code.co_name
    if "torch" not in fn and "stepscope" not in fn:
        return None
    norm = fn.replace(_SEP, "/")
    if name == "__next__" and norm.endswith(("torch/utils/data/dataloader.py", "stepscope/collect/torch/loader.py")):
        return "data_wait"
    if name == "backward" and norm.endswith(("torch/autograd/__init__.py", "torch/_tensor.py",
                                              "stepscope/collect/torch/hooks.py")):
        return "backward"
    if "/torch/optim/" in norm and (name == "step" or "profile_hook_step" in getattr(code, "co_qualname", "")):
        return "optimizer"
    if name in ("_call_impl", "_wrapped_call_impl") and norm.endswith("torch/nn/modules/module.py"):
        return "forward"
    return None


def frame_label(code: CodeType) -> str:
    """``qualname (file.py:first line)``; ';' is reserved by the collapsed format."""
    qual = getattr(code, "co_qualname", code.co_name)
    return f"{qual} ({os.path.basename(code.co_filename)}:{code.co_firstlineno})".replace(";", ",")


class StackSampler:
    """Samples one thread of this process; aggregates; hands records to ``emit``."""

    def __init__(self, hz: float, emit: Callable[[dict[str, Any]], None], *, process: str,
                 region_of: Callable[[], str], interval_s: float, fixed_phase: str | None = None) -> None:
        self.period = 1.0 / hz
        self.hz = hz
        self.emit = emit
        self.process = process
        self.region_of = region_of
        self.fixed_phase = fixed_phase
        """Phase of every sample (worker processes: 'loader_worker'); None: read from the stack."""
        self.interval_ns = int(interval_s * 1e9)
        self.target = threading.main_thread().ident
        self.counts: dict[tuple[str, str, tuple[CodeType, ...]], int] = {}
        self.phase_cache: dict[CodeType, str | None] = {}
        self.samples = 0
        self.dropped = 0
        self.t0 = time.time_ns()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="stepscope-stacks", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=1.0)
        self.drain()

    def _loop(self) -> None:
        perf = time.perf_counter_ns
        period_ns = int(self.period * 1e9)
        next_flush = perf() + self.interval_ns
        next_sample = perf() + period_ns
        # absolute deadlines: waking late (the GIL is held by the main thread) does not lower the rate
        while not self._stop.wait(max(0, next_sample - perf()) / 1e9):
            next_sample = max(next_sample + period_ns, perf() - period_ns)
            try:
                self.sample()
                if time.perf_counter_ns() >= next_flush:
                    next_flush += self.interval_ns
                    self.drain()
            except Exception:
                self.dropped += 1

    def sample(self) -> None:
        frame: FrameType | None = sys._current_frames().get(self.target)  # type: ignore[arg-type]
        if frame is None:
            return
        codes: list[CodeType] = []
        while frame is not None and len(codes) < MAX_DEPTH:
            codes.append(frame.f_code)
            frame = frame.f_back
        del frame
        codes.reverse()
        phase = self.fixed_phase or "other"
        cache = self.phase_cache
        for c in codes if self.fixed_phase is None else ():
            try:
                p = cache[c]
            except KeyError:
                p = cache[c] = classify(c)
            if p:
                phase = p
                break
        key = (self.region_of(), phase, tuple(codes))
        with self._lock:
            n = self.counts.get(key)
            if n is None and len(self.counts) >= MAX_KEYS:
                self.dropped += 1
                return
            self.counts[key] = (n or 0) + 1
            self.samples += 1

    def drain(self) -> None:
        """Emit what was aggregated since the last drain (nothing when no sample was taken)."""
        with self._lock:
            counts, samples, dropped = self.counts, self.samples, self.dropped
            self.counts, self.samples, self.dropped = {}, 0, 0
        t1 = time.time_ns()
        t0, self.t0 = self.t0, t1
        if not samples and not dropped:
            return
        labels: dict[CodeType, str] = {}
        rows = []
        for (region, phase, codes), n in counts.items():
            stack = ";".join(labels.get(c) or labels.setdefault(c, frame_label(c)) for c in codes)
            rows.append([region, phase, stack, n])
        self.emit({"kind": "stacks", "process": self.process, "pid": os.getpid(), "hz": self.hz,
                   "t0_ns": t0, "t1_ns": t1, "samples": samples, "dropped": dropped, "rows": rows})


def _main_region() -> str:
    from stepscope.collect import regions

    stack = regions.MAIN_STACK
    try:
        return stack[-1] if stack else ""
    except IndexError:
        return ""


def install_stacks(session: Session, undo: list[Callable[[], None]]) -> None:
    """Start sampling the main thread (and forked DataLoader workers) when ``sample_stacks_hz`` > 0."""
    hz = session.options.sample_stacks_hz
    if not hz or hz <= 0:
        return
    if not hasattr(sys, "_current_frames"):
        session.warn_once("stacks", f"stack sampling is unavailable on {sys.implementation.name} "
                                    "(no sys._current_frames); --sample-stacks is ignored")
        return
    if hz > 1000:
        session.warn_once("stacks-rate", f"--sample-stacks {hz:g} Hz is capped at 1000 Hz")
        hz = 1000.0

    def emit(record: dict[str, Any]) -> None:
        if session.active and not session.disabled:
            session.buffers.add_other(record)

    sampler = StackSampler(hz, emit, process="main", region_of=_main_region,
                           interval_s=session.options.flush_interval_s)
    sampler.start()
    session.closers.insert(0, sampler.stop)
    state: dict[str, Any] = {"on": True, "path": None}

    def before_fork() -> None:
        writer = session._writer
        state["path"] = writer.path if state["on"] and session.active and writer is not None else None

    os.register_at_fork(before=before_fork, after_in_child=lambda: _start_in_worker(hz, state,
                                                                                   session.options.flush_interval_s))

    def remove() -> None:
        state["on"] = False
        sampler._stop.set()

    undo.append(remove)


def _start_in_worker(hz: float, state: dict[str, Any], flush_interval_s: float) -> None:
    """In a forked child (a DataLoader worker): sample it, appending to the parent's rank file."""
    try:
        path = state.get("path")
        if not state["on"] or path is None:
            return
        from stepscope.store.rundir import RecordWriter

        out = RecordWriter(path)
        sampler = StackSampler(hz, lambda rec: out.append([rec]), process="worker", region_of=lambda: "",
                               interval_s=min(1.0, flush_interval_s), fixed_phase="loader_worker")
        sampler.start()
    except Exception:
        pass
