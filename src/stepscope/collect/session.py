"""The per-process recorder: one Session per observed process (one rank stream).

A session is *dormant* until the process shows it trains (an optimizer step, a DataLoader batch, a
stepscope API call): only then does it open its rank file. So launchers (torchrun), DataLoader workers
and helper processes leave no stream behind. Every entry point from hooks goes through methods that
never raise into the user's code: failures turn the failing part off and warn once.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from stepscope.collect.buffers import Buffers
from stepscope.collect.clock import Clock
from stepscope.collect.options import Options
from stepscope.model.run import RankStream
from stepscope.model.tables import Phase
from stepscope.store.rundir import RANKS, RecordWriter, rank_file_name, stream_header

log = logging.getLogger("stepscope")
_NAN = float("nan")


def detect_rank() -> tuple[int, int, int]:
    """(rank, local_rank, world_size) from torchrun, MPI or Slurm variables, else torch.distributed."""
    env = os.environ
    for r, lr, ws in (("RANK", "LOCAL_RANK", "WORLD_SIZE"),
                      ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE"),
                      ("PMI_RANK", "MPI_LOCALRANKID", "PMI_SIZE"),
                      ("PMIX_RANK", "MPI_LOCALRANKID", "PMI_SIZE")):
        if r in env:
            try:
                return int(env[r]), int(env.get(lr, env[r])), int(env.get(ws, "1"))
            except ValueError:
                pass
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_rank(), dist.get_world_size()
    except Exception:
        pass
    return 0, 0, 1


class StepState:
    """Accumulators of the step in progress (perf-counter ns)."""

    __slots__ = (
        "backward",
        "comm",
        "data_wait",
        "epoch",
        "fetched",
        "forward",
        "optimizer",
        "samples",
        "start",
        "tokens",
    )

    def __init__(self, start: int | None, epoch: int) -> None:
        self.start = start
        self.epoch = epoch
        self.data_wait = 0
        self.forward = 0
        self.backward = 0
        self.optimizer = 0
        self.comm = 0
        self.fetched = False
        self.samples: float = 0.0
        self.tokens: float = 0.0


class Session:
    """Records steps, regions, metrics, communication and samples of one process into its rank file."""

    def __init__(self, run_dir: Path, run_id: str, options: Options, *, role: str | None = None,
                 on_close: Callable[[Session, str], None] | None = None) -> None:
        self.run_dir = run_dir
        self.run_id = run_id
        self.options = options
        self.role = role or options.role
        self.clock = Clock()
        self.buffers = Buffers()
        self.active = False
        self.closed = False
        self.disabled = False
        self.step_source: str | None = None
        self.step_index = 0
        self.val_index = 0
        self.epoch = -1
        self.step = StepState(None, -1)
        self.region_stack: list[str] = []
        self.timing = "cpu_wall"
        self.stream: RankStream | None = None
        self.extras: list[Callable[[], None]] = []
        """Per-step callbacks (CUDA events, profiler window) run at each step boundary."""
        self.closers: list[Callable[[], None]] = []
        self._warned: set[str] = set()
        self._writer: RecordWriter | None = None
        self._flusher: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock = threading.RLock()
        self._on_close = on_close
        self._exit_reason = "exit"
        self.pid = os.getpid()
        self.api_fetch = False
        """True while stepscope.steps() fetches: the DataLoader hook leaves that fetch to it."""

    # -- lifecycle ----------------------------------------------------------------------------------
    def activate(self) -> bool:
        """Open the rank stream (once). Returns False when the session cannot record."""
        if self.active:
            return True
        if self.disabled or self.closed or os.getpid() != self.pid:
            return False
        with self._lock:
            if self.active:
                return True
            try:
                self._open()
            except Exception as e:  # the store is unwritable: record nothing, never break training
                self.disabled = True
                log.warning("stepscope: cannot record this process (%s); training goes on unobserved", e)
                return False
            self.active = True
        return True

    def _open(self) -> None:
        from stepscope.collect.metadata import gpus_from_torch, software_info

        rank, local_rank, world = detect_rank()
        path = self.run_dir / RANKS / rank_file_name(rank)
        if path.exists():
            path = self.run_dir / RANKS / rank_file_name(rank, os.getpid())
        self._writer = RecordWriter(path)
        now = self.clock.now()
        self.stream = RankStream(rank=rank, local_rank=local_rank, world_size=world, role=self.role,
                                 pid=os.getpid(), host=os.uname().nodename, start_ns=self.clock.wall(now),
                                 end_ns=None, software=software_info(), gpus=gpus_from_torch(),
                                 step_source=self.step_source, timing=self.timing)
        self._writer.append([stream_header(self.stream)])
        atexit.register(self._atexit)
        self._install_exit_handlers()
        self._flusher = threading.Thread(target=self._flush_loop, name="stepscope-flush", daemon=True)
        self._flusher.start()
        from stepscope.collect.sampler import start_sampler

        start_sampler(self)
        self.closers.append(self._record_code)

    def _record_code(self) -> None:
        """At exit: content hashes of the script and the Python files it imported from the working directory
        (record kind ``code``), so that `diff` can verify "same code" without git."""
        from stepscope.collect.metadata import code_hashes

        self.buffers.add_other({"kind": "code", "cwd": os.getcwd(), "files": code_hashes()})

    def _install_exit_handlers(self) -> None:
        prev_hook = sys.excepthook

        def excepthook(tp: type[BaseException], value: BaseException, tb: Any) -> None:
            self._exit_reason = "interrupted" if issubclass(tp, KeyboardInterrupt) else "exception"
            prev_hook(tp, value, tb)

        sys.excepthook = excepthook
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGTERM, signal.SIGHUP):
            try:
                if signal.getsignal(sig) is signal.SIG_DFL:
                    signal.signal(sig, self._on_signal)
            except (ValueError, OSError):
                pass

    def _on_signal(self, signum: int, frame: Any) -> None:
        """Flush, then die of the same signal as the user's process would have."""
        self.close(f"signal:{signal.Signals(signum).name}")
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    def _atexit(self) -> None:
        self.close(self._exit_reason)

    def _flush_loop(self) -> None:
        while not self._stop.wait(self.options.flush_interval_s):
            self.flush()

    def flush(self) -> None:
        if self._writer is None or os.getpid() != self.pid:
            return
        try:
            self._writer.append(self.buffers.drain())
        except Exception as e:
            self.warn_once("flush", f"could not write records ({e})")

    def close(self, reason: str = "exit") -> None:
        """Write the end record and stop the background threads. Safe to call twice."""
        with self._lock:
            if self.closed or os.getpid() != self.pid:
                return
            self.closed = True
        self._stop.set()
        for closer in self.closers:
            try:
                closer()
            except Exception as e:
                self.warn_once(f"closer:{closer!r}", f"a collector failed at exit ({e})")
        if self._flusher is not None and self._flusher is not threading.current_thread():
            self._flusher.join(timeout=2.0)  # no thread of ours may still run during interpreter finalization
        if self.active and self._writer is not None:
            self.flush()
            self._writer.append([{"kind": "end", "end_ns": self.clock.wall(self.clock.now()), "reason": reason,
                                  "steps": self.step_index}])
            self._writer.close()
        if self._on_close is not None:
            try:
                self._on_close(self, reason)
            except Exception as e:
                log.warning("stepscope: could not finish the run record (%s)", e)

    def after_fork_in_child(self) -> None:
        """A forked child (DataLoader worker) must not write into the parent's stream."""
        self.disabled = True
        self.active = False
        self._writer = None

    # -- warnings and other records ------------------------------------------------------------------
    def warn_once(self, key: str, text: str) -> None:
        if key in self._warned:
            return
        self._warned.add(key)
        log.warning("stepscope: %s; training goes on", text)
        self.buffers.add_other({"kind": "note", "text": text})

    def record(self, kind: str, **fields: Any) -> None:
        """Store a record of another kind (model summary, loader config, ...)."""
        if self.activate():
            self.buffers.add_other({"kind": kind, **fields})

    def update_stream(self, **fields: Any) -> None:
        self.record("stream_update", **fields)

    # -- steps ----------------------------------------------------------------------------------------
    def touch(self, t: int) -> None:
        """First sign of training work: step 0 starts here."""
        if self.step.start is None:
            self.step.start = t

    def set_step_source(self, source: str) -> None:
        if self.step_source != source:
            self.step_source = source
            if self.active:
                self.update_stream(step_source=source)

    def mark_step(self, t: int, *, source: str, phase: Phase = Phase.TRAIN) -> None:
        """End the step in progress at perf time ``t`` (ignored unless ``source`` owns the steps)."""
        if self.step_source is None:
            self.set_step_source(source)
        elif source != self.step_source:
            return
        if not self.activate():
            return
        st = self.step
        start = t if st.start is None else st.start
        o = self.options
        samples = o.samples_per_step if o.samples_per_step is not None else (st.samples if st.fetched else _NAN)
        tokens = o.tokens_per_step if o.tokens_per_step is not None else (st.tokens or _NAN)
        index = self.step_index if phase == Phase.TRAIN else self.val_index
        self.buffers.add_step({
            "index": index, "start_ns": self.clock.wall(start), "end_ns": self.clock.wall(t),
            "samples": samples, "tokens": tokens,
            "data_wait_ns": st.data_wait if st.fetched else _NAN,
            "forward_ns": st.forward if st.forward else _NAN,
            "backward_ns": st.backward if st.backward else _NAN,
            "optimizer_ns": st.optimizer if st.optimizer else _NAN,
            "comm_ns": st.comm if st.comm else _NAN,
            "epoch": st.epoch, "phase": int(phase),
        })
        if phase != Phase.TRAIN:
            self.val_index += 1
            self.step = StepState(t, self.epoch)  # a validation step: no per-step collector runs
            return
        self.step_index += 1
        if st.epoch >= 0:
            self.epoch = st.epoch  # the training loader's epoch; a validation loader never sets it
        self.step = StepState(t, self.epoch)
        for cb in self.extras:
            try:
                cb()
            except Exception as e:
                self.extras.remove(cb)
                self.warn_once(f"extra:{cb!r}", f"a per-step collector failed and was turned off ({e})")
                break

    def add_fetch(self, t0: int, t1: int, samples: float | None, tokens: float | None) -> None:
        st = self.step
        if st.start is None:
            st.start = t0
        st.data_wait += t1 - t0
        st.fetched = True
        if samples:
            st.samples += samples
        if tokens:
            st.tokens += tokens

    # -- metrics and regions -------------------------------------------------------------------------
    def log_metric(self, name: str, value: float, step: int | None) -> None:
        if self.activate():
            self.buffers.add_metric(name, self.step_index if step is None else step,
                                    self.clock.wall(self.clock.now()), value)

    def add_region(self, path: str, t0: int, t1: int, depth: int) -> None:
        self.buffers.add_region(path, self.step_index, self.clock.wall(t0), t1 - t0, depth)


_CURRENT: Session | None = None


def current() -> Session | None:
    return _CURRENT


def set_current(session: Session | None) -> None:
    global _CURRENT
    _CURRENT = session
