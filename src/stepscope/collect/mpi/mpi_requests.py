"""The ``MPI.Request`` subclass of collect/mpi/mpi.py: a timed non-blocking call is recorded when a ``Wait`` /
``Test`` on its request, or a class-level ``Waitall`` / ``Waitany`` / ``Waitsome`` / ``Test*``, completes it.
The time blocked in the wait is added to the step's comm phase once, not once per request."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from stepscope.collect.mpi.mpi import MpiRecorder
    from stepscope.collect.mpi.mpi_sites import Pending

_perf = time.perf_counter_ns


class Completion:
    """Records the pending calls of completed requests."""

    def __init__(self, m: MpiRecorder) -> None:
        self.m = m

    def finish(self, req: Any, status: Any, blocked: int, t_end: int) -> None:
        p: Pending | None = getattr(req, "_ss_pending", None)
        if p is None:
            return
        req._ss_pending = None
        if p.recv and status is not None:
            self.m.status_row(p.row, p.info, status)
            p.counts.add_bytes(p.row["bytes"])
        self.m.add(p.counts, p.row, p.t0, t_end, p.blocked + blocked, p.weight)

    def finish_done(self, requests: Sequence[Any], statuses: Any, blocked: int) -> None:
        t_end = _perf()
        try:
            for i, r in enumerate(requests):
                if getattr(r, "_ss_pending", None) is not None and not r:
                    st = statuses[i] if isinstance(statuses, list) and i < len(statuses) else None
                    self.finish(r, st, blocked, t_end)
                    blocked = 0  # the blocked time goes to the step once
        except Exception as e:
            self.warn(e)

    def warn(self, e: Exception) -> None:
        self.m.session.warn_once("mpi:wait", f"could not time an MPI request ({e})")


def request_class(m: MpiRecorder) -> type[Any]:
    """mpi4py's Request, subclassed: ``isinstance(r, MPI.Request)`` stays true for every request."""
    base_req, status_cls = m.mpi.Request, m.mpi.Status
    done = Completion(m)

    class _Meta(type):
        def __instancecheck__(cls, obj: Any) -> bool:
            return isinstance(obj, base_req)

        def __subclasscheck__(cls, sub: Any) -> bool:
            return issubclass(sub, base_req)

    class Request(base_req, metaclass=_Meta):  # type: ignore[misc, valid-type]
        """mpi4py's Request, recording stepscope's pending MPI calls when they complete."""

        __slots__ = ("_ss_pending",)

        def _ss_one(self, method: Callable[..., Any], status: Any) -> Any:
            p = getattr(self, "_ss_pending", None)
            if p is None:
                return method(self, status)
            st = status if status is not None or not p.recv else status_cls()
            t0 = _perf()
            out = method(self, st)
            t1 = _perf()
            if not self:
                try:
                    done.finish(self, st, t1 - t0, t1)
                except Exception as e:
                    done.warn(e)
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
            done.finish_done(reqs, sts, _perf() - t0)
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
                    done.finish(reqs[idx], st, t1 - t0, t1)
            except Exception as e:
                done.warn(e)
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
    return Request
