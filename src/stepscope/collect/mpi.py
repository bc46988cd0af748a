"""MPI call timing through mpi4py, zero code: every call on ``MPI.COMM_WORLD`` (and on communicators made
from it) is counted, and timed calls become rows of the rank's CommTable, the table torch.distributed timing
fills (collect/comm.py), so the transfer/sync split, POP metrics, stragglers and the communication matrix
read MPI runs unchanged. Which calls are timed: collect/mpi_sample.py (all of them up to a budget per flush
interval, then a sample); what each method's row holds: collect/mpi_calls.py and docs/frameworks.md.

How (mpi4py's types are immutable C types, their methods cannot be replaced): right after ``mpi4py.MPI``
is imported, ``MPI.COMM_WORLD`` is replaced by an instance of a Python subclass of ``MPI.Intracomm`` that
holds the same MPI handle and overrides the communication methods; communicators made from it (``Dup``,
``Split``, ...) are of that class too. Non-blocking calls that are timed return a subclass of
``MPI.Request`` (same handle, same buffer reference) that records the call when its ``Wait``/``Test`` or a
class-level ``Waitall``/``Waitany``/... completes it; ``MPI.Request`` is replaced by that subclass
(``isinstance`` against it stays true for every request).

Each overridden method is one :class:`Site` (one class per behaviour: send, receive, non-blocking,
collective, send-receive, probe, communicator maker). Its wrapper's untimed path does only what the exact
counts need (a countdown, the call, two additions); the timed path builds the row.

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

from stepscope.collect.mpi_calls import (
    CALLS,
    MAKERS,
    NAN,
    PROBES,
    SENDRECV,
    Call,
    arg,
    buf_bytes,
    counting_dumps,
    counting_loads,
    is_default_pickle,
    payload_bytes,
    pickled_bytes,
    reset_pickled,
    set_pickle,
    thread_local,
    thread_status,
)
from stepscope.collect.mpi_requests import request_class
from stepscope.collect.mpi_sample import Budget, Counts
from stepscope.collect.session import Session

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
        self.request_cls: type[Any] = mpi.Request
        """The timed ``MPI.Request`` subclass (collect/mpi_requests.py), set by MpiTiming."""
        self.comm_cls: type[Any] = mpi.Intracomm
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
        self.budget.refill()

    def at_exit(self) -> None:
        self.drain_rows()
        self.record_counts()


def _handle(comm: Any) -> int:
    """The MPI handle as an int (mpi4py 4: ``handle``; 3.x: the Fortran handle)."""
    h = getattr(comm, "handle", None)
    return int(h) if h is not None else int(comm.py2f())


# -- sites: one per overridden method, one class per behaviour ------------------------------------------
class Site:
    """One mpi4py method: ``wrap()`` gives the override. Untimed calls (``gap`` > 0) are counted only;
    the others go through ``timed``."""

    def __init__(self, m: MpiRecorder, name: str, orig: Callable[..., Any]) -> None:
        self.m = m
        self.name = name
        self.orig = orig
        self.call: Call | None = CALLS.get(name)
        self.counts = m.counts.setdefault(name, Counts())
        self.gap = 0

    def wrap(self) -> Callable[..., Any]:
        site, orig, counts, mpi = self, self.orig, self.counts, self.m.mpi
        call = self.call
        assert call is not None

        def method(comm: Any, *args: Any, **kwargs: Any) -> Any:
            if site.gap:
                site.gap -= 1
                out = orig(comm, *args, **kwargs)
                counts.calls += 1
                counts.add_bytes(payload_bytes(mpi, call, args, kwargs))
                return out
            return site.timed(comm, args, kwargs)

        return self.named(method)

    def named(self, method: Callable[..., Any]) -> Callable[..., Any]:
        functools.update_wrapper(method, self.orig)
        return method

    def warn(self, e: Exception) -> None:
        self.m.session.warn_once(f"mpi:{self.name}", f"could not time MPI {self.name} ({e})")

    def timed(self, comm: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The call with its row (a blocking point-to-point call; subclasses for the others)."""
        m, call = self.m, self.call
        assert call is not None
        weight = m.budget.take()
        self.gap = m.budget.gap()
        row = info = None
        try:
            info = m.comm_info(comm)
            row = self.p2p_row(call, info, args, kwargs)
        except Exception as e:
            self.warn(e)
        if call.pickled:
            reset_pickled()
        t0 = _perf()
        out = self.orig(comm, *args, **kwargs)
        t1 = _perf()
        self.counts.calls += 1
        if row is None or info is None:
            self.counts.add_bytes(NAN)
            return out
        try:
            if call.pickled:
                counted = pickled_bytes()
                if counted == counted:
                    row["bytes"] = counted
            self.finish_row(row, info, args, kwargs)
            self.counts.add_bytes(row["bytes"])
            m.add(self.counts, row, t0, t1, t1 - t0, weight)
        except Exception as e:
            self.warn(e)
        return out

    def finish_row(self, row: dict[str, Any], info: CommInfo, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """What only the completed call tells (receives: the message's status)."""

    def p2p_row(self, call: Call, info: CommInfo, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        m, mpi = self.m, self.m.mpi
        gid, size = info[0], info[1]
        send = call.kind in ("send", "isend")
        assert call.peer is not None and call.tag is not None
        peer = arg(args, kwargs, call.peer, mpi.ANY_SOURCE)
        tag = arg(args, kwargs, call.tag, 0 if send else mpi.ANY_TAG)
        peer = m.world_rank(info, int(peer)) if isinstance(peer, int) and peer >= 0 else -1
        nbytes = NAN if call.pickled else payload_bytes(mpi, call, args, kwargs)
        return {"op": call.op, "step": m.session.step_index, "bytes": nbytes, "peer": peer, "group_size": size,
                "tag": int(tag) if isinstance(tag, int) and tag >= 0 else -1, "gid": gid,
                "seq": m.next_seq((gid, call.op, peer), gid) if peer >= 0 else None}


class SendSite(Site):
    """Blocking sends (buffer and pickle API, all ``(buf, dest, tag=0)``): bytes from the buffer, or the bytes
    pickled. The untimed path is written out (no helper calls): it runs on every call past the budget."""

    def wrap(self) -> Callable[..., Any]:
        site, orig, counts, mpi = self, self.orig, self.counts, self.m.mpi
        if self.name.islower():
            def pickled(comm: Any, obj: Any, dest: int, tag: int = 0) -> Any:
                if site.gap:
                    site.gap -= 1
                    reset_pickled()
                    out = orig(comm, obj, dest, tag)
                    counts.calls += 1
                    counts.add_bytes(pickled_bytes())
                    return out
                return site.timed(comm, (obj, dest, tag), {})

            return self.named(pickled)

        def method(comm: Any, buf: Any, dest: int, tag: int = 0) -> Any:
            if site.gap:
                site.gap -= 1
                out = orig(comm, buf, dest, tag)
                counts.calls += 1
                try:
                    counts.bytes += buf.nbytes  # a NumPy array or memoryview: its size is the message's
                except Exception:  # a buffer spec list, bytes, an nbytes that is no number
                    counts.add_bytes(buf_bytes(mpi, buf))
                return out
            return site.timed(comm, (buf, dest, tag), {})

        return self.named(method)


class RecvSite(Site):
    """Blocking receives: the peer, tag and bytes of the message received, from its status (the user's, or
    the thread's own reusable one)."""

    def wrap(self) -> Callable[..., Any]:
        site, orig, counts, mpi = self, self.orig, self.counts, self.m.mpi
        status_cls, byte, tls = mpi.Status, mpi.BYTE, thread_local

        def method(comm: Any, buf: Any = None, source: int = mpi.ANY_SOURCE, tag: int = mpi.ANY_TAG,
                   status: Any = None) -> Any:
            if site.gap:
                site.gap -= 1
                if status is None:
                    try:
                        status = tls.status
                    except AttributeError:
                        status = thread_status(status_cls)
                out = orig(comm, buf, source, tag, status)
                counts.calls += 1
                counts.bytes += status.Get_count(byte)
                return out
            return site.timed(comm, (buf, source, tag, status), {})

        return self.named(method)

    def timed(self, comm: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if args[3] is None:
            args = (*args[:3], self.m.mpi.Status())
        return super().timed(comm, args, kwargs)

    def finish_row(self, row: dict[str, Any], info: CommInfo, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.m.status_row(row, info, args[3])


class CollectiveSite(Site):
    """Blocking collectives: numbered per communicator (``comm._ss_n``); past the budget a hash of that number
    decides, alike on every rank, which are timed."""

    def wrap(self) -> Callable[..., Any]:
        site, orig, counts, mpi, budget = self, self.orig, self.counts, self.m.mpi, self.m.budget
        call = self.call
        assert call is not None
        pickled = call.pickled

        def method(comm: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                n = comm._ss_n
            except AttributeError:  # made by an mpi4py method that is no maker here (Idup): numbered from now
                n = 0
            comm._ss_n = n + 1
            if budget.collective_untimed(n):
                if pickled:
                    reset_pickled()
                    out = orig(comm, *args, **kwargs)
                    counts.add_bytes(pickled_bytes())
                else:
                    out = orig(comm, *args, **kwargs)
                    counts.add_bytes(payload_bytes(mpi, call, args, kwargs))
                counts.calls += 1
                return out
            return site.timed_collective(comm, n, args, kwargs)

        return self.named(method)

    def row(self, comm: Any, n: int, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        call, m = self.call, self.m
        assert call is not None
        gid, size, _ = m.comm_info(comm)
        nbytes = NAN if call.pickled else payload_bytes(m.mpi, call, args, kwargs)
        return {"op": call.op, "step": m.session.step_index, "bytes": nbytes, "peer": -1, "group_size": size,
                "tag": -1, "seq": (gid << 32) | n}

    def timed_collective(self, comm: Any, n: int, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        m, call = self.m, self.call
        assert call is not None
        weight = m.budget.take()
        row = None
        try:
            row = self.row(comm, n, args, kwargs)
        except Exception as e:
            self.warn(e)
        if call.pickled:
            reset_pickled()
        t0 = _perf()
        out = self.orig(comm, *args, **kwargs)
        t1 = _perf()
        self.counts.calls += 1
        if row is None:
            self.counts.add_bytes(NAN)
            return out
        try:
            if call.pickled:
                row["bytes"] = pickled_bytes()
            self.counts.add_bytes(row["bytes"])
            m.add(self.counts, row, t0, t1, t1 - t0, weight)
        except Exception as e:
            self.warn(e)
        return out


class AsyncSite(CollectiveSite):
    """Non-blocking calls: a timed one returns a request that records the call when it completes; an
    untimed one is counted (an untimed ``Irecv``'s bytes are unknown: its message is never looked at)."""

    def wrap(self) -> Callable[..., Any]:
        call = self.call
        assert call is not None
        if call.kind == "icollective":
            return super().wrap()
        site, orig, counts, mpi = self, self.orig, self.counts, self.m.mpi
        pickled, recv = call.pickled, call.is_recv

        def method(comm: Any, *args: Any, **kwargs: Any) -> Any:
            if site.gap:
                site.gap -= 1
                if pickled and not recv:
                    reset_pickled()
                    out = orig(comm, *args, **kwargs)
                    counts.add_bytes(pickled_bytes())
                else:
                    out = orig(comm, *args, **kwargs)
                    counts.add_bytes(NAN if recv else payload_bytes(mpi, call, args, kwargs))
                counts.calls += 1
                return out
            return site.timed_async(comm, None, args, kwargs)

        return self.named(method)

    def timed_collective(self, comm: Any, n: int, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return self.timed_async(comm, n, args, kwargs)

    def timed_async(self, comm: Any, n: int | None, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        m, call = self.m, self.call
        assert call is not None
        weight = m.budget.take()
        if n is None:
            self.gap = m.budget.gap()
        row = info = None
        try:
            info = m.comm_info(comm)
            row = self.p2p_row(call, info, args, kwargs) if n is None else self.row(comm, n, args, kwargs)
        except Exception as e:
            self.warn(e)
        if call.pickled:
            reset_pickled()
        t0 = _perf()
        out = self.orig(comm, *args, **kwargs)
        t1 = _perf()
        self.counts.calls += 1
        if row is None or info is None or not isinstance(out, m.mpi.Request):
            self.counts.add_bytes(NAN)
            return out
        try:
            if call.pickled:
                counted = pickled_bytes()
                if counted == counted:
                    row["bytes"] = counted
            if not call.is_recv:  # a receive's bytes are counted when it completes
                self.counts.add_bytes(row["bytes"])
            req = m.request_cls(out)
            req._ss_pending = Pending(self.counts, row, t0, t1 - t0, call.is_recv, info, weight)
            return req
        except Exception as e:
            self.warn(e)
        return out


class SendrecvSite(Site):
    """``Sendrecv`` / ``sendrecv`` / ``Sendrecv_replace``: a send row and a recv row, each with half the time;
    counted once, with the bytes sent plus received."""

    def wrap(self) -> Callable[..., Any]:
        site, orig, counts, status_cls = self, self.orig, self.counts, self.m.mpi.Status
        spos = 5 if self.name == "Sendrecv_replace" else 6

        def method(comm: Any, *args: Any, **kwargs: Any) -> Any:
            if site.gap:
                site.gap -= 1
                args, kwargs, st = _with_status(args, kwargs, spos, thread_status(status_cls))
                reset_pickled()
                out = orig(comm, *args, **kwargs)
                counts.calls += 1
                sent, got = site.sizes(args, kwargs, st)
                counts.add_bytes(sent + got)
                return out
            return site.timed(comm, args, kwargs)

        return self.named(method)

    def sizes(self, args: tuple[Any, ...], kwargs: dict[str, Any], st: Any) -> tuple[float, float]:
        """(bytes sent, bytes received) of a completed call; pickle API: sent from the pickler."""
        mpi = self.m.mpi
        got = float(st.Get_count(mpi.BYTE))
        if self.name.islower():
            return pickled_bytes(), got
        reset_pickled()
        return buf_bytes(mpi, arg(args, kwargs, (0, "buf" if self.name == "Sendrecv_replace" else "sendbuf"))), got

    def timed(self, comm: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        m = self.m
        weight = m.budget.take()
        self.gap = m.budget.gap()
        # Sendrecv(sendbuf, dest, sendtag=0, recvbuf=None, source=ANY_SOURCE, recvtag=ANY_TAG, status=None)
        # Sendrecv_replace(buf, dest, sendtag=0, source=ANY_SOURCE, recvtag=ANY_TAG, status=None)
        args, kwargs, st = _with_status(args, kwargs, 5 if self.name == "Sendrecv_replace" else 6, m.mpi.Status())
        reset_pickled()
        t0 = _perf()
        out = self.orig(comm, *args, **kwargs)
        t1 = _perf()
        self.counts.calls += 1
        try:
            sent, got = self.sizes(args, kwargs, st)
            self.counts.add_bytes(sent + got)
            info = m.comm_info(comm)
            gid, size = info[0], info[1]
            dest = m.world_rank(info, int(arg(args, kwargs, (1, "dest"))))
            stag = int(arg(args, kwargs, (2, "sendtag"), 0))
            half = (t1 - t0) // 2
            step = m.session.step_index
            m.add(self.counts, {"op": "send", "step": step, "bytes": sent, "peer": dest, "group_size": size,
                                "tag": stag, "seq": m.next_seq((gid, "send", dest), gid)}, t0, t0 + half, half,
                  weight)
            src = m.world_rank(info, st.Get_source())
            m.add(self.counts, {"op": "recv", "step": step, "bytes": got, "peer": src, "group_size": size,
                                "tag": st.Get_tag(), "seq": m.next_seq((gid, "recv", src), gid)},
                  t0 + half, t1, t1 - t0 - half, weight)
            self.counts.timed -= 1  # one call, two rows
        except Exception as e:
            self.warn(e)
        return out


def _with_status(args: tuple[Any, ...], kwargs: dict[str, Any], pos: int,
                 mine: Any) -> tuple[tuple[Any, ...], dict[str, Any], Any]:
    """The call's arguments with a status at ``pos`` (the user's when given, else ``mine``)."""
    st = arg(args, kwargs, (pos, "status"))
    if st is not None:
        return args, kwargs, st
    return args[:pos], {**kwargs, "status": mine}, mine


class ProbeSite(Site):
    """Blocking probes: the time waited is added to the step's comm phase; no row."""

    def wrap(self) -> Callable[..., Any]:
        orig, session = self.orig, self.m.session

        def method(comm: Any, *args: Any, **kwargs: Any) -> Any:
            t0 = _perf()
            out = orig(comm, *args, **kwargs)
            if session.active or session.activate():
                session.step.comm += _perf() - t0
            return out

        return self.named(method)


class MakerSite(Site):
    """``Dup``, ``Split``, ...: the new communicator is of the timed class and registered."""

    def wrap(self) -> Callable[..., Any]:
        orig, m = self.orig, self.m

        def method(comm: Any, *args: Any, **kwargs: Any) -> Any:
            out = orig(comm, *args, **kwargs)
            try:
                out = m.adopt(out)
            except Exception as e:
                m.session.warn_once("mpi:comm", f"could not time a new MPI communicator ({e})")
            return out

        return self.named(method)


class Pending:
    """A timed non-blocking call waiting for completion."""

    __slots__ = ("blocked", "counts", "info", "recv", "row", "t0", "weight")

    def __init__(self, counts: Counts, row: dict[str, Any], t0: int, blocked: int, recv: bool, info: CommInfo,
                 weight: int) -> None:
        self.counts, self.row, self.t0, self.blocked, self.recv, self.info = counts, row, t0, blocked, recv, info
        self.weight = weight


_SITES: tuple[tuple[Callable[[str], bool], type[Site]], ...] = (
    (lambda n: n in CALLS and CALLS[n].is_async, AsyncSite),
    (lambda n: n in CALLS and CALLS[n].kind == "send", SendSite),
    (lambda n: n in CALLS and CALLS[n].kind == "recv", RecvSite),
    (lambda n: n in CALLS, CollectiveSite),
    (lambda n: n in SENDRECV, SendrecvSite),
    (lambda n: n in PROBES, ProbeSite),
    (lambda n: n in MAKERS, MakerSite),
)


def site_class(name: str) -> type[Site]:
    return next(cls for match, cls in _SITES if match(name))


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
