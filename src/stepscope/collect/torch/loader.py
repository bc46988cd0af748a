"""DataLoader hooks: time blocked in ``next(iterator)`` is data wait; batches give samples per step."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from typing import Any

from stepscope.collect.core.batch import batch_size, batch_tokens
from stepscope.collect.core.pystate import PassState
from stepscope.collect.core.session import Session
from stepscope.collect.core.warmup import LOADER_BATCHES


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



def install_loader_hooks(session: Session, undo: list[Callable[[], None]]) -> tuple[str, str | None]:
    """Time ``next()`` on DataLoader iterators and count epochs. Returns the path used and why the private one was
    refused (None: it was not), for ``Session.note_hooks``.

    An epoch is one pass of a loader: an iterator that yields a second batch, or that ends after its
    first. An iterator abandoned after one batch (the DDP tutorial's ``len(next(iter(loader))[0])``
    peek) is no epoch, and its batch's samples are taken back when a new pass of the same loader starts
    in the same step. Until a pass is confirmed its steps carry the epoch it will get.

    One body (``timed_next``), on one of two paths: torch's private ``_BaseDataLoaderIter.__next__`` (no object
    between the user and torch's iterator) where :func:`private_next_fault` finds that this torch iterates a
    DataLoader through it, else a public-level wrapper: ``DataLoader.__iter__`` hands out a :class:`TimedIterator`
    around torch's iterator.
    """
    from torch.utils.data import dataloader as dl

    loader_cls = dl.DataLoader
    orig_iter = loader_cls.__iter__
    passes: dict[int, int] = {}
    """loader id -> passes confirmed so far (the epoch number of its next pass)"""
    first_batch: dict[int, tuple[int, Any, float]] = {}
    """loader id -> (iterator token, step state, samples) of a pass that has yielded one batch only"""
    tokens = itertools.count()
    perf = time.perf_counter_ns
    get_ident = threading.get_ident

    def confirm(it: Any) -> None:
        p = it._stepscope_pass
        p.epoch = passes.get(p.key, 0)
        passes[p.key] = p.epoch + 1
        first_batch.pop(p.key, None)

    def pass_end(it: Any) -> None:
        """The pass ended (StopIteration): a pass that yielded one batch only is confirmed now."""
        try:
            p = getattr(it, "_stepscope_pass", None)
            if p is not None and p.epoch is None and p.batches >= 1:
                confirm(it)  # a one-batch pass
        except Exception as e:
            session.warn_once("loader-iter", f"DataLoader epoch tracking failed ({e})")

    def first_of_pass(p: Any, st: Any, n: float) -> None:
        """A pass's first batch (``n`` samples, counted on ``st``): an earlier pass of the same loader in the
        same step that yielded one batch only was a peek, not trained on."""
        prev = first_batch.get(p.key)
        if prev is not None and prev[0] != p.token and prev[1] is st and st.samples >= prev[2]:
            st.samples -= prev[2]
        first_batch[p.key] = (p.token, st, n)

    def fetched(it: Any, batch: Any, t0: int, t1: int) -> None:
        """A batch came from the pass of iterator ``it`` between perf times ``t0`` and ``t1``."""
        s = session
        if s.disabled:
            return
        owner = s.owner
        if owner is not None and owner != get_ident():  # another thread's batch: not the recorded steps'
            return
        try:
            st = s.step
            p = getattr(it, "_stepscope_pass", None)
            nb = 0
            if p is not None:  # count the batch on its pass; the pass's epoch (provisional until confirmed)
                nb = p.batches = p.batches + 1
                epoch = p.epoch
                if epoch is None:
                    if nb >= 2:
                        confirm(it)
                        epoch = p.epoch
                    else:
                        epoch = passes.get(p.key, 0)
                st.epoch = epoch  # the step in progress only: see Session.mark_step
            if s.api_fetch:  # stepscope.steps() times this fetch itself
                return
            if not s.active and not s.activate():
                return
            n = batch_size(batch)
            if nb == 1:
                first_of_pass(p, st, n or 0.0)
            s.add_fetch(t0, t1, n, batch_tokens(batch) if isinstance(batch, dict) else None)  # tokens: dicts only
        except Exception as e:
            s.warn_once("loader", f"DataLoader timing failed ({e})")

    def make_next(orig_next: Callable[[Any], Any]) -> Callable[[Any], Any]:
        def timed_next(it: Any) -> Any:
            t0 = perf()
            try:
                batch = orig_next(it)
            except StopIteration:
                pass_end(it)
                raise
            fetched(it, batch, t0, perf())
            return batch

        return timed_next

    fault = private_next_fault()
    it_cls: Any = None if fault else dl._BaseDataLoaderIter
    orig_next = it_cls.__next__ if it_cls is not None else next
    timed_next = make_next(orig_next)

    def __iter__(self: Any) -> Any:
        it: Any = orig_iter(self)
        try:
            key = id(self)
            if key not in passes and not session.disabled and session.activate():
                session.record("dataloader", **loader_config(self), t_ns=time.time_ns())
            if key not in passes:
                n = _safe_len(self)
                if n:
                    LOADER_BATCHES.append(n)
            passes.setdefault(key, 0)
            it._stepscope_pass = PassState(key, next(tokens))  # a persistent-workers iterator: a new pass
        except Exception as e:
            session.warn_once("loader-iter", f"DataLoader epoch tracking failed ({e})")
        return it if it_cls is not None else TimedIterator(it, timed_next)

    if it_cls is not None:
        it_cls.__next__ = timed_next
    loader_cls.__iter__ = __iter__  # type: ignore[method-assign]

    def restore() -> None:
        if it_cls is not None:
            it_cls.__next__ = orig_next
        loader_cls.__iter__ = orig_iter  # type: ignore[method-assign]
        LOADER_BATCHES.clear()

    undo.append(restore)
    if fault:
        return "dataloader (public wrapper)", f"_BaseDataLoaderIter.__next__: {fault}"
    return "dataloader (_BaseDataLoaderIter.__next__, self-checked)", None


class TimedIterator:
    """The public path: what ``iter(loader)`` gives where torch's private iterator class cannot be hooked; each
    ``next()`` runs the one timed body around torch's iterator, every other attribute is the iterator's."""

    __slots__ = ("_it", "_next")

    def __init__(self, it: Any, timed_next: Callable[[Any], Any]) -> None:
        self._it = it
        self._next = timed_next

    def __iter__(self) -> TimedIterator:
        return self

    def __next__(self) -> Any:
        return self._next(self._it)

    def __len__(self) -> int:
        return len(self._it)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._it, name)


PROBE_ITEMS = 5
"""Items of the self-check's loader, 2 a batch: 3 batches."""


def private_next_fault() -> str | None:
    """None where this torch iterates a DataLoader by calling ``_BaseDataLoaderIter.__next__`` once per batch,
    handing out what it returns (checked by iterating a tiny loader through a counting stand-in); else why not."""
    try:
        from torch.utils.data import dataloader as dl

        it_cls = dl._BaseDataLoaderIter
        orig = vars(it_cls)["__next__"]
    except (AttributeError, KeyError) as e:
        return f"torch.utils.data.dataloader has no _BaseDataLoaderIter.__next__ ({e})"
    seen: list[Any] = []

    def probe(self: Any) -> Any:
        batch = orig(self)
        seen.append(batch)
        return batch

    it_cls.__next__ = probe  # type: ignore[method-assign]
    try:
        items: Any = list(range(PROBE_ITEMS))
        got = list(dl.DataLoader(items, batch_size=2))
    except Exception as e:
        return f"a DataLoader failed to iterate with _BaseDataLoaderIter.__next__ hooked ({type(e).__name__}: {e})"
    finally:
        it_cls.__next__ = orig  # type: ignore[method-assign]
    want = (PROBE_ITEMS + 1) // 2
    if len(got) != want or len(seen) != want or any(a is not b for a, b in zip(seen, got, strict=True)):
        return (f"_BaseDataLoaderIter.__next__ saw {len(seen)} of the {want} batches a DataLoader yielded "
                f"({len(got)})")
    return None
