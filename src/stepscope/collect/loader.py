"""DataLoader hooks: time blocked in ``next(iterator)`` is data wait; batches give samples per step."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from stepscope.collect.batch import batch_size, batch_tokens
from stepscope.collect.session import Session


def loader_config(loader: Any) -> dict[str, Any]:
    """The settings that decide a loader's throughput (for reports and the data benchmark)."""
    def get(name: str) -> Any:
        v = getattr(loader, name, None)
        return v if isinstance(v, (int, float, bool, str)) or v is None else str(v)

    return {"loader_id": id(loader), "num_workers": get("num_workers"), "batch_size": get("batch_size"),
            "pin_memory": get("pin_memory"), "prefetch_factor": get("prefetch_factor"),
            "persistent_workers": get("persistent_workers"), "drop_last": get("drop_last"),
            "dataset": type(getattr(loader, "dataset", None)).__name__,
            "dataset_len": _safe_len(getattr(loader, "dataset", None)), "torch_threads": _torch_threads()}


def _torch_threads() -> int | None:
    """torch's intra-op threads in this process (the advisor's oversubscription rule reads it)."""
    try:
        import torch

        return int(torch.get_num_threads())
    except Exception:
        return None


def _safe_len(obj: Any) -> int | None:
    try:
        return len(obj)
    except Exception:
        return None


def install_loader_hooks(session: Session, undo: list[Callable[[], None]]) -> None:
    from torch.utils.data import dataloader as dl

    it_cls = dl._BaseDataLoaderIter
    loader_cls = dl.DataLoader
    orig_next = it_cls.__next__
    orig_iter = loader_cls.__iter__
    epochs: dict[int, int] = {}
    perf = time.perf_counter_ns

    def __next__(self: Any) -> Any:
        t0 = perf()
        batch = orig_next(self)
        t1 = perf()
        try:
            if session.disabled or session.api_fetch:
                return batch
            session.touch(t0)
            session.activate()
            epoch = getattr(self, "_stepscope_epoch", None)
            if epoch is not None and session.step_source != "api":
                session.step.epoch = epoch  # the step in progress only: see Session.mark_step
            session.add_fetch(t0, t1, batch_size(batch), batch_tokens(batch))
        except Exception as e:
            session.warn_once("loader", f"DataLoader timing failed ({e})")
        return batch

    def __iter__(self: Any) -> Any:
        it: Any = orig_iter(self)
        try:
            key = id(self)
            if key not in epochs and not session.disabled and session.activate():
                session.record("dataloader", **loader_config(self), t_ns=time.time_ns())
            epochs[key] = epochs.get(key, -1) + 1
            it._stepscope_epoch = epochs[key]
        except Exception as e:
            session.warn_once("loader-iter", f"DataLoader epoch tracking failed ({e})")
        return it

    it_cls.__next__ = __next__  # type: ignore[method-assign]
    loader_cls.__iter__ = __iter__  # type: ignore[method-assign]

    def restore() -> None:
        it_cls.__next__ = orig_next  # type: ignore[method-assign]
        loader_cls.__iter__ = orig_iter  # type: ignore[method-assign]

    undo.append(restore)
