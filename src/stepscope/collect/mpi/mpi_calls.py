"""What each mpi4py method means to the CommTable (collect/mpi/mpi.py): its row ``op``, where its payload, peer,
tag and status are among its arguments, and how its bytes are counted. Data and small pure helpers only."""

from __future__ import annotations

import pickle
import threading
from dataclasses import dataclass, field
from typing import Any

NAN = float("nan")
_local = threading.local()
thread_local = _local
"""Per-thread state: pickled byte counts and the thread's reusable ``MPI.Status``."""


@dataclass(frozen=True, slots=True)
class Call:
    """One mpi4py method: ``kind`` is send / recv / isend / irecv / collective / icollective; ``payload``,
    ``peer``, ``tag``: (position, keyword) among the method's arguments (after ``self``), None where it has
    none; ``status``: the position of its ``status`` argument (blocking receives). The derived fields are
    plain slots (read on every timed call): ``op`` the row's op, the point-to-point names the matrix and the
    split know, else mpi4py's name; ``pickled`` the pickle API (lower-case names)."""

    name: str
    kind: str
    payload: tuple[int, str] | None
    peer: tuple[int, str] | None = None
    tag: tuple[int, str] | None = None
    status: int | None = None
    op: str = field(init=False)
    pickled: bool = field(init=False)
    is_async: bool = field(init=False)
    is_recv: bool = field(init=False)

    def __post_init__(self) -> None:
        derived = {"op": self.name if self.kind in ("collective", "icollective") else self.kind,
                   "pickled": self.name.islower(), "is_async": self.kind in ("isend", "irecv", "icollective"),
                   "is_recv": self.kind in ("recv", "irecv")}
        for k, v in derived.items():
            object.__setattr__(self, k, v)


def _calls() -> dict[str, Call]:
    out: dict[str, Call] = {}
    for m in ("Send", "Ssend", "Bsend", "Rsend", "send", "ssend", "bsend"):
        out[m] = Call(m, "send", (0, "obj" if m.islower() else "buf"), (1, "dest"), (2, "tag"))
    for m in ("Isend", "Issend", "Ibsend", "Irsend", "isend", "issend", "ibsend"):
        out[m] = Call(m, "isend", (0, "obj" if m.islower() else "buf"), (1, "dest"), (2, "tag"))
    for m in ("Recv", "recv"):
        out[m] = Call(m, "recv", (0, "buf"), (1, "source"), (2, "tag"), 3)
    for m in ("Irecv", "irecv"):
        out[m] = Call(m, "irecv", (0, "buf"), (1, "source"), (2, "tag"))
    # collectives: the payload counted (IN_PLACE falls back to the receive buffer); None: a barrier
    coll: dict[str, tuple[int, str] | None] = {"Barrier": None, "barrier": None, "Ibarrier": None,
                                               "Bcast": (0, "buf"), "Ibcast": (0, "buf"), "bcast": (0, "obj")}
    for m in ("Scatter", "Scatterv", "Iscatter", "Iscatterv"):
        coll[m] = (1, "recvbuf")
    for m in ("Gather", "Gatherv", "Igather", "Igatherv", "Allgather", "Allgatherv", "Iallgather", "Iallgatherv",
              "Alltoall", "Alltoallv", "Alltoallw", "Ialltoall", "Ialltoallv", "Ialltoallw", "Reduce", "Ireduce",
              "Allreduce", "Iallreduce", "Reduce_scatter", "Reduce_scatter_block", "Ireduce_scatter",
              "Ireduce_scatter_block", "Scan", "Iscan", "Exscan", "Iexscan"):
        coll[m] = (0, "sendbuf")
    for m in ("gather", "scatter", "allgather", "alltoall", "reduce", "allreduce", "scan", "exscan"):
        coll[m] = (0, "sendobj")
    for m, payload in coll.items():
        out[m] = Call(m, "icollective" if m.startswith("I") else "collective", payload)
    return out


CALLS = _calls()
SENDRECV = ("Sendrecv", "sendrecv", "Sendrecv_replace")
PROBES = ("Probe", "probe", "Mprobe", "mprobe")
"""Blocking probes wait for a message: their time is added to the step's comm phase, no row."""
MAKERS = ("Dup", "Split", "Split_type", "Create", "Create_group", "Clone", "Dup_with_info")


def arg(args: tuple[Any, ...], kwargs: dict[str, Any], where: tuple[int, str], default: Any = None) -> Any:
    """The argument at ``where`` = (position, keyword)."""
    pos, name = where
    if name in kwargs:
        return kwargs[name]
    return args[pos] if len(args) > pos else default


def nbytes(buf: Any) -> float:
    try:
        return float(memoryview(buf).nbytes)
    except TypeError:
        n = getattr(buf, "nbytes", None)
        return float(n) if isinstance(n, (int, float)) else NAN


def buf_bytes(mpi: Any, spec: Any) -> float:
    """Message size of a buffer argument: [buf, count, type] / [buf, (count, disp), type] /
    [buf, counts, displs, type] / [buf, type] / buf. NaN: unknown (IN_PLACE, BOTTOM, None, or a spec this
    cannot read: the untimed paths call it outside any guard, and the user's call must go on)."""
    try:
        return _buf_bytes(mpi, spec)
    except Exception:
        return NAN


def _buf_bytes(mpi: Any, spec: Any) -> float:
    if spec is None or spec is mpi.IN_PLACE or spec is mpi.BOTTOM:
        return NAN
    if isinstance(spec, (list, tuple)):
        if not spec:
            return NAN
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
        return nbytes(spec[0])
    return nbytes(spec)


def payload_bytes(mpi: Any, call: Call, args: tuple[Any, ...], kwargs: dict[str, Any]) -> float:
    """Bytes of a buffer-API call from its arguments (a barrier: 0; IN_PLACE: the receive buffer)."""
    if call.payload is None:
        return 0.0
    spec = arg(args, kwargs, call.payload)
    n = getattr(spec, "nbytes", None)  # a NumPy array, the common case: no list or datatype to look at
    if type(n) is int:
        return float(n)
    n = buf_bytes(mpi, spec)
    if n != n and call.payload[1] == "sendbuf":
        n = buf_bytes(mpi, arg(args, kwargs, (1, "recvbuf")))
    return n


# -- pickle byte counting ---------------------------------------------------------------------------------
def counting_dumps(obj: Any, protocol: int | None = None) -> bytes:
    data = pickle.dumps(obj, protocol)
    _local.dumped = getattr(_local, "dumped", 0) + len(data)
    return data


def counting_loads(buf: Any) -> Any:
    try:
        _local.loaded = getattr(_local, "loaded", 0) + memoryview(buf).nbytes
    except TypeError:
        pass
    return pickle.loads(buf)


def reset_pickled() -> None:
    _local.dumped = _local.loaded = 0


def pickled_bytes() -> float:
    """Bytes this thread pickled since ``reset_pickled`` (a rank that only unpickled: the bytes unpickled)."""
    dumped, loaded = getattr(_local, "dumped", 0), getattr(_local, "loaded", 0)
    _local.dumped = _local.loaded = 0
    if dumped or loaded:
        return float(dumped or loaded)
    return NAN


def is_default_pickle(pkl: Any) -> bool:
    """True when mpi4py pickles with the standard library (it does unless the user configured otherwise)."""
    try:
        probe = {"stepscope": 1}
        return bytes(pkl.dumps(probe)) == pickle.dumps(probe, pkl.PROTOCOL)
    except Exception:
        return False


def set_pickle(pkl: Any, dumps: Any, loads: Any, protocol: Any, threshold: Any) -> bool:
    """Configure mpi4py's pickler (4.x takes a threshold, 3.x does not). False when it cannot be done."""
    for extra in ((protocol, threshold), (protocol,)):
        try:
            pkl.__init__(dumps, loads, *extra)
            return True
        except TypeError:
            continue
    return False


def thread_status(status_cls: Any) -> Any:
    """This thread's own reusable ``MPI.Status`` (a receive the user gave no status still needs one to count
    the bytes received; reused, so the hot path allocates nothing, and per thread, as MPI writes it without
    the GIL)."""
    try:
        return _local.status
    except AttributeError:
        st = _local.status = status_cls()
        return st
