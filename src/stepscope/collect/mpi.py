"""MPI call timing through mpi4py, zero code: every call on ``MPI.COMM_WORLD`` (and on communicators made
from it) becomes one row of the rank's CommTable, the table torch.distributed timing fills (collect/comm.py),
so the transfer/sync split, POP metrics, stragglers and the communication matrix read MPI runs unchanged.

How (mpi4py's types are immutable C types, their methods cannot be replaced): right after ``mpi4py.MPI``
is imported, ``MPI.COMM_WORLD`` is replaced by an instance of a Python subclass of ``MPI.Intracomm`` that
holds the same MPI handle and overrides the communication methods; communicators made from it (``Dup``,
``Split``, ``Split_type``, ``Create``, ``Create_group``, ``Clone``) are of that class too. Non-blocking
calls return a subclass of ``MPI.Request`` (same handle, same buffer reference) that records the call when
its ``Wait``/``wait``/``Test``/``test`` or a class-level ``Waitall``/``waitall``/``Waitany``/... completes it;
``MPI.Request`` is replaced by that subclass (``isinstance`` against it stays true for every request).

Rows (docs/frameworks.md, MPI section): ``op`` is ``send``/``isend``/``recv``/``irecv`` for point-to-point
calls of either API (the names the matrix and split know), mpi4py's method name for collectives
(``Allreduce``, ``allreduce``, ``Bcast``, ``Iallreduce``, ...). ``bytes``: buffer API, the message size
(count x datatype size, else the buffer's nbytes; receives: the size of the message received, from its
status); pickle API, the bytes mpi4py pickled in the call (for a rank that only received: unpickled).
``peer``: the other rank (world rank), for receives from ``ANY_SOURCE`` the source in the status.
``tag``: the tag (receives: the message's tag). ``seq``: ``(communicator id << 32) | index`` as for
torch.distributed; the world is 0, a derived communicator ``(world rank of its rank 0 << 16) | creation
index`` (the same on all its members, different for the disjoint pieces of one ``Split``).

Nothing raises into the user's program: bookkeeping errors warn once and the call goes on untimed.
"""

from __future__ import annotations

import functools
import pickle
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from stepscope.collect.comm import CommRecorder
from stepscope.collect.session import Session

_perf = time.perf_counter_ns
_local = threading.local()
_NAN = float("nan")

# point-to-point: method -> (op, buffer position/name, peer position/name, tag position/name, status position)
_P2P: dict[str, tuple[str, tuple[int, str], tuple[int, str], tuple[int, str], int | None]] = {}
for _m in ("Send", "Ssend", "Bsend", "Rsend", "send", "ssend", "bsend"):
    _P2P[_m] = ("send", (0, "obj" if _m.islower() else "buf"), (1, "dest"), (2, "tag"), None)
for _m in ("Isend", "Issend", "Ibsend", "Irsend", "isend", "issend", "ibsend"):
    _P2P[_m] = ("isend", (0, "obj" if _m.islower() else "buf"), (1, "dest"), (2, "tag"), None)
_P2P["Recv"] = ("recv", (0, "buf"), (1, "source"), (2, "tag"), 3)
_P2P["recv"] = ("recv", (0, "buf"), (1, "source"), (2, "tag"), 3)
_P2P["Irecv"] = ("irecv", (0, "buf"), (1, "source"), (2, "tag"), None)
_P2P["irecv"] = ("irecv", (0, "buf"), (1, "source"), (2, "tag"), None)

# collectives: method -> payload (position, name) or None (barrier); IN_PLACE falls back to the recvbuf
_COLL: dict[str, tuple[int, str] | None] = {}
for _m in ("Barrier", "barrier", "Ibarrier"):
    _COLL[_m] = None
for _m in ("Bcast", "Ibcast"):
    _COLL[_m] = (0, "buf")
for _m in ("bcast",):
    _COLL[_m] = (0, "obj")
for _m in ("Scatter", "Scatterv", "Iscatter", "Iscatterv"):
    _COLL[_m] = (1, "recvbuf")
for _m in ("Gather", "Gatherv", "Igather", "Igatherv", "Allgather", "Allgatherv", "Iallgather", "Iallgatherv",
           "Alltoall", "Alltoallv", "Alltoallw", "Ialltoall", "Ialltoallv", "Ialltoallw", "Reduce", "Ireduce",
           "Allreduce", "Iallreduce", "Reduce_scatter", "Reduce_scatter_block", "Ireduce_scatter",
           "Ireduce_scatter_block", "Scan", "Iscan", "Exscan", "Iexscan"):
    _COLL[_m] = (0, "sendbuf")
for _m in ("gather", "scatter", "allgather", "alltoall", "reduce", "allreduce", "scan", "exscan"):
    _COLL[_m] = (0, "sendobj")
_ASYNC_COLL = frozenset(m for m in _COLL if m.startswith("I"))
_PROBES = ("Probe", "probe", "Mprobe", "mprobe")
"""Blocking probes wait for a message: their time is added to the step's comm phase, no row."""
_MAKERS = ("Dup", "Split", "Split_type", "Create", "Create_group", "Clone", "Dup_with_info")


def _arg(args: tuple[Any, ...], kwargs: dict[str, Any], pos: int, name: str, default: Any = None) -> Any:
    if name in kwargs:
        return kwargs[name]
    return args[pos] if len(args) > pos else default


class MpiRecorder:
    """Per-process state: the CommTable writer, communicator ids and the pickle byte counters."""

    def __init__(self, session: Session, mpi: Any) -> None:
        self.session = session
        self.mpi = mpi
        self.rec = CommRecorder(session)
        self.comms: dict[int, tuple[int, int, tuple[int, ...] | None]] = {}
        self.created = 0
        self.world: Any = None

    # -- communicators -----------------------------------------------------------------------------
    def comm_info(self, comm: Any) -> tuple[int, int, tuple[int, ...] | None]:
        """(communicator id, size, world rank of each member or None for the world itself)."""
        info = self.comms.get(_handle(comm))
        if info is None:
            info = self.register(comm)
        return info

    def register(self, comm: Any) -> tuple[int, int, tuple[int, ...] | None]:
        mpi = self.mpi
        size = comm.Get_size()
        if self.world is not None and comm.Compare(self.world) in (mpi.IDENT,):
            info: tuple[int, int, tuple[int, ...] | None] = (0, size, None)
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
        return info

    def world_rank(self, info: tuple[int, int, tuple[int, ...] | None], peer: int) -> int:
        ranks = info[2]
        if peer < 0 or ranks is None:
            return peer
        return ranks[peer] if peer < len(ranks) else -1

    def add(self, row: dict[str, Any], t0: int, t_end: int, blocked_ns: int) -> None:
        """Store one call; a receive from ANY_SOURCE is numbered among its sender's calls once it is known."""
        if row.get("seq") is None:
            gid = row.get("gid", 0)
            row["seq"] = self.rec.next_seq((gid, row["op"], row["peer"]), gid)
        self.rec.add(row, t0, t_end, blocked_ns)

    # -- bytes -------------------------------------------------------------------------------------
    def buf_bytes(self, spec: Any) -> float:
        """Message size of a buffer argument: [buf, count, type] / [buf, (count, disp), type] /
        [buf, counts, displs, type] / [buf, type] / buf."""
        mpi = self.mpi
        if spec is None or spec is mpi.IN_PLACE or spec is mpi.BOTTOM:
            return _NAN
        if isinstance(spec, (list, tuple)):
            if not spec:
                return _NAN
            rest = spec[1:]
            dtype = next((x for x in rest if isinstance(x, mpi.Datatype)), None)
            counts = [x for x in rest if not isinstance(x, mpi.Datatype)]
            if dtype is not None and counts:
                c = counts[0]
                if isinstance(c, int):
                    return float(c * dtype.Get_size())
                if isinstance(c, (list, tuple)) and c and all(isinstance(x, int) for x in c):
                    if len(counts) == 1 and len(c) == 2:  # [buf, (count, displ), type]
                        return float(c[0] * dtype.Get_size())
                    return float(sum(c) * dtype.Get_size())  # [buf, counts, displs, type]
            return _nbytes(spec[0])
        return _nbytes(spec)


def _handle(comm: Any) -> int:
    """The MPI handle as an int (mpi4py 4: ``handle``; 3.x: the Fortran handle)."""
    h = getattr(comm, "handle", None)
    return int(h) if h is not None else int(comm.py2f())


def _set_pickle(pkl: Any, dumps: Any, loads: Any, protocol: Any, threshold: Any) -> bool:
    """Configure mpi4py's pickler (4.x takes a threshold, 3.x does not). False when it cannot be done."""
    for extra in ((protocol, threshold), (protocol,)):
        try:
            pkl.__init__(dumps, loads, *extra)
            return True
        except TypeError:
            continue
    return False


def _nbytes(buf: Any) -> float:
    try:
        return float(memoryview(buf).nbytes)
    except TypeError:
        n = getattr(buf, "nbytes", None)
        return float(n) if isinstance(n, (int, float)) else _NAN


# -- pickle byte counting -------------------------------------------------------------------------------
def _counting_dumps(obj: Any, protocol: int | None = None) -> bytes:
    data = pickle.dumps(obj, protocol)
    _local.dumped = getattr(_local, "dumped", 0) + len(data)
    return data


def _counting_loads(buf: Any) -> Any:
    try:
        _local.loaded = getattr(_local, "loaded", 0) + memoryview(buf).nbytes
    except TypeError:
        pass
    return pickle.loads(buf)


def _is_default_pickle(pkl: Any) -> bool:
    """True when mpi4py pickles with the standard library (it does unless the user configured otherwise)."""
    try:
        probe = {"stepscope": 1}
        return bytes(pkl.dumps(probe)) == pickle.dumps(probe, pkl.PROTOCOL)
    except Exception:
        return False


def _pickled_bytes() -> float:
    dumped, loaded = getattr(_local, "dumped", 0), getattr(_local, "loaded", 0)
    _local.dumped = _local.loaded = 0
    if dumped or loaded:
        return float(dumped or loaded)
    return _NAN


# -- the subclasses -------------------------------------------------------------------------------------
class _Pending:
    """A non-blocking call waiting for completion."""

    __slots__ = ("blocked", "info", "recv", "row", "t0")

    def __init__(self, row: dict[str, Any], t0: int, blocked: int, recv: bool,
                 info: tuple[int, int, tuple[int, ...] | None]) -> None:
        self.row, self.t0, self.blocked, self.recv, self.info = row, t0, blocked, recv, info


def install_mpi_hooks(session: Session, mpi: Any, undo: list[Callable[[], None]]) -> None:
    """Replace ``MPI.COMM_WORLD`` and ``MPI.Request`` by timing subclasses; restore callables go to ``undo``."""
    if getattr(mpi, "__stepscope_timed__", False):
        return
    m = MpiRecorder(session, mpi)
    version = str(getattr(sys.modules.get("mpi4py"), "__version__", "?"))
    if version.split(".")[0] not in ("3", "4"):
        session.warn_once("mpi:version", f"mpi4py {version} is not a version stepscope knows (3.x, 4.x); "
                          "its calls are timed where they can be")
    base_comm, base_req = mpi.Intracomm, mpi.Request
    status_cls = mpi.Status

    def finish(req: Any, status: Any, blocked: int, t_end: int) -> None:
        p: _Pending | None = getattr(req, "_ss_pending", None)
        if p is None:
            return
        req._ss_pending = None
        row = p.row
        if p.recv and status is not None:
            src, tag = status.Get_source(), status.Get_tag()
            if src >= 0:
                row["peer"] = m.world_rank(p.info, src)
            if tag >= 0:
                row["tag"] = tag
            n = status.Get_count(mpi.BYTE)
            if n >= 0 and n != mpi.UNDEFINED:
                row["bytes"] = float(n)
        m.add(row, p.t0, t_end, p.blocked + blocked)

    def finish_done(requests: Sequence[Any], statuses: Any, blocked: int) -> None:
        t_end = _perf()
        try:
            for i, r in enumerate(requests):
                if getattr(r, "_ss_pending", None) is not None and not r:
                    st = statuses[i] if isinstance(statuses, list) and i < len(statuses) else None
                    finish(r, st, blocked, t_end)
                    blocked = 0  # the blocked time goes to the step once
        except Exception as e:
            session.warn_once("mpi:wait", f"could not time an MPI request ({e})")

    class _Meta(type):
        def __instancecheck__(cls, obj: Any) -> bool:
            return isinstance(obj, base_req)

        def __subclasscheck__(cls, sub: Any) -> bool:
            return issubclass(sub, base_req)

    class Request(base_req, metaclass=_Meta):  # type: ignore[misc, valid-type]
        """mpi4py's Request, recording stepscope's pending MPI calls when they complete."""

        __slots__ = ("_ss_pending",)

        def _ss_one(self, method: Callable[..., Any], status: Any, *args: Any) -> Any:
            p = getattr(self, "_ss_pending", None)
            if p is None:
                return method(self, status, *args)
            st = status if status is not None or not p.recv else status_cls()
            t0 = _perf()
            out = method(self, st, *args)
            t1 = _perf()
            if not self:
                try:
                    finish(self, st, t1 - t0, t1)
                except Exception as e:
                    session.warn_once("mpi:wait", f"could not time an MPI request ({e})")
            return out

        def Wait(self, status: Any = None) -> Any:
            return self._ss_one(base_req.Wait, status)

        def wait(self, status: Any = None) -> Any:
            return self._ss_one(base_req.wait, status)

        def Test(self, status: Any = None) -> Any:
            return self._ss_one(base_req.Test, status)

        def test(self, status: Any = None) -> Any:
            return self._ss_one(base_req.test, status)

        @classmethod
        def _ss_many(cls, method: Callable[..., Any], requests: Any, statuses: Any) -> Any:
            reqs = requests if isinstance(requests, list) else list(requests)
            if not any(getattr(r, "_ss_pending", None) is not None for r in reqs):
                return method(reqs, statuses)
            sts = [status_cls() for _ in reqs] if statuses is None else statuses
            t0 = _perf()
            out = method(reqs, sts)
            finish_done(reqs, sts, _perf() - t0)
            return out

        @classmethod
        def Waitall(cls, requests: Any, statuses: Any = None) -> Any:
            return cls._ss_many(base_req.Waitall, requests, statuses)

        @classmethod
        def waitall(cls, requests: Any, statuses: Any = None) -> Any:
            return cls._ss_many(base_req.waitall, requests, statuses)

        @classmethod
        def Testall(cls, requests: Any, statuses: Any = None) -> Any:
            return cls._ss_many(base_req.Testall, requests, statuses)

        @classmethod
        def testall(cls, requests: Any, statuses: Any = None) -> Any:
            return cls._ss_many(base_req.testall, requests, statuses)

        @classmethod
        def Waitsome(cls, requests: Any, statuses: Any = None) -> Any:
            return cls._ss_many(base_req.Waitsome, requests, statuses)

        @classmethod
        def waitsome(cls, requests: Any, statuses: Any = None) -> Any:
            return cls._ss_many(base_req.waitsome, requests, statuses)

        @classmethod
        def _ss_any(cls, method: Callable[..., Any], requests: Any, status: Any) -> Any:
            reqs = requests if isinstance(requests, list) else list(requests)
            if not any(getattr(r, "_ss_pending", None) is not None for r in reqs):
                return method(reqs, status)
            st = status_cls() if status is None else status
            t0 = _perf()
            out = method(reqs, st)
            t1 = _perf()
            try:
                idx = out[0] if isinstance(out, tuple) else out
                if isinstance(idx, int) and 0 <= idx < len(reqs) and not reqs[idx]:
                    finish(reqs[idx], st, t1 - t0, t1)
            except Exception as e:
                session.warn_once("mpi:wait", f"could not time an MPI request ({e})")
            return out

        @classmethod
        def Waitany(cls, requests: Any, status: Any = None) -> Any:
            return cls._ss_any(base_req.Waitany, requests, status)

        @classmethod
        def waitany(cls, requests: Any, status: Any = None) -> Any:
            return cls._ss_any(base_req.waitany, requests, status)

        @classmethod
        def Testany(cls, requests: Any, status: Any = None) -> Any:
            return cls._ss_any(base_req.Testany, requests, status)

        @classmethod
        def testany(cls, requests: Any, status: Any = None) -> Any:
            return cls._ss_any(base_req.testany, requests, status)

    Request.__module__ = "mpi4py.MPI"
    Request.__qualname__ = Request.__name__ = "Request"

    def prepare(comm: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[dict[str, Any], Any]:
        info = m.comm_info(comm)
        gid, size = info[0], info[1]
        step = session.step_index
        p2p = _P2P.get(name)
        if p2p is not None:
            op, (bpos, bname), (ppos, pname), (tpos, tname), _ = p2p
            peer = _arg(args, kwargs, ppos, pname, mpi.ANY_SOURCE)
            tag = _arg(args, kwargs, tpos, tname, 0 if op in ("send", "isend") else mpi.ANY_TAG)
            peer = m.world_rank(info, int(peer)) if isinstance(peer, int) and peer >= 0 else -1
            nbytes = _NAN if name.islower() else m.buf_bytes(_arg(args, kwargs, bpos, bname))
            row = {"op": op, "step": step, "bytes": nbytes, "peer": peer, "group_size": size,
                   "tag": int(tag) if isinstance(tag, int) and tag >= 0 else -1, "gid": gid,
                   "seq": m.rec.next_seq((gid, op, peer), gid) if peer >= 0 else None}
            return row, info
        payload = _COLL[name]
        nbytes = 0.0 if payload is None else _NAN
        if payload is not None and not name.islower():
            nbytes = m.buf_bytes(_arg(args, kwargs, payload[0], payload[1]))
            if nbytes != nbytes and payload[1] == "sendbuf":  # IN_PLACE: the receive buffer holds the data
                nbytes = m.buf_bytes(_arg(args, kwargs, 1, "recvbuf"))
        row = {"op": name, "step": step, "bytes": nbytes, "peer": -1, "group_size": size, "tag": -1,
               "seq": m.rec.next_seq((gid, "collective"), gid)}
        return row, info

    def timed(name: str, orig: Callable[..., Any]) -> Callable[..., Any]:
        p2p = _P2P.get(name)
        is_recv = p2p is not None and p2p[0] in ("recv", "irecv")
        status_pos = p2p[4] if p2p is not None else None
        is_async = (p2p is not None and p2p[0] in ("isend", "irecv")) or name in _ASYNC_COLL
        pickled = name.islower()

        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            if getattr(_local, "depth", 0):
                return orig(self, *args, **kwargs)
            row = info = None
            try:
                row, info = prepare(self, name, args, kwargs)
            except Exception as e:
                session.warn_once(f"mpi:{name}", f"could not time MPI {name} ({e})")
            st = None
            if row is not None and status_pos is not None and _arg(args, kwargs, status_pos, "status") is None:
                st = status_cls()
                kwargs = {**kwargs, "status": st}
                if len(args) > status_pos:
                    args = args[:status_pos]
            if pickled:
                _local.dumped = _local.loaded = 0
            _local.depth = 1
            t0 = _perf()
            try:
                out = orig(self, *args, **kwargs)
            finally:
                _local.depth = 0
            t1 = _perf()
            if row is None or info is None:
                return out
            try:
                if pickled:
                    counted = _pickled_bytes()
                    if counted == counted:
                        row["bytes"] = counted
                if is_async:
                    if isinstance(out, base_req):
                        req = Request(out)
                        req._ss_pending = _Pending(row, t0, t1 - t0, is_recv, info)
                        return req
                    return out
                if is_recv:
                    status = st if st is not None else _arg(args, kwargs, status_pos or 0, "status")
                    src, tag = status.Get_source(), status.Get_tag()
                    if src >= 0:
                        row["peer"] = m.world_rank(info, src)
                    if tag >= 0:
                        row["tag"] = tag
                    n = status.Get_count(mpi.BYTE)
                    if n >= 0 and n != mpi.UNDEFINED:
                        row["bytes"] = float(n)
                m.add(row, t0, t1, t1 - t0)
            except Exception as e:
                session.warn_once(f"mpi:{name}", f"could not time MPI {name} ({e})")
            return out

        functools.update_wrapper(method, orig)
        return method

    def sendrecv(name: str, orig: Callable[..., Any]) -> Callable[..., Any]:
        """Sendrecv / sendrecv / Sendrecv_replace: a send row and a recv row, each with half the time."""
        replace = name == "Sendrecv_replace"

        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            if getattr(_local, "depth", 0):
                return orig(self, *args, **kwargs)
            # Sendrecv(sendbuf, dest, sendtag=0, recvbuf=None, source=ANY_SOURCE, recvtag=ANY_TAG, status=None)
            # Sendrecv_replace(buf, dest, sendtag=0, source=ANY_SOURCE, recvtag=ANY_TAG, status=None)
            spos = 5 if replace else 6
            st = _arg(args, kwargs, spos, "status")
            if st is None:
                st = status_cls()
                kwargs = {**kwargs, "status": st}
                args = args[:spos]
            _local.dumped = _local.loaded = 0
            _local.depth = 1
            t0 = _perf()
            try:
                out = orig(self, *args, **kwargs)
            finally:
                _local.depth = 0
            t1 = _perf()
            try:
                dumped, loaded = getattr(_local, "dumped", 0), getattr(_local, "loaded", 0)
                _local.dumped = _local.loaded = 0
                info = m.comm_info(self)
                gid, size = info[0], info[1]
                dest = m.world_rank(info, int(_arg(args, kwargs, 1, "dest")))
                stag = int(_arg(args, kwargs, 2, "sendtag", 0))
                sbytes = float(dumped) if name.islower() else m.buf_bytes(_arg(args, kwargs, 0, "buf" if replace
                                                                                else "sendbuf"))
                rbytes = float(st.Get_count(mpi.BYTE)) if not name.islower() else float(loaded)
                half = (t1 - t0) // 2
                step = session.step_index
                m.rec.add({"op": "send", "step": step, "bytes": sbytes, "peer": dest, "group_size": size,
                           "tag": stag, "seq": m.rec.next_seq((gid, "send", dest), gid)}, t0, t0 + half, half)
                src = m.world_rank(info, st.Get_source())
                m.rec.add({"op": "recv", "step": step, "bytes": rbytes, "peer": src, "group_size": size,
                           "tag": st.Get_tag(), "seq": m.rec.next_seq((gid, "recv", src), gid)},
                          t0 + half, t1, t1 - t0 - half)
            except Exception as e:
                session.warn_once(f"mpi:{name}", f"could not time MPI {name} ({e})")
            return out

        functools.update_wrapper(method, orig)
        return method

    def probe(orig: Callable[..., Any]) -> Callable[..., Any]:
        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            if getattr(_local, "depth", 0):
                return orig(self, *args, **kwargs)
            t0 = _perf()
            out = orig(self, *args, **kwargs)
            if session.active or session.activate():
                session.step.comm += _perf() - t0
            return out

        functools.update_wrapper(method, orig)
        return method

    def maker(orig: Callable[..., Any]) -> Callable[..., Any]:
        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            out = orig(self, *args, **kwargs)
            try:
                if isinstance(out, base_comm) and type(out) in (base_comm, TimedIntracomm) and out:
                    if type(out) is base_comm:
                        out = TimedIntracomm(out)
                    m.register(out)
            except Exception as e:
                session.warn_once("mpi:comm", f"could not time a new MPI communicator ({e})")
            return out

        functools.update_wrapper(method, orig)
        return method

    ns: dict[str, Any] = {"__slots__": (), "__module__": "mpi4py.MPI", "__qualname__": "Intracomm"}
    for name in (*_P2P, *_COLL):
        orig = getattr(base_comm, name, None)
        if orig is not None:
            ns[name] = timed(name, orig)
    for name in ("Sendrecv", "sendrecv", "Sendrecv_replace"):
        orig = getattr(base_comm, name, None)
        if orig is not None:
            ns[name] = sendrecv(name, orig)
    for name in _PROBES:
        orig = getattr(base_comm, name, None)
        if orig is not None:
            ns[name] = probe(orig)
    for name in _MAKERS:
        orig = getattr(base_comm, name, None)
        if orig is not None:
            ns[name] = maker(orig)
    TimedIntracomm = type("Intracomm", (base_comm,), ns)

    orig_world = mpi.COMM_WORLD
    restores: list[Callable[[], None]] = []

    def time_world() -> None:
        """Put the timed COMM_WORLD in place (making it asks MPI, which must be initialised by then)."""
        world = TimedIntracomm(orig_world)
        m.world = world
        mpi.COMM_WORLD = world
        restores.append(functools.partial(setattr, mpi, "COMM_WORLD", orig_world))

    if mpi.Is_initialized():
        time_world()
    else:  # mpi4py.rc.initialize = False: the user calls MPI.Init / Init_thread later
        for fname in ("Init", "Init_thread"):
            init = getattr(mpi, fname, None)
            if init is None:
                continue

            def init_then_time(*args: Any, _init: Callable[..., Any] = init, **kwargs: Any) -> Any:
                out = _init(*args, **kwargs)
                try:
                    if m.world is None:
                        time_world()
                except Exception as e:
                    session.warn_once("install:mpi", f"could not time mpi4py calls ({e})")
                return out

            functools.update_wrapper(init_then_time, init)
            setattr(mpi, fname, init_then_time)
            restores.append(functools.partial(setattr, mpi, fname, init))
    pkl = mpi.pickle
    proto, threshold = getattr(pkl, "PROTOCOL", None), getattr(pkl, "THRESHOLD", None)
    # mpi4py's default pickler is pickle.dumps(obj, PROTOCOL) / pickle.loads: the counting pair does the same.
    # A pickler the user configured already (dill, cloudpickle) is kept: pickled bytes are then counted on
    # the receiving side only (from the message status).
    counting = _is_default_pickle(pkl) and _set_pickle(pkl, _counting_dumps, _counting_loads, proto, threshold)
    if not counting:
        session.warn_once("mpi:pickle", "mpi4py's pickler is not the default one: bytes of pickled sends "
                          "are not counted")
    mpi.Request = Request
    mpi.__stepscope_timed__ = True

    def restore() -> None:
        for r in reversed(restores):
            r()
        mpi.Request = base_req
        if counting:
            _set_pickle(pkl, pickle.dumps, pickle.loads, proto, threshold)
        mpi.__stepscope_timed__ = False

    undo.append(restore)
