"""Data-pipeline benchmark inside the user's process (`stepscope data-bench`).

Installed with the other torch hooks when ``STEPSCOPE_DATABENCH`` is set. The first time the script
iterates a DataLoader, that loader is drained for the requested epochs (then every other loader the
script has created so far), timing each ``next()``; the training step never runs. One ``databench``
record per loader is written, the session is closed, and the process ends with exit code 0.

Multi-rank (torchrun): when torch.distributed is initialised, the ranks meet at a barrier before and
after each epoch of the first loader, so that the global epoch time (first start to last end over
ranks) measures the pipeline, not the ranks' start-up skew.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
import weakref
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from stepscope.collect.core.batch import batch_size
from stepscope.collect.core.options import ENV_DATABENCH as ENV_DATABENCH  # read here, set by cli/databench.py
from stepscope.collect.core.session import Session

STREAMING_DEFAULT_TIME_S = 30.0
"""Per-epoch time limit applied to a loader without a length when neither limit is given."""


@dataclass(frozen=True, slots=True)
class BenchSpec:
    """What `stepscope data-bench` asks of the process."""

    epochs: int = 2
    """Epochs (full passes, or passes cut by a limit) per loader."""
    max_batches: int | None = None
    """Stop an epoch after this many batches."""
    time_s: float | None = None
    """Stop an epoch after this many seconds (checked between batches)."""
    workers: int | None = None
    """Override of the loader's num_workers; None keeps the script's."""

    def to_env(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_env(cls) -> BenchSpec | None:
        raw = os.environ.get(ENV_DATABENCH)
        if not raw:
            return None
        try:
            return cls(**json.loads(raw))
        except (ValueError, TypeError):
            return None


def install_databench(session: Session, undo: list[Callable[[], None]]) -> None:
    """Wrap DataLoader.__init__ (to know every loader) and __iter__ (to benchmark on first use)."""
    spec = BenchSpec.from_env()
    if spec is None:
        return
    from torch.utils.data import DataLoader

    created: list[weakref.ref[Any]] = []
    orig_init = DataLoader.__init__
    inner_iter = DataLoader.__iter__
    state = {"running": False}

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        orig_init(self, *args, **kwargs)
        try:
            created.append(weakref.ref(self))
        except TypeError:
            pass

    def __iter__(self: Any) -> Any:
        if state["running"] or session.disabled or os.getpid() != session.pid:
            return inner_iter(self)
        state["running"] = True
        others = [r() for r in created]
        loaders = [self] + [x for x in others if x is not None and x is not self]
        run_bench(session, spec, loaders, inner_iter)
        return inner_iter(self)  # not reached: run_bench ends the process

    DataLoader.__init__ = __init__  # type: ignore[method-assign]
    DataLoader.__iter__ = __iter__  # type: ignore[method-assign]

    def restore() -> None:
        DataLoader.__init__ = orig_init  # type: ignore[method-assign]
        DataLoader.__iter__ = inner_iter  # type: ignore[method-assign]

    undo.append(restore)


def run_bench(session: Session, spec: BenchSpec, loaders: list[Any], inner_iter: Callable[[Any], Any]) -> None:
    """Benchmark every loader, record the results, close the session and end the process."""
    from stepscope.collect.torch.loader import loader_config

    session.activate()
    for index, loader in enumerate(loaders):
        try:
            override = _override_workers(loader, spec.workers)
            limit_time, streaming = spec.time_s, _length(loader) is None
            if streaming and spec.max_batches is None and limit_time is None:
                limit_time = STREAMING_DEFAULT_TIME_S
            sync = index == 0
            epochs = [bench_epoch(session, loader, inner_iter, e, spec.max_batches, limit_time, sync)
                      for e in range(spec.epochs)]
            session.record("databench", loader_index=index, config=loader_config(loader), epochs=epochs,
                           spec=asdict(spec), workers_override=override, streaming=streaming,
                           time_limit_s=limit_time, max_batches=spec.max_batches)
        except Exception as e:  # one loader failing must not hide the others
            session.record("databench_error", loader_index=index, error=f"{type(e).__name__}: {e}")
    session.close("data-bench")
    print(f"stepscope data-bench: {len(loaders)} DataLoader(s) measured over {spec.epochs} epoch(s); "
          "the script is stopped before training", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _length(loader: Any) -> int | None:
    try:
        return len(loader)
    except Exception:
        return None


def _override_workers(loader: Any, workers: int | None) -> bool:
    if workers is None or getattr(loader, "num_workers", None) == workers:
        return False
    loader.num_workers = workers
    if workers > 0 and getattr(loader, "prefetch_factor", None) is None:
        loader.prefetch_factor = 2  # the DataLoader default when workers are given at construction
    return True


def _barrier(sync: bool) -> None:
    if not sync:
        return
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            dist.barrier()
    except Exception:
        pass


def bench_epoch(session: Session, loader: Any, inner_iter: Callable[[Any], Any], epoch: int,
                max_batches: int | None, time_s: float | None, sync: bool) -> dict[str, Any]:
    """One pass over ``loader``: per-batch wall times (the first one includes creating the iterator,
    which starts the worker processes), samples per batch, and why the pass stopped."""
    perf = time.perf_counter_ns
    _barrier(sync)
    t_start = perf()
    it = inner_iter(loader)
    batch_ns: list[int] = []
    samples: list[float] = []
    stopped = "end"
    prev = t_start
    deadline = None if time_s is None else t_start + int(time_s * 1e9)
    while True:
        if max_batches is not None and len(batch_ns) >= max_batches:
            stopped = "max_batches"
            break
        if deadline is not None and prev >= deadline:
            stopped = "time"
            break
        try:
            batch = next(it)
        except StopIteration:
            break
        t = perf()
        batch_ns.append(t - prev)
        prev = t
        n = batch_size(batch)
        samples.append(math.nan if n is None else n)
        del batch
    t_end = prev
    shutdown = getattr(it, "_shutdown_workers", None)
    if stopped != "end" and shutdown is not None and not getattr(loader, "persistent_workers", False):
        try:
            shutdown()
        except Exception:
            pass
    del it
    _barrier(sync)
    clock = session.clock
    return {"epoch": epoch, "start_ns": clock.wall(t_start), "end_ns": clock.wall(t_end), "batch_ns": batch_ns,
            "samples": samples, "stopped": stopped}
