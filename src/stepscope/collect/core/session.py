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
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from time import process_time_ns as _process_ns
from time import thread_time_ns as _thread_ns
from typing import TYPE_CHECKING, Any

from stepscope.collect.core.buffers import Buffers
from stepscope.collect.core.clock import Clock
from stepscope.collect.core.options import Options
from stepscope.collect.core.pystate import SessionCore, StepState

if TYPE_CHECKING:  # imported when the session opens: a dormant session (every process) stays light
    from stepscope.model.run import RankStream
    from stepscope.store.rundir import RecordWriter

log = logging.getLogger("stepscope")
_NAN = float("nan")
DONE = "done"
"""What a per-step callback (``Session.extras``) returns when it has nothing left to do."""


def detect_rank() -> tuple[int, int, int]:
    """(rank, local_rank, world_size) from torchrun, MPI or Slurm variables, else an initialised
    torch.distributed or an initialised mpi4py of more than one process."""
    env = os.environ
    for r, lr, ws in (("RANK", "LOCAL_RANK", "WORLD_SIZE"),
                      ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE"),
                      ("PMI_RANK", "MPI_LOCALRANKID", "PMI_SIZE"),
                      ("PMIX_RANK", "MPI_LOCALRANKID", "PMI_SIZE"),
                      ("SLURM_PROCID", "SLURM_LOCALID", "SLURM_STEP_NUM_TASKS")):
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
    # mpi4py last: Lightning's environment probe imports it (initialising a singleton MPI world of 1) in
    # processes whose rank only torch.distributed knows
    mpi = sys.modules.get("mpi4py.MPI")
    try:
        if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized() and mpi.COMM_WORLD.Get_size() > 1:
            world = mpi.COMM_WORLD
            return world.Get_rank(), world.Get_rank(), world.Get_size()
    except Exception:
        pass
    return 0, 0, 1


class Session(SessionCore):
    """Records steps, regions, metrics, communication and samples of one process into its rank file."""

    def __init__(self, run_dir: Path, run_id: str, options: Options, *, role: str | None = None,
                 on_close: Callable[[Session, str], None] | None = None) -> None:
        self.run_dir = run_dir
        self.run_id = run_id
        self.options = options
        self.role = role or options.role
        self.clock = Clock()
        self._new_buffers()
        self.active = False
        self.closed = False
        self.disabled = False
        self.step_source = None
        self.step_index = 0
        self.val_index = 0
        self.epoch = -1
        self.step = StepState(None, -1)
        self.region_stack: list[str] = []
        self.timing = "cpu_wall"
        self.stream: RankStream | None = None
        self.extras = []
        """Per-step callbacks (CUDA events, profiler window) run at each step boundary; one that returns
        :data:`DONE` is not called again."""
        self.closers: list[Callable[[], None]] = []
        self.on_flush: list[Callable[[], None]] = []
        """Checks run on the flush thread before each flush (off the training thread)."""
        self._warned: set[str] = set()
        self._writer: RecordWriter | None = None
        self._flusher: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock = threading.RLock()
        self._end_lock = threading.Lock()
        self._end_written = False
        self._signals: SignalGuard | None = None
        self._on_close = on_close
        self._exit_reason = "exit"
        self.pid = os.getpid()
        self.api_fetch = False
        """True while stepscope.steps() fetches: the DataLoader hook leaves that fetch to it."""
        self.owner: int | None = None
        """The thread whose training the steps record (its ``threading.get_ident``): the first whose optimizer
        steps (``claim_steps``). The hooks leave other threads' work out; until then every thread's counts."""
        self._owner_lock = threading.Lock()
        self.hook_notes: dict[str, dict[str, Any]] = {}
        """Per framework imported: its ``hooks`` record (version, hooks installed and refused; note_hooks)."""

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
        self._create_stream()
        atexit.register(self._atexit)
        mp = sys.modules.get("multiprocessing")
        if mp is not None and mp.parent_process() is not None:
            # a multiprocessing child ends with os._exit (no atexit) after running its finalizers
            from multiprocessing import util

            util.Finalize(None, self._atexit, exitpriority=100)
        self._install_exit_handlers()
        self._flusher = threading.Thread(target=self._flush_loop, name="stepscope-flush", daemon=True)
        self._flusher.start()
        from stepscope.collect.system.sampler import start_sampler

        start_sampler(self)
        self.closers.append(self._record_code)

    def _create_stream(self) -> None:
        """The rank file and its header (no thread, no handler: the blind exit path writes just this)."""
        from stepscope.collect.startup.metadata import gpus_from_torch, software_info
        from stepscope.model.run import RankStream
        from stepscope.store.rundir import RANKS, RecordWriter, stream_header

        rank, local_rank, world = detect_rank()
        self._writer = RecordWriter.create_rank_file(self.run_dir / RANKS, rank, os.getpid())
        now = self.clock.now()
        self.stream = RankStream(rank=rank, local_rank=local_rank, world_size=world, role=self.role,
                                 pid=os.getpid(), host=os.uname().nodename, start_ns=self.clock.wall(now),
                                 end_ns=None, software=software_info(), gpus=gpus_from_torch(),
                                 step_source=self.step_source, timing=self.timing)
        try:
            self._writer.append([stream_header(self.stream)])
        except OSError as e:  # disk full: the header stays pending and goes first once space frees
            self.warn_once("flush", f"could not write records ({_why(e)}); they are kept and retried")

    def _record_code(self) -> None:
        """At exit: content hashes of the script and the Python files it imported from the working directory
        (record kind ``code``), so that `diff` can verify "same code" without git."""
        from stepscope.collect.startup.metadata import code_hashes

        self.buffers.add_other({"kind": "code", "cwd": os.getcwd(), "files": code_hashes()})

    def _install_exit_handlers(self) -> None:
        prev_hook = sys.excepthook

        def excepthook(tp: type[BaseException], value: BaseException, tb: Any) -> None:
            self._exit_reason = "interrupted" if issubclass(tp, KeyboardInterrupt) else "exception"
            prev_hook(tp, value, tb)

        sys.excepthook = excepthook
        if threading.current_thread() is threading.main_thread():
            self._signals = SignalGuard(self)
            self._signals.install()

    def _atexit(self) -> None:
        self.close(self._exit_reason)

    def _flush_loop(self) -> None:
        while not self._stop.wait(self.options.flush_interval_s):
            for check in self.on_flush:
                try:
                    check()
                except Exception as e:
                    self.warn_once(f"on_flush:{check!r}", f"a collector's periodic check failed ({e})")
            self.flush()

    def flush(self) -> None:
        if self._writer is None or os.getpid() != self.pid:
            return
        try:
            self._writer.append(self.buffers.drain())
        except Exception as e:  # disk full, store gone: the batch stays pending in the writer
            self.warn_once("flush", f"could not write records ({_why(e)}); they are kept and retried")

    def close(self, reason: str = "exit") -> None:
        """Write the end record and stop the background threads. Safe to call twice, never raises."""
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
        self.write_end(reason)
        if self._signals is not None and threading.current_thread() is threading.main_thread():
            self._signals.uninstall()  # after the session, signals mean what they meant before it
        if self._on_close is not None:
            try:
                self._on_close(self, reason)
            except Exception as e:
                log.warning("stepscope: could not finish the run record (%s)", _why(e))

    def write_end(self, reason: str, *, drain_timeout: float | None = None) -> None:
        """Flush what is buffered and write the end record, once. ``drain_timeout``: give up on the
        buffers when another thread holds them that long (the path taken when a signal cuts a close short)."""
        with self._end_lock:
            if self._end_written or not self.active or self._writer is None:
                return
            self._end_written = True
        writer = self._writer
        records: list[dict[str, Any]] = []
        lock = self.buffers.lock
        if drain_timeout is None or lock.acquire(timeout=drain_timeout):
            if drain_timeout is not None:
                lock.release()
            records = self.buffers.drain()
        end = {"kind": "end", "end_ns": self.clock.wall(self.clock.now()), "reason": reason, "steps": self.step_index}
        try:
            writer.append(records + self._lost_note(writer) + [end])
        except Exception:
            # the disk is still full: give up what is pending and try the few bytes that say so
            writer.drop_pending()
            from stepscope.store.rundir import stream_header

            head = [stream_header(self.stream)] if self.stream is not None and writer.size() == 0 else []
            try:
                writer.append(head + self._lost_note(writer) + [end])
            except Exception as e:
                log.warning("stepscope: could not write the end of this process's records (%s); the run is kept "
                            "up to its last flush", _why(e))
        writer.close()

    @staticmethod
    def _lost_note(writer: RecordWriter) -> list[dict[str, Any]]:
        if not writer.lost_lines:
            return []
        return [{"kind": "note", "text": f"{writer.lost_lines} record line(s) could not be written (disk full or "
                                         "store unwritable) and were dropped"}]

    def _new_buffers(self) -> None:
        """Empty buffers, and the hot paths' appends bound to them (looked up once: regions.py appends through
        ``region_row``, mark_step and the optimizer's step timer through ``step_row``)."""
        self.buffers = Buffers(self.clock.offset_ns)
        self.region_row = self.buffers.region_rows.append
        self.step_row = self.buffers.add_step

    def after_fork_in_child(self) -> None:
        """A forked child starts as a fresh dormant session of its own: it never writes into the parent's
        stream, and it records only if it trains itself (a multiprocessing training child)."""
        self.pid = os.getpid()
        self._new_buffers()
        self.active = False
        self.closed = False
        self._writer = None
        self._flusher = None
        self._signals = None
        self._stop = threading.Event()
        self._lock = threading.RLock()
        self._end_lock = threading.Lock()
        self._end_written = False
        self._exit_reason = "exit"
        self.step = StepState(None, -1)
        self.step_index = 0
        self.val_index = 0
        self.epoch = -1
        self.region_stack = []
        self.stream = None
        # per-process collectors (CUDA timers, the profiler window, the sampler) belong to the parent
        self.extras = []
        self.closers = []
        self._on_close = None
        self.api_fetch = False
        self.owner = None  # the forking thread is the child's only one: it owns the steps it trains
        self._owner_lock = threading.Lock()
        self.hook_notes = {}  # the parent's imports: a forked child writes no blind stream for them

    # -- hooks noted: loud when blind -------------------------------------------------------------------
    def note_hooks(self, framework: str, version: str | None, installed: Sequence[str],
                   refused: Mapping[str, str]) -> None:
        """Which hooks of ``framework`` (imported in this process) were installed, and which refused (part ->
        one-line reason). Cheap and dormant: nothing is written now. The notes go into the stream as
        ``hooks`` records when it closes; and a process that noted a framework but never recorded a step
        opens its stream at exit just to write them, so the run can say what was found and why it is blind
        (analyze/run/summary.py)."""
        first = not self.hook_notes
        self.hook_notes[framework] = {"kind": "hooks", "framework": framework, "version": version,
                                      "installed": [str(h) for h in installed],
                                      "refused": {str(k): str(v) for k, v in refused.items()}}
        if first:
            self.closers.append(self._write_hook_notes)
            atexit.register(self._close_if_blind, os.getpid())

    def _write_hook_notes(self) -> None:
        for rec in self.hook_notes.values():
            self.buffers.add_other(dict(rec))

    def _close_if_blind(self, pid: int) -> None:
        """At exit: open and close the stream of a process that imported a framework but recorded nothing.
        A process that trained closed its stream already (its atexit ran first); multiprocessing children
        (DataLoader workers, pools) that merely imported the framework stay silent, and so does a process
        whose run already has a stream of another process (a parent whose children trained; of blind ranks
        that exit one after another, the first one's stream says it for the run)."""
        if pid != os.getpid() or self.pid != pid or self.closed or self.active or self.disabled or not self.hook_notes:
            return
        mp = sys.modules.get("multiprocessing")
        if mp is not None and mp.parent_process() is not None:
            return
        if self._run_has_streams():
            return  # another process of the run recorded (a parent whose children trained): it is not blind
        with self._lock:
            if self.active or self.closed:
                return
            try:  # the stream alone: no flush thread, sampler or signal handler is started at exit
                self._create_stream()
            except Exception as e:  # the store is unwritable: say so in one line, never a traceback at exit
                log.warning("stepscope: could not record what this process imported (%s)", _why(e))
                return
            self.active = True
        self.close(self._exit_reason)

    def _run_has_streams(self) -> bool:
        from stepscope.store.rundir import RANKS

        try:
            return any((self.run_dir / RANKS).iterdir())
        except OSError:
            return False

    # -- warnings and other records ------------------------------------------------------------------
    def warn_once(self, key: str, text: str) -> None:
        if key in self._warned:
            return
        self._warned.add(key)
        log.warning("stepscope: %s; training goes on", text)
        self.buffers.add_other({"kind": "note", "text": text})

    def note_once(self, key: str, text: str) -> None:
        """A note for the run's report only: nothing on stderr (the training's output stays as bare)."""
        if key in self._warned:
            return
        self._warned.add(key)
        self.buffers.add_other({"kind": "note", "text": text})

    def claim_steps(self, thread: int) -> int:
        """The owner of the steps (``owner``), ``thread`` where there was none yet: the first thread to ask."""
        with self._owner_lock:
            if self.owner is None:
                self.owner = thread
            return self.owner

    def record(self, kind: str, **fields: Any) -> None:
        """Store a record of another kind (model summary, loader config, ...)."""
        if self.activate():
            self.buffers.add_other({"kind": kind, **fields})

    def update_stream(self, **fields: Any) -> None:
        self.record("stream_update", **fields)

    # -- steps ----------------------------------------------------------------------------------------
    def touch(self, t: int) -> None:
        """First sign of training work: step 0 starts here."""
        st = self.step
        if st.start is None:
            st.start = t
            st.cpu0, st.pcpu0 = _thread_ns(), _process_ns()  # once a run: step 0's CPU time starts here too

    def set_step_source(self, source: str) -> None:
        if self.step_source != source:
            self.step_source = source
            if self.active:
                self.update_stream(step_source=source)

    def mark_step(self, t: int, *, source: str, phase: int = 0) -> None:
        """End the step in progress at perf time ``t`` (ignored unless ``source`` owns the steps);
        ``phase`` is a ``model.tables.Phase`` (TRAIN: 0, the default).

        The one definition of a step's end, called by every hook and API that ends a step: one tuple appended
        (no dict, no lock, no wall-clock call; times stay perf-counter ns until the flush converts them) and one
        new StepState. The CPU clocks are read here, two C calls: the stepping thread's CPU time
        (``time.thread_time_ns``) and the process's (every thread's, ``time.process_time_ns``), each as the
        difference from where the step started (NaN when it started elsewhere than at a step boundary)."""
        if source != self.step_source:
            if self.step_source is not None:
                return
            self.set_step_source(source)
        if not self.active and not self.activate():
            return
        st = self.step
        start = t if st.start is None else st.start
        o = self.options
        samples = o.samples_per_step if o.samples_per_step is not None else (
            st.samples if st.fetched or st.samples else _NAN)  # samples: from a batch or the forward input
        tokens = o.tokens_per_step if o.tokens_per_step is not None else (st.tokens or _NAN)
        train = phase == 0
        cpu, pcpu = _thread_ns(), _process_ns()
        self.step_row((
            self.step_index if train else self.val_index, start, t, samples, tokens,
            st.data_wait if st.fetched else _NAN, st.forward or _NAN, st.backward or _NAN, st.optimizer or _NAN,
            st.comm or _NAN, st.epoch, 0 if train else 1, cpu - st.cpu0 if st.cpu0 >= 0 else _NAN,
            pcpu - st.pcpu0 if st.pcpu0 >= 0 else _NAN))
        if not train:
            self.val_index += 1
            self.step = StepState(t, self.epoch, cpu, pcpu)  # a validation step: no per-step collector runs
            return
        self.step_index += 1
        if st.epoch >= 0:
            self.epoch = st.epoch  # the training loader's epoch; a validation loader never sets it
        self.step = StepState(t, self.epoch, cpu, pcpu)
        retired = None
        for cb in self.extras:
            try:
                if cb() is not DONE:
                    continue
            except Exception as e:
                self.warn_once(f"extra:{cb!r}", f"a per-step collector failed and was turned off ({e})")
            retired = [cb] if retired is None else [*retired, cb]  # failed or done: not called again
        if retired is not None:
            self.extras = [cb for cb in self.extras if cb not in retired]

    def add_fetch(self, t0: int, t1: int, samples: float | None, tokens: float | None) -> None:
        """A batch fetched between perf times ``t0`` and ``t1`` (the one definition: the DataLoader hook and
        ``stepscope.steps()`` both call it). ``samples`` None: the batch holds no tensor to count (samples
        unknown, NaN, never 0)."""
        st = self.step
        if st.start is None:
            st.start = t0
            st.cpu0, st.pcpu0 = _thread_ns(), _process_ns()  # step 0 starts at its first fetch (once a run)
        st.data_wait += t1 - t0
        if not st.fetched:
            st.fetched = True
            st.samples = 0.0  # samples read from a forward input before this batch came: the batches count
        if samples is None:
            st.samples = _NAN
        elif samples:
            st.samples += samples
        if tokens:
            st.tokens += tokens

    # -- metrics and regions -------------------------------------------------------------------------
    def log_metric(self, name: str, value: float, step: int | None) -> None:
        if self.activate():
            self.buffers.add_metric(name, self.step_index if step is None else step,
                                    self.clock.wall(self.clock.now()), value)

    def add_region(self, path: str, t0: int, t1: int, depth: int) -> None:
        self.buffers.add_region(path, self.step_index, t0, t1, depth)


def _why(e: BaseException) -> str:
    return (e.strerror or str(e)) if isinstance(e, OSError) else f"{type(e).__name__}: {e}"


TERM_GRACE_S = 1.0
"""After SIGTERM / SIGHUP, how long writing the records may take before the process dies of the signal anyway."""


def _c_signal() -> Callable[[int, None], Any] | None:
    """libc's signal(), to restore the default disposition from a thread other than the main one
    (Python's signal.signal works in the main thread only)."""
    try:
        import ctypes

        fn = ctypes.CDLL(None).signal
        fn.restype = ctypes.c_void_p
        fn.argtypes = (ctypes.c_int, ctypes.c_void_p)
        return fn
    except Exception:
        return None


class SignalGuard:
    """SIGTERM and SIGHUP keep their default meaning for the observed process, the records written first.

    A Python signal handler runs only when the main thread executes bytecode: a main thread blocked in C
    (a gloo all-reduce waiting for a peer, a semaphore) would never run it. So the C-level handler also
    writes the signal number into a wakeup pipe (``signal.set_wakeup_fd``) read by a thread of ours.
    Whichever sees the signal first closes the session (at most :data:`TERM_GRACE_S`, then just the end
    record) and re-raises the signal with its default disposition: the process dies of it, as bare.

    Forked children never run our handler: the signals are blocked in the forking thread across the fork,
    and the child restores the default disposition and drops the wakeup pipe before unblocking them
    (a signal sent in between stays pending and kills the child then, as bare). Only a process that
    trains itself (and so activates its own session) installs handlers again."""

    SIGNALS = (signal.SIGTERM, signal.SIGHUP)

    def __init__(self, session: Session) -> None:
        self.session = session
        self.installed: list[int] = []
        self._rfd = -1
        self._wfd = -1
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._started = threading.Lock()
        self._done = threading.Event()
        self._c_signal: Callable[[int, None], Any] | None = None
        self._fork_mask: set[int] | None = None

    def install(self) -> None:
        """Main thread only. Takes over only signals left at their default disposition."""
        global _GUARD
        for sig in self.SIGNALS:
            try:
                if signal.getsignal(sig) is signal.SIG_DFL:
                    signal.signal(sig, self._handler)
                    self.installed.append(sig)
            except (ValueError, OSError):
                pass
        if not self.installed:
            return
        self._c_signal = _c_signal()
        _GUARD = self
        _register_fork_hooks()
        try:
            rfd, wfd = os.pipe()
        except OSError:
            return
        os.set_blocking(wfd, False)
        try:
            previous = signal.set_wakeup_fd(wfd, warn_on_full_buffer=False)
        except (ValueError, OSError):
            previous = None
        if previous != -1:  # the process has its own wakeup fd (asyncio): leave it; the handler still works
            if previous is not None:
                signal.set_wakeup_fd(previous)
            os.close(rfd)
            os.close(wfd)
            return
        self._rfd, self._wfd = rfd, wfd
        self._thread = threading.Thread(target=self._watch, name="stepscope-signals", daemon=True)
        self._thread.start()

    def uninstall(self) -> None:
        """Main thread only: default dispositions back, the wakeup pipe and its thread gone."""
        global _GUARD
        self._restore_defaults()
        self.installed = []
        if _GUARD is self:
            _GUARD = None
        if self._wfd < 0:
            return
        self._drop_wakeup_fd()
        self._stopping = True
        try:
            os.write(self._wfd, b"\0")
        except OSError:
            pass
        if self._thread is not None:
            self._thread.join(timeout=1.0)
        self._close_pipe()

    def _restore_defaults(self) -> None:
        """Default dispositions back for the signals whose handler is still ours (a user's is left alone)."""
        for sig in self.installed:
            try:
                if signal.getsignal(sig) == self._handler:
                    signal.signal(sig, signal.SIG_DFL)
            except (ValueError, OSError):
                pass

    def _drop_wakeup_fd(self) -> None:
        """Stop writing signals to our pipe, unless someone else's wakeup fd replaced it since."""
        try:
            current = signal.set_wakeup_fd(-1)
            if current != self._wfd:
                signal.set_wakeup_fd(current)
        except (ValueError, OSError):
            pass

    def _close_pipe(self) -> None:
        for fd in (self._rfd, self._wfd):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._rfd = self._wfd = -1

    def _handler(self, signum: int, frame: Any) -> None:
        self.terminate(signum)

    def _watch(self) -> None:
        while not self._stopping:
            try:
                data = os.read(self._rfd, 64)
            except OSError:
                return
            if not data:
                return
            for signum in data:
                try:
                    ours = signum in self.installed and signal.getsignal(signum) == self._handler
                except (ValueError, OSError):
                    ours = False
                if ours and not self._stopping:
                    self.terminate(signum)

    def terminate(self, signum: int) -> None:
        """Write the records (bounded), then die of ``signum`` with its default disposition."""
        reason = f"signal:{signal.Signals(signum).name}"
        session = self.session
        if self._started.acquire(blocking=False):
            def close() -> None:
                try:
                    session.close(reason)
                finally:
                    self._done.set()

            threading.Thread(target=close, name="stepscope-close", daemon=True).start()
        if not self._done.wait(TERM_GRACE_S):
            try:
                session.write_end(reason, drain_timeout=0.2)  # a collector hangs (a stuck GPU): just the end
            except Exception:
                pass
        self._die(signum)

    def _die(self, signum: int) -> None:
        try:
            if threading.current_thread() is threading.main_thread():
                signal.signal(signum, signal.SIG_DFL)
            elif self._c_signal is not None:
                self._c_signal(signum, None)
            else:
                os._exit(128 + signum)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
            os.kill(os.getpid(), signum)
        finally:
            os._exit(128 + signum)  # not reached: the signal's default action ends the process

    # -- fork ---------------------------------------------------------------------------------------
    def before_fork(self) -> None:
        try:
            self._fork_mask = signal.pthread_sigmask(signal.SIG_BLOCK, self.installed)
        except (ValueError, OSError):
            self._fork_mask = None

    def after_fork_in_parent(self) -> None:
        if self._fork_mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, self._fork_mask)
            self._fork_mask = None

    def after_fork_in_child(self) -> None:
        global _GUARD
        self._restore_defaults()
        if self._wfd >= 0:
            self._drop_wakeup_fd()
        self._close_pipe()
        self.installed = []
        _GUARD = None
        if self._fork_mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, self._fork_mask)  # a pending signal acts now, by default


_GUARD: SignalGuard | None = None
_FORK_HOOKS = False


def _register_fork_hooks() -> None:
    global _FORK_HOOKS
    if _FORK_HOOKS:
        return
    _FORK_HOOKS = True

    def before() -> None:
        if _GUARD is not None and _GUARD.installed:
            _GUARD.before_fork()

    def parent() -> None:
        if _GUARD is not None:
            _GUARD.after_fork_in_parent()

    def child() -> None:
        if _GUARD is not None:
            _GUARD.after_fork_in_child()

    os.register_at_fork(before=before, after_in_parent=parent, after_in_child=child)


_CURRENT: Session | None = None


def current() -> Session | None:
    return _CURRENT


def set_current(session: Session | None) -> None:
    global _CURRENT
    _CURRENT = session
