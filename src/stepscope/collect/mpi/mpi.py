"""MPI call timing through mpi4py, zero code: every call on ``MPI.COMM_WORLD`` (and on communicators made
from it) is counted, and timed calls become rows of the rank's CommTable, the table torch.distributed timing
fills (collect/torch/comm.py), so the transfer/sync split, POP metrics, stragglers and the communication matrix
read MPI runs unchanged. Which calls are timed: collect/mpi/mpi_sample.py (all of them up to a budget per flush
interval, then a sample); what each method's row holds: collect/mpi/mpi_calls.py and docs/frameworks.md.

How (mpi4py's types are immutable C types, their methods cannot be replaced): right after ``mpi4py.MPI``
is imported, ``MPI.COMM_WORLD`` is replaced by an instance of a Python subclass of ``MPI.Intracomm`` that
holds the same MPI handle and overrides the communication methods; communicators made from it (``Dup``,
``Split``, ...) are of that class too. Non-blocking calls that are timed return a subclass of
``MPI.Request`` (same handle, same buffer reference) that records the call when its ``Wait``/``Test`` or a
class-level ``Waitall``/``Waitany``/... completes it; ``MPI.Request`` is replaced by that subclass
(``isinstance`` against it stays true for every request).

Each overridden method is one site of collect/mpi/mpi_sites.py (one class per behaviour: send, receive,
non-blocking, collective, send-receive, probe, communicator maker). Its untimed path does only what the
exact counts need (a countdown, the call, two additions); the timed path builds the row. Here: the
per-process state (:class:`MpiRecorder`) and the installation (:class:`MpiTiming`).

Nothing raises into the user's program: bookkeeping errors warn once and the call goes on untimed.
"""

from __future__ import annotations

import functools
import os
import pickle
import sys
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from stepscope.collect.core.session import Session
from stepscope.collect.mpi.mpi_calls import (
    CALLS,
    MAKERS,
    PROBES,
    SENDRECV,
    counting_dumps,
    counting_loads,
    is_default_pickle,
    set_pickle,
)
from stepscope.collect.mpi.mpi_requests import request_class
from stepscope.collect.mpi.mpi_sample import Budget, Counts
from stepscope.collect.mpi.mpi_sites import site_class

_perf = time.perf_counter_ns
CommInfo = tuple[int, int, tuple[int, ...] | None]
"""(communicator id, size, world rank of each member or None for the world itself)"""


class MpiRecorder:
    """Per-process state: the CommTable writer, communicator ids, the row budget and the exact counts."""

    def __init__(self, session: Session, mpi: Any, budget: Budget | None = None) -> None:
        self.session = session
        self.mpi = mpi
        self.rows: deque[tuple[dict[str, Any], int, int]] = deque()
        """Timed calls (row, perf start, perf end), moved into the session's CommTable buffers by the flush
        thread: the buffers' per-column appends under a lock cost the training thread 2 µs a row."""
        self.counters: dict[tuple[Any, ...], int] = {}
        self.budget = budget or Budget(seed=os.getpid())
        self.counts: dict[str, Counts] = {}
        self.comms: dict[int, CommInfo] = {}
        self.created = 0
        self.world: Any = None
        self.noted = False
        self.reported: tuple[int, ...] = ()
        self.calls_at_flush = 0
        self.request_cls: type[Any] = getattr(mpi, "Request", object)
        """The timed ``MPI.Request`` subclass (collect/mpi/mpi_requests.py), set by MpiTiming."""
        self.comm_cls: type[Any] = getattr(mpi, "Intracomm", object)
        """The timed ``MPI.Intracomm`` subclass, set by MpiTiming."""

    # -- communicators -----------------------------------------------------------------------------
    def comm_info(self, comm: Any) -> CommInfo:
        try:
            info: CommInfo = comm._ss_info  # set when the timed communicator was made
            return info
        except AttributeError:
            known = self.comms.get(_handle(comm))
            return known if known is not None else self.register(comm)

    def register(self, comm: Any) -> CommInfo:
        mpi = self.mpi
        size = comm.Get_size()
        if self.world is not None and comm.Compare(self.world) in (mpi.IDENT,):
            info: CommInfo = (0, size, None)
        else:
            world_group = self.world.Get_group()
            group = comm.Get_group()
            try:
                ranks = tuple(int(r) for r in mpi.Group.Translate_ranks(group, list(range(size)), world_group))
            finally:
                group.Free()
                world_group.Free()
            self.created += 1
            info = (((ranks[0] & 0x7FFF) << 16) | (self.created & 0x7FFF), size, ranks)
        self.comms[_handle(comm)] = info
        if type(comm) is self.comm_cls:
            comm._ss_info = info
        return info

    def adopt(self, comm: Any) -> Any:
        """A communicator made from a timed one, as an instance of the timed class, registered."""
        base = self.mpi.Intracomm
        if isinstance(comm, base) and type(comm) in (base, self.comm_cls) and comm:
            if type(comm) is base:
                comm = self.comm_cls(comm)
            elif not hasattr(comm, "_ss_n"):  # made by mpi4py as type(self) without our __init__
                comm._ss_n = 0
            self.register(comm)
        return comm

    @staticmethod
    def world_rank(info: CommInfo, peer: int) -> int:
        ranks = info[2]
        if peer < 0 or ranks is None:
            return peer
        return ranks[peer] if peer < len(ranks) else -1

    # -- rows --------------------------------------------------------------------------------------
    def next_seq(self, key: tuple[Any, ...], gid: int) -> int:
        """``(gid << 32) | index`` of the call among those of ``key``. No lock: only the calling thread numbers
        (two threads racing on one communicator, op and peer could not be matched across ranks anyway)."""
        n = self.counters.get(key, 0)
        self.counters[key] = n + 1
        return (gid << 32) | n

    def add(self, counts: Counts, row: dict[str, Any], t0: int, t_end: int, blocked_ns: int, weight: int) -> None:
        """Keep one timed call for the next flush; a receive from ANY_SOURCE is numbered among its sender's
        calls once it is known. A sampled row's blocked time counts ``weight`` times in the step's comm phase."""
        s = self.session
        if not s.active and not s.activate():
            return
        if row.get("seq") is None:
            gid = row.get("gid", 0)
            row["seq"] = self.next_seq((gid, row["op"], row["peer"]), gid)
        if weight > 1 and not self.noted:
            self.note_sampling()
        self.rows.append((row, t0, t_end))
        if blocked_ns > 0:
            s.step.comm += blocked_ns * weight
        counts.timed += 1
        counts.timed_ns += t_end - t0
        counts.estimated_ns += (t_end - t0) * weight

    def note_sampling(self) -> None:
        self.noted = True
        b = self.budget
        self.session.buffers.add_other({"kind": "note", "text": (
            f"mpi4py: more than {b.per_interval} calls in a flush interval: every call is counted (calls and "
            f"bytes, record mpi_calls) but past that only 1 in {b.sample_every} is timed, so this rank's MPI "
            "times and comm phase are estimates from a sample")})

    def status_row(self, row: dict[str, Any], info: CommInfo, status: Any) -> None:
        """A receive's peer, tag and bytes from the message received."""
        mpi = self.mpi
        src, tag = status.Get_source(), status.Get_tag()
        if src >= 0:
            row["peer"] = self.world_rank(info, src)
        if tag >= 0:
            row["tag"] = tag
        n = status.Get_count(mpi.BYTE)
        if n >= 0 and n != mpi.UNDEFINED:
            row["bytes"] = float(n)

    # -- exact counts ------------------------------------------------------------------------------
    def record_counts(self) -> None:
        """The cumulative per-method counts as one ``mpi_calls`` record, when they changed (at each flush
        and at exit: the last record of a rank is its total)."""
        now = tuple(c.calls for c in self.counts.values())
        if now == self.reported or not any(now):
            return
        self.reported = now
        b = self.budget
        self.session.record("mpi_calls", free_rows=b.per_interval, sample_every=b.sample_every,
                            sampled_rows=b.sampled, methods={k: c.as_dict() for k, c in self.counts.items()
                                                             if c.calls})

    def drain_rows(self) -> None:
        """The timed calls kept so far into the session's CommTable buffers (the flush thread, and at exit)."""
        rows, add, wall = self.rows, self.session.buffers.add_comm, self.session.clock.wall
        for _ in range(len(rows)):
            row, t0, t1 = rows.popleft()
            row["start_ns"], row["duration_ns"] = wall(t0), t1 - t0
            add(row)

    def on_flush(self) -> None:
        self.drain_rows()
        self.record_counts()
        calls = sum(c.calls for c in self.counts.values())
        self.budget.refill(busy=calls - self.calls_at_flush > self.budget.per_interval)
        self.calls_at_flush = calls

    def at_exit(self) -> None:
        self.drain_rows()
        self.record_counts()


def _handle(comm: Any) -> int:
    """The MPI handle as an int (mpi4py 4: ``handle``; 3.x: the Fortran handle)."""
    h = getattr(comm, "handle", None)
    return int(h) if h is not None else int(comm.py2f())


# -- installation ---------------------------------------------------------------------------------------
def timed_comm_class(m: MpiRecorder) -> type[Any]:
    """``MPI.Intracomm`` with every method of the tables overridden by its site."""
    base = m.mpi.Intracomm

    def init(self: Any, *args: Any) -> None:
        self._ss_n = 0  # collectives made on this communicator (their seq)

    ns: dict[str, Any] = {"__slots__": ("_ss_info", "_ss_n"), "__module__": "mpi4py.MPI", "__qualname__": "Intracomm",
                          "__init__": init}
    for name in (*CALLS, *SENDRECV, *PROBES, *MAKERS):
        orig = getattr(base, name, None)
        if orig is not None:
            ns[name] = site_class(name)(m, name, orig).wrap()
    return type("Intracomm", (base,), ns)


class MpiTiming:
    """Puts the timed ``COMM_WORLD``, ``MPI.Request`` and counting pickler in place; ``restore`` undoes it."""

    def __init__(self, session: Session, mpi: Any) -> None:
        self.session = session
        self.mpi = mpi
        self.m = m = MpiRecorder(session, mpi)
        self.base_comm, self.base_req = mpi.Intracomm, mpi.Request
        m.request_cls = request_class(m)
        self.comm_cls = m.comm_cls = timed_comm_class(m)
        self.orig_world = mpi.COMM_WORLD
        self.restores: list[Callable[[], None]] = []
        self.counting = False

    def install(self) -> None:
        mpi, session = self.mpi, self.session
        version = str(getattr(sys.modules.get("mpi4py"), "__version__", "?"))
        if version.split(".")[0] not in ("3", "4"):
            session.warn_once("mpi:version", f"mpi4py {version} is not a version stepscope knows (3.x, 4.x); "
                              "its calls are timed where they can be")
        if mpi.Is_initialized():
            self.time_world()
        else:  # mpi4py.rc.initialize = False: the user calls MPI.Init / Init_thread later
            for fname in ("Init", "Init_thread"):
                init = getattr(mpi, fname, None)
                if init is not None:
                    setattr(mpi, fname, self.then_time_world(init))
                    self.restores.append(functools.partial(setattr, mpi, fname, init))
        pkl = mpi.pickle
        self.pickle_args = (getattr(pkl, "PROTOCOL", None), getattr(pkl, "THRESHOLD", None))
        # mpi4py's default pickler is pickle.dumps(obj, PROTOCOL) / pickle.loads: the counting pair does the
        # same. A pickler the user configured already (dill, cloudpickle) is kept: pickled sends' bytes are
        # then unknown (receives count from the message status).
        self.counting = is_default_pickle(pkl) and set_pickle(pkl, counting_dumps, counting_loads,
                                                              *self.pickle_args)
        if not self.counting:
            session.warn_once("mpi:pickle", "mpi4py's pickler is not the default one: bytes of pickled sends "
                              "are not counted")
        mpi.Request = self.m.request_cls
        mpi.__stepscope_timed__ = True
        session.on_flush.append(self.m.on_flush)
        session.closers.append(self.m.at_exit)

    def time_world(self) -> None:
        """Put the timed COMM_WORLD in place (making it asks MPI, which must be initialised by then)."""
        world = self.comm_cls(self.orig_world)
        self.m.world = world
        self.mpi.COMM_WORLD = world
        self.restores.append(functools.partial(setattr, self.mpi, "COMM_WORLD", self.orig_world))

    def then_time_world(self, init: Callable[..., Any]) -> Callable[..., Any]:
        def init_then_time(*args: Any, **kwargs: Any) -> Any:
            out = init(*args, **kwargs)
            try:
                if self.m.world is None:
                    self.time_world()
            except Exception as e:
                self.session.warn_once("install:mpi", f"could not time mpi4py calls ({e})")
            return out

        functools.update_wrapper(init_then_time, init)
        return init_then_time

    def restore(self) -> None:
        for r in reversed(self.restores):
            r()
        self.mpi.Request = self.base_req
        if self.counting:
            set_pickle(self.mpi.pickle, pickle.dumps, pickle.loads, *self.pickle_args)
        self.mpi.__stepscope_timed__ = False


def install_mpi_hooks(session: Session, mpi: Any, undo: list[Callable[[], None]]) -> None:
    """Time mpi4py's calls (see the module's docstring); the restore callable goes to ``undo``."""
    if getattr(mpi, "__stepscope_timed__", False):
        return
    timing = MpiTiming(session, mpi)
    timing.install()
    undo.append(timing.restore)
