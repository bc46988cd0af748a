"""Communication timing without a profiler window: every torch.distributed call made from Python, per rank.

What is recorded (one CommTable row per call; see docs/distributed.md):

* ``start_ns`` wall clock at the call; ``duration_ns`` CPU wall clock until the call returned, or, for
  ``async_op=True`` / ``isend`` / ``irecv`` / ``batch_isend_irecv``, until the returned work's ``wait()``
  returned (the work is wrapped in a thin proxy). The time *blocked* (in the call plus in ``wait()``) is
  added to the step's ``comm`` phase; in-flight time overlapped with other work is not.
* With CUDA (NCCL) a call returns once the collective is enqueued, so ``duration_ns`` is CPU time only;
  a CUDA event pair around the call on the current stream gives the device-side time, stored as
  ``comm_device`` records ``{seq, op, device_ns}`` read back without synchronising.
* ``bytes``: this rank's input payload. ``group_size``: ranks in the group. ``peer``: the other rank of a
  point-to-point call, -1 otherwise. ``seq``: ``(group id << 32) | index of the call within the group``,
  identical on every rank for the same collective (groups are created in the same order on all ranks),
  so analysis matches one collective across ranks by (op, seq). Point-to-point calls count per peer.
* DDP's gradient all-reduce runs in C++ (the Reducer). Where the user registered no communication hook,
  a timing hook is registered at the model's first forward that does exactly what the Reducer does
  (scale by 1/world size, then sum: bitwise-identical gradients); a user's own hook is wrapped, never
  replaced. Bucket all-reduces are rows ``ddp:all_reduce`` (launch until completion, overlapping
  backward); the part of the wait after the last bucket was launched is *exposed* communication: it is
  added to the step's ``comm`` phase and taken out of ``backward``.

Nothing here raises into training: every bookkeeping step is guarded; a failure warns once and that
part stops recording.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from typing import Any

from stepscope.collect.core.session import DONE, Session
from stepscope.collect.torch.nbytes import tensor_nbytes

_perf = time.perf_counter_ns
_local = threading.local()

# op -> (payload spec, group position, async position, peer (position, keyword))
# payload spec: ("arg", i, name) one tensor; ("list", i, name) a list of tensors; None unknown.
_COLLECTIVES: dict[str, tuple[Any, tuple[int, str], tuple[int, str] | None]] = {
    "all_reduce": (("arg", 0, "tensor"), (2, "group"), (3, "async_op")),
    "all_reduce_coalesced": (("list", 0, "tensors"), (2, "group"), (3, "async_op")),
    "all_gather": (("arg", 1, "tensor"), (2, "group"), (3, "async_op")),
    "all_gather_into_tensor": (("arg", 1, "input_tensor"), (2, "group"), (3, "async_op")),
    "reduce_scatter": (("list", 1, "input_list"), (3, "group"), (4, "async_op")),
    "reduce_scatter_tensor": (("arg", 1, "input"), (3, "group"), (4, "async_op")),
    "broadcast": (("arg", 0, "tensor"), (2, "group"), (3, "async_op")),
    "reduce": (("arg", 0, "tensor"), (3, "group"), (4, "async_op")),
    "all_to_all": (("list", 1, "input_tensor_list"), (2, "group"), (3, "async_op")),
    "all_to_all_single": (("arg", 1, "input"), (4, "group"), (5, "async_op")),
    "barrier": (None, (0, "group"), (1, "async_op")),
    "monitored_barrier": (None, (0, "group"), None),
    "gather": (("arg", 0, "tensor"), (3, "group"), (4, "async_op")),
    "scatter": (("arg", 0, "tensor"), (3, "group"), (4, "async_op")),
    "all_gather_object": (None, (2, "group"), None),
    "broadcast_object_list": (None, (2, "group"), None),
    "gather_object": (None, (3, "group"), None),
    "scatter_object_list": (None, (3, "group"), None),
}
_P2P: dict[str, tuple[tuple[int, str], tuple[int, str], bool]] = {
    # op -> (peer position/keyword, group position/keyword, returns work)
    "send": ((1, "dst"), (2, "group"), False),
    "recv": ((1, "src"), (2, "group"), False),
    "isend": ((1, "dst"), (2, "group"), True),
    "irecv": ((1, "src"), (2, "group"), True),
}


def _arg(args: tuple[Any, ...], kwargs: dict[str, Any], pos: int, name: str, default: Any = None) -> Any:
    if name in kwargs:
        return kwargs[name]
    return args[pos] if len(args) > pos else default


class CommRecorder:
    """Per-process state of the communication wrappers: sequence counters and group ids."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.group_ids: dict[int, tuple[int, int]] = {}
        self.counters: dict[Any, int] = {}
        self.lock = threading.Lock()
        self.dist: Any = None
        self.cuda_pending: list[tuple[int, str, Any, Any]] = []

    # -- bookkeeping ----------------------------------------------------------------------------------
    def group_info(self, group: Any) -> tuple[int, int]:
        """(group id, group size): id 0 for the default group, else 1 + creation order of the group."""
        dist = self.dist
        g = group if group is not None else dist.group.WORLD
        if g is None or g is dist.group.WORLD:
            return 0, int(dist.get_world_size(g)) if g is not None else -1
        key = id(g)
        info = self.group_ids.get(key)  # a group's id and size never change: looked up once per group
        if info is None:
            gid = 0
            try:
                names = dist.distributed_c10d._world.pg_names
                gid = 1 + list(names).index(g) if g in names else 0
            except Exception:
                gid = 0
            if gid == 0:
                gid = 1_000 + len(self.group_ids)
            info = self.group_ids[key] = (gid, int(dist.get_world_size(g)))
        return info

    def next_seq(self, key: Any, gid: int) -> int:
        with self.lock:
            n = self.counters.get(key, 0)
            self.counters[key] = n + 1
        return (gid << 32) | n

    def add(self, row: dict[str, Any], t0: int, t_end: int, blocked_ns: int) -> None:
        """Store one call: ``row`` holds the CommTable columns op, step, bytes, peer, group_size, seq (built
        once per call; other keys are ignored); the times are filled in here."""
        s = self.session
        if not s.active and not s.activate():
            return
        row["start_ns"], row["duration_ns"] = s.clock.wall(t0), t_end - t0
        s.buffers.add_comm(row)
        if blocked_ns > 0:
            s.step.comm += blocked_ns

    # -- CUDA ------------------------------------------------------------------------------------------
    def cuda_events(self, tensor: Any) -> tuple[Any, Any] | None:
        if tensor is None or not getattr(tensor, "is_cuda", False):
            return None
        import torch

        a = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        a.record()
        return a, torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]

    def queue_cuda(self, seq: int, op: str, start: Any, end: Any) -> None:
        """Keep a call's CUDA events until they complete; the step boundaries poll them only while some
        are pending (a process without CUDA collectives pays nothing per step)."""
        if not self.cuda_pending:
            self.session.extras.append(self.poll_cuda)
        self.cuda_pending.append((seq, op, start, end))

    def poll_cuda(self) -> object:
        """Per-step collector: record the events completed so far; ``DONE`` once none is pending."""
        self.drain_cuda()
        return None if self.cuda_pending else DONE

    def drain_cuda(self, *, block: bool = False) -> None:
        keep = []
        for seq, op, a, b in self.cuda_pending:
            if block:
                b.synchronize()
            elif not b.query():
                keep.append((seq, op, a, b))
                continue
            self.session.buffers.add_other({"kind": "comm_device", "seq": seq, "op": op,
                                            "device_ns": a.elapsed_time(b) * 1e6})
        self.cuda_pending = keep


class TimedWork:
    """Proxy of an async torch.distributed Work: records the call when ``wait()`` returns (or when
    ``is_completed()`` first says so); everything else is delegated."""

    __slots__ = ("_blocked", "_done", "_rec", "_row", "_t0", "_work")

    def __init__(self, work: Any, rec: CommRecorder, row: dict[str, Any], t0: int, blocked_ns: int) -> None:
        self._work = work
        self._rec = rec
        self._row = row
        self._t0 = t0
        self._blocked = blocked_ns
        self._done = False

    def _finish(self, blocked: int) -> None:
        if self._done:
            return
        self._done = True
        try:
            self._rec.add(self._row, self._t0, _perf(), self._blocked + blocked)
        except Exception:
            pass

    def wait(self, *args: Any, **kwargs: Any) -> Any:
        t0 = _perf()
        out = self._work.wait(*args, **kwargs)
        self._finish(_perf() - t0)
        return out

    def is_completed(self) -> bool:
        done = self._work.is_completed()
        if done:
            self._finish(0)
        return bool(done)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._work, name)


def _wrap(rec: CommRecorder, op: str, orig: Callable[..., Any]) -> Callable[..., Any]:
    coll = _COLLECTIVES.get(op)
    p2p = _P2P.get(op)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if getattr(_local, "depth", 0):  # a collective built on another one: the outer call records
            return orig(*args, **kwargs)
        row: dict[str, Any] | None = None
        ev = None
        try:
            row, ev = _prepare(rec, op, coll, p2p, args, kwargs)
        except Exception as e:
            rec.session.warn_once(f"comm:{op}", f"could not time torch.distributed.{op} ({e})")
        _local.depth = 1
        t0 = _perf()
        try:
            out = orig(*args, **kwargs)
        finally:
            _local.depth = 0
        t1 = _perf()
        if row is None:
            return out
        try:
            if ev is not None:
                ev[1].record()
                rec.queue_cuda(row["seq"], op, ev[0], ev[1])
            if op == "recv" and row["peer"] < 0 and isinstance(out, int):
                row["peer"] = out
            if row["is_async"] and out is not None:
                return TimedWork(out, rec, row, t0, t1 - t0)
            rec.add(row, t0, t1, t1 - t0)
        except Exception as e:
            rec.session.warn_once(f"comm:{op}", f"could not time torch.distributed.{op} ({e})")
        return out

    wrapper.__wrapped__ = orig  # type: ignore[attr-defined]
    wrapper.__name__ = getattr(orig, "__name__", op)
    wrapper.__doc__ = getattr(orig, "__doc__", None)
    return wrapper


def _prepare(rec: CommRecorder, op: str, coll: Any, p2p: Any, args: tuple[Any, ...],
             kwargs: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    step = rec.session.step_index
    if p2p is not None:
        (ppos, pname), (gpos, gname), is_async = p2p
        tensor = _arg(args, kwargs, 0, "tensor")
        peer = _arg(args, kwargs, ppos, pname)
        if peer is None:
            peer = kwargs.get("group_" + pname)
        gid, size = rec.group_info(_arg(args, kwargs, gpos, gname))
        peer = -1 if peer is None else int(peer)
        seq = rec.next_seq((gid, op, peer), gid)
        return ({"op": op, "step": step, "bytes": tensor_nbytes(tensor), "peer": peer, "group_size": size, "seq": seq,
                 "is_async": is_async}, rec.cuda_events(tensor))
    payload, (gpos, gname), apos = coll
    gid, size = rec.group_info(_arg(args, kwargs, gpos, gname))
    is_async = bool(_arg(args, kwargs, apos[0], apos[1], False)) if apos else False
    nbytes, first = 0.0, None
    if payload is not None:
        kind, pos, name = payload
        val = _arg(args, kwargs, pos, name)
        tensors = list(val or []) if kind == "list" else [val]
        nbytes = sum(tensor_nbytes(t) for t in tensors)
        first = tensors[0] if tensors else None
    seq = rec.next_seq((gid, "collective"), gid)
    return ({"op": op, "step": step, "bytes": nbytes, "peer": -1, "group_size": size, "seq": seq,
             "is_async": is_async}, rec.cuda_events(first))


def _wrap_batch(rec: CommRecorder, orig: Callable[..., Any]) -> Callable[..., Any]:
    def batch_isend_irecv(p2p_op_list: Any) -> Any:
        if getattr(_local, "depth", 0):
            return orig(p2p_op_list)
        t0 = _perf()
        _local.depth = 1
        try:
            works = orig(p2p_op_list)
        finally:
            _local.depth = 0
        t1 = _perf()
        try:
            nbytes = sum(tensor_nbytes(p.tensor) for p in p2p_op_list)
            gid, size = rec.group_info(getattr(p2p_op_list[0], "group", None)) if p2p_op_list else (0, -1)
            row = {"op": "batch_isend_irecv", "step": rec.session.step_index, "bytes": nbytes, "peer": -1,
                   "group_size": size, "seq": rec.next_seq((gid, "batch_p2p"), gid)}
            if not works:
                rec.add(row, t0, t1, t1 - t0)
                return works
            # the batch is done when its last work is: only the last proxy records
            return [*works[:-1], TimedWork(works[-1], rec, row, t0, t1 - t0)]
        except Exception as e:
            rec.session.warn_once("comm:batch", f"could not time batch_isend_irecv ({e})")
            return works

    batch_isend_irecv.__wrapped__ = orig  # type: ignore[attr-defined]
    return batch_isend_irecv


def install_comm_hooks(session: Session, undo: list[Callable[[], None]]) -> None:
    """Wrap the torch.distributed calls and DDP's gradient communication; restore callables go to ``undo``."""
    import torch.distributed as dist

    if not dist.is_available():
        return
    from torch.distributed import distributed_c10d as c10d

    rec = CommRecorder(session)
    rec.dist = dist
    for op in (*_COLLECTIVES, *_P2P, "batch_isend_irecv"):
        orig = getattr(c10d, op, None)
        if orig is None or getattr(orig, "__wrapped_by_stepscope__", False):
            continue
        w = _wrap_batch(rec, orig) if op == "batch_isend_irecv" else _wrap(rec, op, orig)
        w.__wrapped_by_stepscope__ = True  # type: ignore[attr-defined]
        for mod in (c10d, dist):
            if getattr(mod, op, None) is orig:
                setattr(mod, op, w)
                undo.append(functools.partial(setattr, mod, op, orig))

    session.closers.insert(0, lambda: rec.drain_cuda(block=True))
    try:
        from stepscope.collect.torch.ddp import install_ddp_hook

        install_ddp_hook(session, rec, undo)
    except Exception as e:
        session.warn_once("comm:ddp", f"could not time DDP's gradient all-reduce ({e})")
