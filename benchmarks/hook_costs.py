"""Per-hook cost of the zero-code hooks, each part with its own figure, and the whole step it adds up to.

Three tables, all in one process, all timed in *thread CPU time* (``time.thread_time_ns``: the time another
process takes the core away is not counted) as the minimum over many short repeats (what survives a busy
machine), the load average printed beside them:

1. **By hook**: each hook function called directly, around a no-op in place of the torch work it wraps
   (DataLoader ``__next__``, the model's forward pre + post hooks, the ``backward`` wrapper, the optimizer's
   pre + post hooks with the step mark), the extra work torch itself does for a module that has forward
   hooks, the background threads (the flusher that turns step rows into records, the system sampler) as
   their CPU time per step of a real run, and a region enter + exit. Target: the sum <= 10 µs, a region
   <= 0.5 µs.
2. **Whole step**: the three scripts of issue 20 (benchmarks/_loop.py: ``loader48``, ``linear``, ``many``)
   stepped bare and inside a session, alternating round after round; hooked minus bare, paired by round.
   Target <= 10 µs per step. On a loaded 2-core machine the bare step itself moves by several µs from one
   round to the next, so this is the check that table 1 misses nothing, not a precise figure.
3. **Counted** (does not move with load): Python and C calls per step of stepscope's code by hook, and of
   the whole process (hooked minus bare: this includes the calls torch makes because hooks exist);
   memory blocks kept per step until the flush. tests/collect/test_hot_path.py holds them to a budget.
4. **Cold caches**: the hooks of one step (the same calls as table 1, back to back) timed warm (a tight loop,
   as table 1), after a bare ``loader48`` step of another model (the caches a real step leaves them), and
   after a 64 MiB write (every cache level evicted: what a process sharing a loaded machine sees). Table 1
   is the warm figure; inside a real step each hook runs after torch's work has evicted its code and data,
   which is why table 2's hooked-minus-bare is larger than table 1's sum (docs/metrics.md, "Overhead").

    python benchmarks/hook_costs.py [--rounds 5] [--steps 40] [--only-hooks]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

STEP_TARGET_US = 10.0
REGION_TARGET_US = 0.5
ISSUE_SCRIPTS = ("loader48", "linear", "many")


def cpu_cost_us(fn: Callable[[], Any], number: int = 2000, repeat: int = 15) -> float:
    """µs of thread CPU time per call of ``fn``: the minimum over ``repeat`` runs of ``number`` calls."""
    best = None
    clock = time.thread_time_ns
    for _ in range(repeat):
        t0 = clock()
        for _ in range(number):
            fn()
        dt = clock() - t0
        best = dt if best is None or dt < best else best
    assert best is not None
    return best / number / 1e3


def loop_cost_us(body: Callable[[int], None], number: int = 20000, repeat: int = 15) -> float:
    """µs per iteration of ``body(number)`` (a function running its own loop of ``number`` iterations) minus an
    empty loop of the same length: the cost of a statement without the cost of a call around it."""
    def empty(n: int) -> None:
        for _ in range(n):
            pass

    best = {body: 10**18, empty: 10**18}
    for _ in range(repeat):
        for f in (body, empty):
            t0 = time.thread_time_ns()
            f(number)
            best[f] = min(best[f], time.thread_time_ns() - t0)
    return (best[body] - best[empty]) / number / 1e3


@contextmanager
def recording(name: str) -> Iterator[Any]:
    """An in-process session (every zero-code hook installed) in a throw-away store."""
    import stepscope
    from stepscope.collect import hooks
    from stepscope.collect.session import current

    os.environ.pop("STEPSCOPE_RUN_DIR", None)
    with tempfile.TemporaryDirectory() as store, stepscope.session(name=name, store=store):
        s = current()
        assert s is not None and hooks.installed() > 0, "hooks were not installed"
        yield s


def _cell(fn: Any, name: str) -> Any:
    """The closure cell of ``fn`` holding its free variable ``name``."""
    return fn.__closure__[fn.__code__.co_freevars.index(name)]


@contextmanager
def _swapped(fn: Any, name: str, value: Any) -> Iterator[None]:
    cell = _cell(fn, name)
    real = cell.cell_contents
    cell.cell_contents = value
    try:
        yield
    finally:
        cell.cell_contents = real


def hook_costs(rounds: int = 3) -> dict[str, float]:
    """µs per step of each hook, called directly around no-ops (see the module docstring), minimum over
    ``rounds``; plus, for each region implementation (compiled, Python), ``with region("x"): pass`` and, built
    once, ``with r: pass``."""
    out: dict[str, list[float]] = {}
    for _ in range(rounds):
        for k, v in {**_dispatch_cost(), **_direct_hook_costs()}.items():
            out.setdefault(k, []).append(v)
    return {k: min(v) for k, v in out.items()}


def _dispatch_cost() -> dict[str, float]:
    """What torch's ``Module.__call__`` costs more for a module that has a forward pre- and post-hook
    (no-ops here) than for one without: its slow path, taken for the watched model's call each step."""
    import torch

    ident = torch.nn.Identity()
    x = torch.randn(48, 20)

    def dispatch() -> None:
        ident(x)

    def no_pre(m: Any, a: Any) -> None:
        return None

    def no_post(m: Any, a: Any, o: Any) -> None:
        return None

    bare = cpu_cost_us(dispatch)
    handles = [ident.register_forward_pre_hook(no_pre), ident.register_forward_hook(no_post, always_call=True)]
    hooked = cpu_cost_us(dispatch)
    for h in handles:
        h.remove()
    return {"forward: torch's dispatch to module hooks": max(0.0, hooked - bare)}


def _direct_hook_costs() -> dict[str, float]:
    """stepscope's hook functions, called directly in a session around no-ops."""
    import torch
    from benchmarks._loop import Parts
    from torch.optim import optimizer as optim_mod
    from torch.utils.data import dataloader as dl

    from stepscope.collect import hooks

    out: dict[str, float] = {}
    with recording("hook-costs") as s:
        parts = Parts("loader48", batches=8)
        for _ in range(4):  # the first step finds the model; the FLOP meter measures step 2
            parts.step()
        batch = parts.next_batch()
        nxt = dl._BaseDataLoaderIter.__next__
        it = parts.it
        with _swapped(nxt, "orig_next", lambda self: batch):
            out["data loader: __next__ wrapper"] = cpu_cost_us(lambda: nxt(it))
        watch = hooks._WATCH["modules"]
        model, args = watch.models[0], (batch[0],)

        def forward_hooks() -> None:
            watch._pre(model, args)
            watch._post(model, args, None)

        out["forward: model pre + post hooks"] = cpu_cost_us(forward_hooks)
        backward = torch.autograd.backward
        with _swapped(backward, "orig", lambda *a, **k: None):
            out["backward: autograd.backward wrapper"] = cpu_cost_us(lambda: backward(None))
        pre = list(optim_mod._global_optimizer_pre_hooks.values())[-1]
        post = list(optim_mod._global_optimizer_post_hooks.values())[-1]
        marker = _cell(post, "marker").cell_contents

        def optimizer_hooks() -> None:
            pre(marker, (), {})
            post(marker, (), {})

        out["optimizer: pre + post hooks, step mark"] = cpu_cost_us(optimizer_hooks)
        # the region rows (millions) go to a deque of their own, not to the flusher's: the same append
        real = s.region_row
        for label, cls in region_impls():
            for key, once in ((f"region enter + exit ({label})", False),
                              (f"region enter + exit, built once ({label})", True)):
                s.region_row = deque().append
                out[key] = region_cost_us(cls, built_once=once)
        s.region_row = real
    return out


def region_impls() -> list[tuple[str, Any]]:
    """(label, class) of each region implementation here: the compiled one where built, the Python one."""
    from stepscope.collect import regions

    impls: list[tuple[str, Any]] = [("compiled", regions.CRegion)] if regions.CRegion is not None else []
    return [*impls, ("Python", regions.PyRegion)]


def region_cost_us(region: Any, *, built_once: bool = False) -> float:
    """µs of ``with region("x"): pass`` (or, built once, ``with r: pass``) beyond an empty loop."""
    r = region("y")

    def fresh(n: int) -> None:
        for _ in range(n):
            with region("x"):
                pass

    def reused(n: int) -> None:
        for _ in range(n):
            with r:
                pass

    return loop_cost_us(reused if built_once else fresh)


class ThreadClock:
    """CPU time of stepscope's background threads (flusher, sampler), read from their POSIX CPU clocks."""

    def __init__(self) -> None:
        self.threads = {t.name.removeprefix("stepscope-"): t for t in threading.enumerate()
                        if t.name.startswith("stepscope-") and t.ident is not None}
        self.start = self.read()

    def read(self) -> dict[str, int]:
        out = {}
        for name, t in self.threads.items():
            try:
                out[name] = time.clock_gettime_ns(time.pthread_getcpuclockid(t.ident))  # type: ignore[arg-type]
            except (OSError, AttributeError):
                pass
        return out

    def since_start_ns(self) -> dict[str, int]:
        now = self.read()
        return {k: now[k] - v for k, v in self.start.items() if k in now}


def whole_steps(scripts: tuple[str, ...], rounds: int, steps: int) -> dict[str, dict[str, Any]]:
    """Per script: bare and hooked step CPU µs per round (minimum over repeats of ``steps`` steps), and the
    background threads' CPU per step over the hooked rounds."""
    from benchmarks._loop import Parts

    parts = {k: Parts(k) for k in scripts}
    res: dict[str, dict[str, Any]] = {k: {"bare": [], "hooked": [], "bg_ns": {}, "bg_steps": 0} for k in scripts}
    for _ in range(rounds):
        for k, p in parts.items():
            res[k]["bare"].append(cpu_cost_us(p.step, number=steps, repeat=8))
        with recording("whole-step"):
            for p in parts.values():
                for _ in range(4):
                    p.step()
            for k, p in parts.items():
                clock = ThreadClock()
                res[k]["hooked"].append(cpu_cost_us(p.step, number=steps, repeat=8))
                for name, ns in clock.since_start_ns().items():
                    res[k]["bg_ns"][name] = res[k]["bg_ns"].get(name, 0) + ns
                res[k]["bg_steps"] += steps * 8
    return res


def background_us(seconds: float = 6.0, warmup_s: float = 1.5) -> tuple[dict[str, float], float]:
    """CPU µs per step of each background thread over ``seconds`` of ``linear`` steps (the fastest script:
    the most rows per second for the flusher), after ``warmup_s`` of steps: the threads' start-up (the
    sampler's imports, its first sample) is once per run, not per step, and is left out; and the steps per
    second it ran at."""
    from benchmarks._loop import Parts

    p = Parts("linear")
    with recording("background"):
        t_end = time.perf_counter() + warmup_s
        while time.perf_counter() < t_end:
            p.step()
        clock = ThreadClock()
        n = 0
        t0 = time.perf_counter()
        t_end = t0 + seconds
        while time.perf_counter() < t_end:
            p.step()
            n += 1
        spent = clock.since_start_ns()
        elapsed = time.perf_counter() - t0
    return {k: v / n / 1e3 for k, v in spent.items() if k in ("flush", "sampler")}, n / elapsed


def print_background_counts() -> None:
    """The background threads' work counted (benchmarks/_background.py; does not move with load)."""
    from benchmarks._background import flush_calls, sample_calls

    sample, _ = sample_calls()
    few, many = flush_calls(10), flush_calls(5000)
    print(f"\nbackground work, counted: a system sample {sample.py:.0f} Python, {sample.c:.0f} C and "
          f"{sample.os:.0f} file/OS calls; a flush of 10 / 5,000 step rows {few.py:.0f} / {many.py:.0f} Python, "
          f"{few.c:.0f} / {many.c:.0f} C and {few.os:.0f} / {many.os:.0f} file/OS calls")


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    return s[len(s) // 2] if len(s) % 2 else (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2


def print_hook_table(costs: dict[str, float], background: dict[str, float], rate: float) -> float:
    """Table 1; returns the per-step total."""
    print(f"{'per step, by hook':<48}{'µs':>8}   target")
    total = 0.0
    for k, v in costs.items():
        if not k.startswith("region"):
            total += v
            print(f"{k:<48}{v:>8.2f}")
    for name, v in background.items():
        total += v
        print(f"{name + ' thread (its CPU time per step)':<48}{v:>8.2f}")
    print(f"{'total per step':<48}{total:>8.2f}   <= {STEP_TARGET_US:g} µs  "
          f"{'met' if total <= STEP_TARGET_US else 'NOT MET'}")
    per_s = ", ".join(f"{name} {v * rate / 1e3:.2f} ms" for name, v in background.items())
    print(f"  (background threads at {rate:,.0f} steps/s, CPU per second of run: {per_s}; the sampler's share "
          "of a step shrinks as steps get slower)")
    from stepscope.collect import regions

    in_use = "compiled" if regions.region is regions.CRegion else "Python"
    print(f"  region: {in_use} in use ({regions.ENV_PURE}=1 forces the Python one)")
    for k in (k for k in costs if k.startswith("region")):
        v = costs[k]
        print(f"{k:<48}{v:>8.2f}   <= {REGION_TARGET_US:g} µs  {'met' if v <= REGION_TARGET_US else 'NOT MET'}")
    return total


def print_whole_steps(res: dict[str, dict[str, Any]]) -> None:
    print(f"\n{'whole step (issue 20 scripts)':<24}{'bare':>10}{'hooked':>10}{'cost':>9}{'range':>18}"
          f"{'+ threads':>11}   target")
    for k, r in res.items():
        diffs = [h - b for b, h in zip(r["bare"], r["hooked"], strict=True)]
        med = _median(diffs)
        bg = sum(r["bg_ns"].values()) / max(r["bg_steps"], 1) / 1e3
        print(f"{k:<24}{min(r['bare']):>8.1f}µs{min(r['hooked']):>8.1f}µs{med:>7.2f}µs"
              f"{min(diffs):>8.1f} to {max(diffs):>5.1f}{bg:>9.2f}µs   <= {STEP_TARGET_US:g} µs")
    print("  cost: hooked minus bare thread CPU per step, paired by round (median; range over rounds);"
          "\n  + threads: the flusher's and sampler's CPU per step in those rounds")


def cold_hook_costs(n: int = 400) -> dict[str, float]:
    """Table 4: µs of thread CPU time for one step's hooks (table 1's calls, back to back), median over ``n``,
    warm, after a bare step of another model, and after a 64 MiB write; the clock read subtracted."""
    import torch
    from benchmarks._loop import Parts
    from torch.optim import optimizer as optim_mod
    from torch.utils.data import dataloader as dl

    from stepscope.collect import hooks

    clock = time.thread_time_ns

    def median_us(fn: Callable[[], Any], evict: Callable[[], Any] | None) -> float:
        ts = []
        for _ in range(n):
            if evict is not None:
                evict()
            t0 = clock()
            fn()
            ts.append(clock() - t0)
        return _median([t / 1e3 for t in ts])

    out: dict[str, float] = {}
    with recording("cold-hooks") as s:
        parts = Parts("loader48", batches=8)
        for _ in range(4):
            parts.step()
        other = Parts("loader48")  # its model is not watched: its step only evicts
        batch = parts.next_batch()
        nxt, it = dl._BaseDataLoaderIter.__next__, parts.it
        watch = hooks._WATCH["modules"]
        model, args = watch.models[0], (batch[0],)
        backward = torch.autograd.backward
        pre = list(optim_mod._global_optimizer_pre_hooks.values())[-1]
        post = list(optim_mod._global_optimizer_post_hooks.values())[-1]
        marker = _cell(post, "marker").cell_contents
        buf = torch.empty(64 << 20, dtype=torch.uint8)

        def one_step_of_hooks() -> None:
            nxt(it)
            watch._pre(model, args)
            watch._post(model, args, None)
            backward(None)
            pre(marker, (), {})
            post(marker, (), {})

        with _swapped(nxt, "orig_next", lambda self: batch), _swapped(backward, "orig", lambda *a, **k: None):
            read = median_us(lambda: None, None)
            out["warm (tight loop, as table 1)"] = median_us(one_step_of_hooks, None) - read
            out["after a bare loader48 step"] = median_us(one_step_of_hooks, other.step) - read
            out["after a 64 MiB write (all caches cold)"] = median_us(one_step_of_hooks, lambda: buf.fill_(1)) - read
        s.buffers.drain()
    return out


def print_cold_hook_costs(costs: dict[str, float]) -> None:
    print(f"\n{'one step of hooks, by cache state':<48}{'µs':>8}")
    for k, v in costs.items():
        print(f"{k:<48}{v:>8.2f}")


def print_call_counts() -> None:
    """Table 3 (benchmarks/_hotpath.py)."""
    from benchmarks._hotpath import by_hook, measure, process_calls

    m = measure()
    step = m["step"]
    print(f"\nstepscope's own work per step (does not move with machine load): {step.py_calls:.1f} Python calls, "
          f"{step.c_calls:.1f} C calls, {m['step_blocks']:.1f} memory blocks kept until the flush")
    print(f"{'hook':<24}{'Python calls':>14}")
    for hook, n in by_hook(step).items():
        print(f"{hook:<24}{n:>14.1f}")
    from stepscope.collect import regions

    r = m["region"]
    compiled = regions.region is regions.CRegion
    print(f"region enter+exit ({'compiled' if compiled else 'Python'}): {r.py_calls:.1f} Python calls, "
          f"{r.c_calls:.1f} C calls, {m['region_blocks']:.1f} blocks kept until the flush"
          + (" (the compiled region's work is C called from C: neither counter sees it)" if compiled else ""))
    print("\nwhole process, hooked minus bare (torch's own extra calls for hooked modules included):")
    for script in ISSUE_SCRIPTS:
        py, c = process_calls(script)
        print(f"  {script:<10}{py:>6.1f} Python calls, {c:>6.1f} C calls per step")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=40, help="steps per timed repeat of a whole-step round")
    p.add_argument("--only-hooks", action="store_true", help="table 1 and the counts only (no whole steps)")
    args = p.parse_args()
    import torch

    torch.set_num_threads(1)
    print(f"load average at start: {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)\n")
    costs = hook_costs(rounds=max(1, args.rounds // 2))
    background, rate = background_us()
    print_hook_table(costs, background, rate)
    if not args.only_hooks:
        print_whole_steps(whole_steps(ISSUE_SCRIPTS, args.rounds, args.steps))
    print_call_counts()
    print_background_counts()
    print_cold_hook_costs(cold_hook_costs())
    print(f"\nload average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
