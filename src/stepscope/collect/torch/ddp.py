"""Timing of DistributedDataParallel's gradient communication, which runs in C++ (the Reducer).

A DDP communication hook is the one Python-visible point of the Reducer's all-reduce. At a DDP model's
first forward, if the user registered no hook (Python or built-in), stepscope registers
:func:`_timed_allreduce`, which does what the Reducer does without a hook: multiply the bucket by
1/group size, then sum with all_reduce. (torch's own ``allreduce_hook`` *divides*, which differs in the
last bit for world sizes that are not powers of two: measured with 3 ranks; the multiplication gives
bit-identical parameters, and tests/collect/torch/test_comm.py checks it.) A hook the user
registers (before or after) is wrapped, never replaced: the same function on the same state, timed.
Built-in C++ hooks (``_register_builtin_comm_hook``) cannot be wrapped and are left untimed.

Per bucket a CommTable row ``ddp:all_reduce`` holds launch-to-completion time (in flight, overlapped
with backward; not added to the step's comm phase). For the last bucket of a backward pass, the time
from its launch to its completion is the *exposed* communication (the estimate assumes earlier buckets
are done by then): it is added to the step's comm phase and taken out of its backward phase, where the
Reducer's wait happens.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from stepscope.collect.core.session import Session
from stepscope.collect.torch.nbytes import tensor_nbytes

if TYPE_CHECKING:  # comm.py installs this hook: a runtime import back would be a cycle
    from stepscope.collect.torch.comm import CommRecorder

_perf = time.perf_counter_ns
OP = "ddp:all_reduce"


def _plain(fn: Callable[..., Any]) -> Callable[..., Any]:
    """DDP checks a hook's annotations against the real types; postponed (string) ones must go."""
    fn.__annotations__ = {}
    return fn


def _timer(rec: CommRecorder, hook: Callable[..., Any], process_group: Any) -> Callable[..., Any]:
    """``hook`` with the launch and completion of each bucket's future recorded."""
    session = rec.session

    @functools.wraps(hook)
    def timed(state: Any, bucket: Any) -> Any:
        t0 = _perf()
        fut = hook(state, bucket)
        try:
            row = _bucket_row(rec, bucket, process_group)
            last = bool(bucket.is_last())
        except Exception as e:
            session.warn_once("comm:ddp-hook", f"could not time DDP buckets ({e})")
            return fut

        def done(f: Any) -> Any:
            t1 = _perf()
            try:
                exposed = (t1 - t0) if last else 0
                rec.add(row, t0, t1, exposed)
                if exposed:
                    session.step.backward -= exposed  # the Reducer waits inside backward()
            except Exception as e:
                session.warn_once("comm:ddp-done", f"could not record a DDP bucket ({e})")
            return f.value()

        return fut.then(done)

    return timed


def _bucket_row(rec: CommRecorder, bucket: Any, process_group: Any) -> dict[str, Any]:
    gid, size = rec.group_info(process_group)
    return {"op": OP, "step": rec.session.step_index, "bytes": tensor_nbytes(bucket.buffer()), "peer": -1,
            "group_size": size, "seq": rec.next_seq((gid, "ddp"), gid | 0x8000)}


def _timed_allreduce_factory(dist: Any) -> Callable[..., Any]:
    orig_all_reduce = getattr(dist.all_reduce, "__wrapped__", dist.all_reduce)

    def _timed_allreduce(process_group: Any, bucket: Any) -> Any:
        """The Reducer's own arithmetic (x * (1/n), then sum), through the unwrapped all_reduce."""
        group = process_group if process_group is not None else dist.group.WORLD
        tensor = bucket.buffer()
        tensor.mul_(1.0 / group.size())
        return orig_all_reduce(tensor, group=group, async_op=True).get_future().then(lambda f: f.value()[0])

    return _plain(_timed_allreduce)


def install_ddp_hook(session: Session, rec: CommRecorder, undo: list[Callable[[], None]]) -> None:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    orig_init = DDP.__init__
    orig_register = DDP.register_comm_hook
    orig_builtin = DDP._register_builtin_comm_hook
    default_hook = _timed_allreduce_factory(dist)

    def register_comm_hook(self: Any, state: Any, hook: Callable[..., Any]) -> None:
        pg = getattr(self, "process_group", None)
        timed = hook
        try:
            timed = _timer(rec, hook, state if isinstance(state, dist.ProcessGroup) else pg)
        except Exception as e:
            session.warn_once("comm:ddp-wrap", f"could not time a DDP communication hook ({e})")
        slot = getattr(self, "_stepscope_slot", None)
        if slot is not None:  # our default is registered already: it dispatches to the user's hook now
            self._check_comm_hook(hook)
            self._comm_hooks.append((hook, state))
            slot[:] = [state, timed]
            return None
        self._stepscope_user_hook = True
        orig_register(self, state, timed)

    def register_builtin(self: Any, comm_hook_type: Any) -> None:
        self._stepscope_user_hook = True
        orig_builtin(self, comm_hook_type)  # type: ignore[no-untyped-call]

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        orig_init(self, *args, **kwargs)
        try:
            if getattr(self, "_use_python_reducer", False) or getattr(self, "reducer", None) is None:
                return
            handle: list[Any] = []

            def first_forward(module: Any, inputs: Any) -> None:
                for h in handle:
                    h.remove()
                try:
                    if self._comm_hooks or getattr(self, "_stepscope_user_hook", False):
                        return
                    pg = self.process_group
                    slot = [pg, _timer(rec, default_hook, pg)]

                    def dispatch(state: Any, bucket: Any) -> Any:
                        return slot[1](slot[0], bucket)

                    orig_register(self, pg, _plain(dispatch))
                    self._comm_hooks.clear()  # the user registered nothing
                    self._stepscope_slot = slot
                except Exception as e:
                    session.warn_once("comm:ddp-register", f"could not time DDP's gradient all-reduce ({e})")

            handle.append(self.register_forward_pre_hook(first_forward))
        except Exception as e:
            session.warn_once("comm:ddp-init", f"could not prepare DDP timing ({e})")

    DDP.__init__ = functools.wraps(orig_init)(init)  # type: ignore[method-assign]
    DDP.register_comm_hook = functools.wraps(orig_register)(register_comm_hook)  # type: ignore[method-assign]
    DDP._register_builtin_comm_hook = functools.wraps(orig_builtin)(register_builtin)  # type: ignore[method-assign]

    def restore() -> None:
        DDP.__init__ = orig_init  # type: ignore[method-assign]
        DDP.register_comm_hook = orig_register  # type: ignore[method-assign]
        DDP._register_builtin_comm_hook = orig_builtin  # type: ignore[method-assign]

    undo.append(restore)
