"""The overrides of collect/mpi/mpi.py's timed ``MPI.Intracomm``: one :class:`Site` per mpi4py method, one class
per behaviour (send, receive, non-blocking, collective, send-receive, probe, communicator maker). A site's
untimed path (past the row budget, collect/mpi/mpi_sample.py) only counts: a countdown, the call, two additions,
written out in each class; its timed path builds the CommTable row (collect/mpi/mpi_calls.py says what each
method's row holds)."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from stepscope.collect.mpi.mpi_calls import (
    CALLS,
    MAKERS,
    NAN,
    PROBES,
    SENDRECV,
    Call,
    arg,
    buf_bytes,
    payload_bytes,
    pickled_bytes,
    reset_pickled,
    thread_local,
    thread_status,
)
from stepscope.collect.mpi.mpi_sample import Counts

if TYPE_CHECKING:
    from stepscope.collect.mpi.mpi import CommInfo, MpiRecorder

_perf = time.perf_counter_ns


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
        """The override: each behaviour writes its untimed path out (it runs on every call past the budget)."""
        raise NotImplementedError

    def named(self, method: Callable[..., Any]) -> Callable[..., Any]:
        functools.update_wrapper(method, self.orig)
        return method

    def warn(self, e: Exception) -> None:
        self.m.session.warn_once(f"mpi:{self.name}", f"could not time MPI {self.name} ({e})")

    def timed(self, comm: Any, args: tuple[Any, ...], kwargs: dict[str, Any], n: int | None = None) -> Any:
        """The call with its row: a point-to-point call (``n`` None: the next untimed ``gap`` is drawn) or the
        ``n``-th collective of its communicator. How the row is completed is the site's (``record``)."""
        m, call = self.m, self.call
        assert call is not None
        weight = m.budget.take()
        if n is None:
            self.gap = m.budget.gap()
        row = info = None
        try:
            info = m.comm_info(comm)
            row = self.p2p_row(call, info, args, kwargs) if n is None else self.collective_row(info, n, args, kwargs)
        except Exception as e:
            self.warn(e)
        if call.pickled:
            reset_pickled()
        t0 = _perf()
        out = self.orig(comm, *args, **kwargs)
        t1 = _perf()
        self.counts.calls += 1
        if row is None or info is None or not self.completes(out):
            self.counts.add_bytes(NAN)
            return out
        try:
            if call.pickled:
                counted = pickled_bytes()
                if counted == counted:
                    row["bytes"] = counted
            return self.record(row, info, args, kwargs, out, t0, t1, weight)
        except Exception as e:
            self.warn(e)
        return out

    def completes(self, out: Any) -> bool:
        """Whether the call's return lets its row be recorded (a non-blocking call must return a request)."""
        return True

    def record(self, row: dict[str, Any], info: CommInfo, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any,
               t0: int, t1: int, weight: int) -> Any:
        """A blocking call's row, now that it returned: counted and added; returns what the call returned."""
        self.finish_row(row, info, args, kwargs)
        self.counts.add_bytes(row["bytes"])
        self.m.add(self.counts, row, t0, t1, t1 - t0, weight)
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


    def collective_row(self, info: CommInfo, n: int, args: tuple[Any, ...], kwargs: dict[str, Any]
                       ) -> dict[str, Any]:
        call, m = self.call, self.m
        assert call is not None
        gid, size = info[0], info[1]
        nbytes = NAN if call.pickled else payload_bytes(m.mpi, call, args, kwargs)
        return {"op": call.op, "step": m.session.step_index, "bytes": nbytes, "peer": -1, "group_size": size,
                "tag": -1, "seq": (gid << 32) | n}


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

    def timed(self, comm: Any, args: tuple[Any, ...], kwargs: dict[str, Any], n: int | None = None) -> Any:
        if args[3] is None:
            args = (*args[:3], self.m.mpi.Status())
        return super().timed(comm, args, kwargs, n)

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
            return site.timed(comm, args, kwargs, n)

        return self.named(method)

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
            return site.timed(comm, args, kwargs)

        return self.named(method)

    def completes(self, out: Any) -> bool:
        return isinstance(out, self.m.mpi.Request)

    def record(self, row: dict[str, Any], info: CommInfo, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any,
               t0: int, t1: int, weight: int) -> Any:
        """A request that records the call when it completes (a receive's bytes are counted then)."""
        call = self.call
        assert call is not None
        if not call.is_recv:
            self.counts.add_bytes(row["bytes"])
        req = self.m.request_cls(out)
        req._ss_pending = Pending(self.counts, row, t0, t1 - t0, call.is_recv, info, weight)
        return req


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

    def timed(self, comm: Any, args: tuple[Any, ...], kwargs: dict[str, Any], n: int | None = None) -> Any:
        m = self.m  # point-to-point only: n is always None
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
