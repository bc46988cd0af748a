"""Load-independent cost of the zero-code hooks: what stepscope's code does per training step.

Counts, over N steps of a DataLoader + Linear training loop inside a session, the Python function calls
made in stepscope's own files and the C calls they make (``sys.setprofile``), and the memory blocks left
behind per step (``sys.getallocatedblocks``, hooked minus bare). Unlike a timing, these figures do not move
with the load of the machine, so a test can hold them to a budget (tests/collect/core/test_hot_path.py).
"""

from __future__ import annotations

import gc
import os
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

SRC = os.path.dirname(os.path.dirname(os.path.abspath(str(__import__("stepscope").__file__))))
PKG = os.path.join(SRC, "stepscope") + os.sep


@dataclass
class Counts:
    py_calls: float
    """stepscope Python function calls per step"""
    c_calls: float
    """C functions called from stepscope code per step"""
    by_function: Counter[str] = field(default_factory=Counter)
    """stepscope functions (file:name) -> calls per step"""


def count_calls(fn: Callable[[], Any], n: int) -> Counts:
    """Calls made by stepscope code while ``fn`` runs ``n`` times (per run)."""
    py = 0
    c = 0
    by: Counter[str] = Counter()
    cache: dict[Any, bool] = {}

    def ours(code: Any) -> bool:
        hit = cache.get(code)
        if hit is None:
            hit = cache[code] = code.co_filename.startswith(PKG)
        return hit

    def prof(frame: Any, event: str, arg: Any) -> None:
        nonlocal py, c
        if event == "call":
            code = frame.f_code
            if ours(code):
                py += 1
                by[f"{os.path.relpath(code.co_filename, PKG)}:{code.co_name}"] += 1
        elif event == "c_call" and ours(frame.f_code):
            c += 1

    _profiled(prof, fn, n)
    return Counts(py / n, c / n, Counter({k: v / n for k, v in by.items()}))


def kept_blocks(fn: Callable[[], Any], n: int) -> float:
    """Memory blocks allocated by stepscope's code during ``n`` runs of ``fn`` and still held after them,
    per run (tracemalloc, attributed by the allocating line: a step's row until the flush takes it)."""
    import tracemalloc

    gc.collect()
    tracemalloc.start()
    try:
        for _ in range(n):
            fn()
        snap = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(True, PKG + "*")])
    finally:
        tracemalloc.stop()
    return sum(st.count for st in snap.statistics("filename")) / n


HOOKS = (("data loader", ("collect/torch/loader.py", "collect/core/batch.py")),
         ("forward", ("collect/torch/modules.py", "collect/torch/modelcall.py")),
         ("backward", ("collect/torch/hooks.py:backward",)),
         ("optimizer", ("collect/torch/hooks.py:pre", "collect/torch/hooks.py:post", "collect/torch/hooks.py:_caller")),
         ("phase nesting", ("collect/core/nesting.py",)),
         ("step row + buffers", ("collect/core/session.py", "collect/core/buffers.py", "collect/core/pystate.py")),
         ("per-step collectors", ("collect/torch/comm.py", "collect/torch/cuda.py", "collect/torch/flops.py",
                                  "collect/torch/window.py")))
"""Each hook and the files (or file:function) whose calls are its own."""


def by_hook(c: Counts) -> dict[str, float]:
    """Python calls per step of each hook of :data:`HOOKS` (``other``: the rest)."""
    out = dict.fromkeys([h for h, _ in HOOKS] + ["other"], 0.0)
    for fn, n in c.by_function.items():
        hook = next((h for h, keys in HOOKS if any(fn == k or fn.startswith(k + ":") for k in keys)), "other")
        out[hook] += n
    return out


def training_step_fn(items: int = 48, features: int = 20) -> tuple[Callable[[], None], Any]:
    """One step of a DataLoader (``items`` small items per batch) + Linear + SGD loop; the model."""
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(features, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    data = TensorDataset(torch.randn(items * 64, features), torch.randn(items * 64, 1))
    loader = DataLoader(data, batch_size=items)
    state: dict[str, Any] = {"it": iter(loader)}

    def step() -> None:
        try:
            x, y = next(state["it"])
        except StopIteration:
            state["it"] = iter(loader)
            x, y = next(state["it"])
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

    return step, model


def region_fn() -> Callable[[], None]:
    import stepscope

    region = stepscope.region

    def once() -> None:
        with region("x"):
            pass

    return once


def measure(steps: int = 200) -> dict[str, Any]:
    """Per-step counts of a training step and of a region, inside a session (hooks installed)."""
    import stepscope
    from stepscope.collect.core.session import current

    step, _model = training_step_fn()
    with tempfile.TemporaryDirectory() as store:
        os.environ.pop("STEPSCOPE_RUN_DIR", None)
        with stepscope.session(name="hot-path", store=store):
            assert current() is not None
            for _ in range(3):  # discovery: the first step finds the model
                step()
            calls = count_calls(step, steps)
            s = current()
            assert s is not None
            s.flush()
            step_blocks = kept_blocks(step, steps)
            once = region_fn()
            once()  # the thread's region stack is made at its first region
            region = count_calls(once, steps)
            s.flush()
            region_blocks = kept_blocks(once, steps)
    return {"step": calls, "step_blocks": step_blocks, "region": region,
            "region_blocks": region_blocks}


def count_all_calls(fn: Callable[[], Any], n: int) -> tuple[float, float]:
    """(Python calls, C calls) per run of ``fn`` made anywhere in the process (torch's files included)."""
    py = 0
    c = 0

    def prof(frame: Any, event: str, arg: Any) -> None:
        nonlocal py, c
        if event == "call":
            py += 1
        elif event == "c_call":
            c += 1

    _profiled(prof, fn, n)
    return py / n, c / n


def process_calls(script: str, steps: int = 64) -> tuple[float, float, float]:
    """Whole-process (Python calls, C calls) per step of a benchmarks/_loop.py script, hooked minus bare:
    stepscope's own calls plus those torch makes because a module has hooks (its slow ``_call_impl`` path);
    and the steps the session marked per counted step (1.0: the hooks ran, the compiled ones included, which
    no profile function sees). ``steps`` is one pass of the loader, so both sides start a pass equally often."""
    from benchmarks._loop import Parts

    import stepscope

    parts = Parts(script, batches=steps)
    for _ in range(steps):
        parts.step()
    bare = count_all_calls(parts.step, steps)
    with tempfile.TemporaryDirectory() as store:
        os.environ.pop("STEPSCOPE_RUN_DIR", None)
        with stepscope.session(name="process-calls", store=store) as s:
            assert s is not None
            for _ in range(steps):  # discovery and the FLOP meter's measured step are over
                parts.step()
            first = s.step_index
            hooked = count_all_calls(parts.step, steps)
            marked = (s.step_index - first) / steps
    return hooked[0] - bare[0], hooked[1] - bare[1], marked


def main() -> None:
    m = measure()
    s: Counts = m["step"]
    r: Counts = m["region"]
    print(f"step: {s.py_calls:.1f} stepscope Python calls, {s.c_calls:.1f} C calls, "
          f"{m['step_blocks']:.1f} blocks kept per step until the flush")
    for k, v in by_hook(s).items():
        print(f"    {v:6.1f}  {k}")
    print(f"region: {r.py_calls:.1f} Python calls, {r.c_calls:.1f} C calls, "
          f"{m['region_blocks']:.1f} blocks kept until the flush")


def _profiled(prof: Any, fn: Callable[[], Any], n: int) -> None:
    """``fn()`` ``n`` times with ``prof`` as the profile function (removed after, also on error)."""
    sys.setprofile(prof)
    try:
        for _ in range(n):
            fn()
    finally:
        sys.setprofile(None)


if __name__ == "__main__":
    main()
