"""DataLoader hooks: time blocked in ``next(iterator)`` is data wait; batches give samples per step."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

from stepscope.collect.batch import batch_size, batch_tokens
from stepscope.collect.hooks import use_compiled
from stepscope.collect.pystate import PassState
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


_BATCHES: list[int] = []
"""Batches per epoch of the loaders iterated so far, in order (the first is the training loader's)."""


def batches_per_epoch() -> int | None:
    """Batches per epoch of the first DataLoader iterated in this process (None: none, or no length)."""
    return _BATCHES[0] if _BATCHES else None


def install_loader_hooks(session: Session, undo: list[Callable[[], None]]) -> None:
    """Time ``next()`` on DataLoader iterators and count epochs.

    An epoch is one pass of a loader: an iterator that yields a second batch, or that ends after its
    first. An iterator abandoned after one batch (the DDP tutorial's ``len(next(iter(loader))[0])``
    peek) is no epoch, and its batch's samples are taken back when a new pass of the same loader starts
    in the same step. Until a pass is confirmed its steps carry the epoch it will get.

    ``__next__`` is the compiled ``_hooks.LoaderNext`` where built (and ``STEPSCOPE_PURE_HOOKS`` is unset), the
    Python ``__next__`` below (its reference, the same semantics) otherwise.
    """
    from torch import Tensor as tensor
    from torch.utils.data import dataloader as dl

    it_cls = dl._BaseDataLoaderIter
    loader_cls = dl.DataLoader
    orig_next = it_cls.__next__
    orig_iter = loader_cls.__iter__
    passes: dict[int, int] = {}
    """loader id -> passes confirmed so far (the epoch number of its next pass)"""
    first_batch: dict[int, tuple[int, Any, float]] = {}
    """loader id -> (iterator token, step state, samples) of a pass that has yielded one batch only"""
    tokens = itertools.count()
    perf = time.perf_counter_ns

    def confirm(it: Any) -> None:
        p = it._stepscope_pass
        p.epoch = passes.get(p.key, 0)
        passes[p.key] = p.epoch + 1
        first_batch.pop(p.key, None)

    # the branches taken once a pass, shared by both __next__ bodies (the Python one below, the compiled one)
    def pass_end(it: Any) -> None:
        """The pass ended (StopIteration): a pass that yielded one batch only is confirmed now."""
        try:
            p = getattr(it, "_stepscope_pass", None)
            if p is not None and p.epoch is None and p.batches >= 1:
                confirm(it)  # a one-batch pass
        except Exception as e:
            session.warn_once("loader-iter", f"DataLoader epoch tracking failed ({e})")

    def open_epoch(it: Any, key: int, nb: int) -> Any:
        """The epoch of a pass not yet confirmed, at its ``nb``-th batch (its second confirms it)."""
        if nb >= 2:
            confirm(it)
            return it._stepscope_pass.epoch
        return passes.get(key, 0)

    def first_of_pass(it: Any, key: int, st: Any, n: float) -> None:
        """A pass's first batch (``n`` samples, counted on ``st``): an earlier pass of the same loader in the
        same step that yielded one batch only was a peek, not trained on."""
        token = it._stepscope_pass.token
        prev = first_batch.get(key)
        if prev is not None and prev[0] != token and prev[1] is st and st.samples >= prev[2]:
            st.samples -= prev[2]
        first_batch[key] = (token, st, n)

    def __next__(self: Any) -> Any:
        t0 = perf()
        try:
            batch = orig_next(self)
        except StopIteration:
            pass_end(self)
            raise
        t1 = perf()
        s = session
        if s.disabled:
            return batch
        try:
            st = s.step
            p = getattr(self, "_stepscope_pass", None)
            if p is not None:  # count the batch on its pass; the pass's epoch (provisional until confirmed)
                nb = p.batches = p.batches + 1
                epoch = p.epoch
                if epoch is None:
                    epoch = open_epoch(self, p.key, nb)
                st.epoch = epoch  # the step in progress only: see Session.mark_step
            if s.api_fetch:  # stepscope.steps() times this fetch itself
                return batch
            if not s.active and not s.activate():
                return batch
            # batch_size's common case written out: a tensor, or a list / tuple that starts with one
            t = batch[0] if (type(batch) is list or type(batch) is tuple) and batch else batch
            n = float(t.shape[0]) if type(t) is tensor and t.dim() else batch_size(batch)
            if p is not None and nb == 1:
                first_of_pass(self, p.key, st, n or 0.0)
            # Session.add_fetch written out (the per-batch hot path)
            if st.start is None:
                st.start = t0
            if not st.fetched:
                st.fetched = True
                st.samples = 0.0  # samples read from a forward input before this batch came: the batches count
            st.data_wait += t1 - t0
            if n:
                st.samples += n
            if isinstance(batch, dict):
                tokens = batch_tokens(batch)
                if tokens:
                    st.tokens += tokens
        except Exception as e:
            s.warn_once("loader", f"DataLoader timing failed ({e})")
        return batch

    compiled = use_compiled()
    next_fn: Any = __next__
    forget: Callable[[], None] = lambda: None  # noqa: E731
    if compiled is not None:  # the same body in C (_hooks.LoaderNext): no Python frame a batch
        next_fn = compiled.LoaderNext(session, orig_next, tensor, batch_size, batch_tokens, pass_end,
                                       open_epoch, first_of_pass)
        forget = next_fn.forget  # it keeps the last iterator's pass: read the attribute set below again

    def __iter__(self: Any) -> Any:
        it: Any = orig_iter(self)
        try:
            key = id(self)
            if key not in passes and not session.disabled and session.activate():
                session.record("dataloader", **loader_config(self), t_ns=time.time_ns())
            if key not in passes:
                n = _safe_len(self)
                if n:
                    _BATCHES.append(n)
            passes.setdefault(key, 0)
            it._stepscope_pass = PassState(key, next(tokens))  # read once a pass (compiled) or a batch (Python)
            forget()  # a persistent-workers loader hands out the same iterator again
        except Exception as e:
            session.warn_once("loader-iter", f"DataLoader epoch tracking failed ({e})")
        return it

    it_cls.__next__ = next_fn  # type: ignore[method-assign]
    loader_cls.__iter__ = __iter__  # type: ignore[method-assign]

    def restore() -> None:
        it_cls.__next__ = orig_next  # type: ignore[method-assign]
        loader_cls.__iter__ = orig_iter  # type: ignore[method-assign]
        _BATCHES.clear()

    undo.append(restore)
