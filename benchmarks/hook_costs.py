"""Per-hook cost of the zero-code hooks, each part with its own figure, and the whole step it adds up to.

Three tables, all in one process, all timed in *thread CPU time* (``time.thread_time_ns``: the time another
process takes the core away is not counted) as the minimum over many short repeats (what survives a busy
machine), the load average printed beside them:

1. **By hook**: each hook function called directly, around a no-op in place of the torch work it wraps
   (DataLoader ``__next__``, the ``backward`` wrapper, the optimizer's step timer with the step mark), the
   watched model's call timed from its call slot (collect/torch/modelcall.py: what an ``Identity`` call costs
   more with it than without), the background threads (the flusher that turns step rows into records, the
   system sampler) as their CPU time per step of a real run, and a region enter + exit. Target: the sum
   <= 10 µs, a region <= 0.5 µs.
2. **Whole step**: the three scripts of issue 20 (benchmarks/_loop.py: ``loader48``, ``linear``, ``many``) in
   pairs of long blocks (``--block-s`` seconds of steps each, ``--pairs`` pairs), bare and hooked, the order
   alternating, the training thread's CPU time of every step. Twice: *hooks on - off* inside one running
   session (the hooks removed for the bare blocks, installed again for the hooked ones: what the hooks cost
   in a real step, the session's threads alike in both arms), and *stepscope on - off* (no stepscope
   against a fresh session per block: what a user pays, the threads included). The figure is the median
   over pairs of hooked minus bare, with its sign-test interval (distribution-free, >= 95%). Target
   <= 10 µs per step. On a loaded 2-core machine the bare step moves by tens of µs between blocks: the
   interval says what the run can resolve.
2b. **Attribution** (``--attribute``, alone): arms inside one running session, one block each per round, the order
   rotated: ``bare`` (no hook), ``all`` (every per-step hook), ``-PART`` (all but one part: ``forward``, the
   model's call timed from its call slot; ``backward``; ``loader``; ``optimizer``; ``-PART-PART`` leaves out
   several; ``+PART`` installs that part alone). Printed: each arm minus bare and what each left-out part costs
   (all minus the arm); paired by round, sign-test intervals. ``--processes N`` runs it in N fresh processes and
   prints each arm minus bare as the median over processes: one process's figure moves by about ±2 µs with where
   its code and data happen to lie in the caches.
3. **Counted** (does not move with load): Python and C calls per step of stepscope's code by hook, and of
   the whole process (hooked minus bare: this includes the calls torch makes because hooks exist);
   memory blocks kept per step until the flush. tests/collect/core/test_hot_path.py holds them to a budget.
4. **Cold caches** (``--only-cold`` alone): each hook alone (the same calls as table 1) and the four back to
   back, timed warm (a tight loop, as table 1), after a bare step of the ``many`` script (the caches a real
   step leaves them) and after a 64 MiB write, beside two floors: the harness (a clock read and a lambda)
   and a call of a small C function, both in the same cache state; and the model's ``training`` flag read alone
   (where the forward's end read it) and right after its call slot (where its entry reads it: Python has just read
   the slot to call the model). Table 1 is the warm figure; inside a real
   step each hook runs after torch's work has evicted its code and data, which is why table 2's
   hooked-minus-bare is larger than table 1's sum (benchmarks/RESULTS.md, "seventh change").

    python benchmarks/hook_costs.py [--rounds 5] [--pairs 24] [--block-s 0.4] [--scripts loader48,linear,many]
                                    [--only-hooks | --only-steps | --only-cold | --attribute [ARMS]]
    python benchmarks/hook_costs.py --attribute bare,all,-loader --processes 6 --pairs 12 --scripts loader48

The hooks' cost on a realistic step (a small CNN and a real DataLoader): benchmarks/step_overhead.py.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
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
    from stepscope.collect.core import undo as undo_list
    from stepscope.collect.core.session import current

    os.environ.pop("STEPSCOPE_RUN_DIR", None)
    with tempfile.TemporaryDirectory() as store, stepscope.session(name=name, store=store):
        s = current()
        assert s is not None and undo_list.installed() > 0, "hooks were not installed"
        yield s


def _cell(fn: Any, name: str) -> Any:
    """The closure cell of ``fn`` holding its free variable ``name``."""
    return fn.__closure__[fn.__code__.co_freevars.index(name)]


@contextmanager
def _swapped(fn: Any, name: str, value: Any) -> Iterator[None]:
    """``fn``'s free variable ``name`` set to ``value`` inside."""
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
        for k, v in _direct_hook_costs().items():
            out.setdefault(k, []).append(v)
    return {k: min(v) for k, v in out.items()}


def _direct_hook_costs() -> dict[str, float]:
    """stepscope's hook functions, called directly in a session around no-ops; the forward timing as torch calls
    it, on an ``Identity`` (what the watched model's call costs more than a bare one)."""
    import torch
    from benchmarks._loop import Parts
    from torch.utils.data import dataloader as dl

    from stepscope.collect.torch import hooks
    from stepscope.collect.torch.modelcall import CallSlots

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
        ident, x = torch.nn.Identity(), batch[0]  # a module call as cheap as can be, with and without the timing
        bare_call = cpu_cost_us(lambda: ident(x))
        slots = CallSlots(watch._model_hooks()[2])
        slots.install(ident)
        out["forward: the model's timed call slot"] = max(0.0, cpu_cost_us(lambda: ident(x)) - bare_call)
        slots.remove()
        backward = torch.autograd.backward
        with _swapped(backward, "orig", _noop):
            out["backward: autograd.backward wrapper"] = cpu_cost_us(lambda: backward(None))
        step = optimizer_step(parts.opt)
        out["optimizer: step hooks + step mark"] = cpu_cost_us(step)
        # the region rows (millions) go to a deque of their own, not to the flusher's: the same append
        real = s.region_row
        for label, cls in region_impls():
            for key, once in ((f"region enter + exit ({label})", False),
                              (f"region enter + exit, built once ({label})", True)):
                s.region_row = deque().append
                out[key] = region_cost_us(cls, built_once=once)
        s.region_row = real
    return out


def optimizer_step(opt: Any) -> Callable[[], None]:
    """stepscope's optimizer step hooks (the last global pre- and post-hook registered) called as torch's step
    wrapper calls them, around no step, for ``opt`` (the optimizer that marks the steps)."""
    from torch.optim import optimizer as optim

    pre = list(optim._global_optimizer_pre_hooks.values())[-1]
    post = list(optim._global_optimizer_post_hooks.values())[-1]

    def step() -> None:
        pre(opt, (opt,), {})
        post(opt, (opt,), {})

    return step


def _noop(*args: Any, **kwargs: Any) -> None:
    return None


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


def whole_steps(scripts: tuple[str, ...], pairs: int, block_s: float, warm: int = 8,
                *, toggle: bool = False) -> dict[str, dict[str, Any]]:
    """Table 2: per script, ``pairs`` pairs of long blocks, one bare and one hooked, the order alternating
    (bare first, then hooked first); per block the training thread's CPU time of each step. A block is
    about ``block_s`` seconds of bare steps (at least 40).

    Bare is no stepscope at all and hooked a fresh session per block (what a user pays, the background
    threads included) or, with ``toggle``, both arms inside one running session: bare with every hook
    removed, hooked with the per-step hooks installed again (loader, models, backward, optimizer): the
    hooks' cost in a real step, the session's threads running alike in both arms.

    Returns per script the per-block means and medians (µs per step) of each arm, the background threads'
    CPU per hooked step, the steps per block and the load average before and after."""
    from benchmarks._loop import Parts

    clock = time.thread_time_ns
    res: dict[str, dict[str, Any]] = {}
    with recording("hook-toggle") if toggle else _nothing() as s:
        for script in scripts:
            p = Parts(script)
            for _ in range(warm):  # in a toggle session: the model found, the FLOP meter's step measured
                p.step()
            t0 = clock()
            for _ in range(20):
                p.step()
            n = max(40, round(block_s / ((clock() - t0) / 20 / 1e9)))
            r: dict[str, Any] = {"bare": [], "hooked": [], "bare_med": [], "hooked_med": [], "bg_ns": 0,
                                 "bg_steps": 0, "steps": n, "load": [os.getloadavg()[0]]}
            for i in range(pairs):
                for arm in (("bare", "hooked") if i % 2 == 0 else ("hooked", "bare")):
                    if toggle:
                        from stepscope.collect.core import undo as undo_list

                        undo_list.remove_all()
                        if arm == "hooked":
                            install_step_hooks(s)
                        ts = _block(p, n, warm)
                    elif arm == "bare":
                        ts = _block(p, n, warm)
                    else:
                        with recording("whole-step"):
                            bg = ThreadClock()
                            ts = _block(p, n, warm)
                            r["bg_ns"] += sum(bg.since_start_ns().values())
                            r["bg_steps"] += n + warm
                    r[arm].append(sum(ts) / n / 1e3)
                    r[arm + "_med"].append(_median([t / 1e3 for t in ts]))
            r["load"].append(os.getloadavg()[0])
            res[script] = r
    return res


ATTRIBUTION_ARMS = ("bare", "all", "-forward", "-backward", "-loader", "-optimizer")
"""Table 2b's default arms: no hook; every per-step hook; every one but the named part (``-forward``: the
model's call timed from its call slot)."""


def _arm_spec(arm: str) -> tuple[str, ...] | None:
    """The parts an arm leaves out, or None for no hook at all."""
    name = arm
    if name == "bare":
        return None
    if name == "all":
        return ()
    if name.startswith("+"):  # only these parts: what each costs alone, paying the step's shared cold lines
        kept = tuple(name.removeprefix("+").split("+"))
        left = tuple(x for x in STEP_HOOKS if x not in kept) if all(x in STEP_HOOKS for x in kept) else ("?",)
    else:
        left = tuple(name.removeprefix("-").split("-")) if name.startswith("-") else ()
    if not left or any(x not in STEP_HOOKS for x in left):
        raise SystemExit(f"unknown arm {arm!r}: bare, all, -PART[-PART] or +PART[+PART] (PART: "
                         f"{', '.join(STEP_HOOKS)})")
    return left


def attribution(scripts: tuple[str, ...], rounds: int, block_s: float, arms: tuple[str, ...],
                warm: int = 8) -> dict[str, dict[str, Any]]:
    """Table 2b: per script, ``rounds`` rounds of one block per arm inside one running session, the arms'
    order rotated each round (each arm in each position equally often); per block the training thread's CPU
    per step (mean and median). Returns per script: arm -> per-round block means / medians, the steps per
    block and the load average before and after."""
    from benchmarks._loop import Parts

    from stepscope.collect.core import undo as undo_list

    specs = {a: _arm_spec(a) for a in arms}
    clock = time.thread_time_ns
    res: dict[str, dict[str, Any]] = {}
    with recording("hook-attribution") as s:
        for script in scripts:
            p = Parts(script)
            for _ in range(warm):
                p.step()
            t0 = clock()
            for _ in range(20):
                p.step()
            n = max(40, round(block_s / ((clock() - t0) / 20 / 1e9)))
            r: dict[str, Any] = {"mean": {a: [] for a in arms}, "med": {a: [] for a in arms}, "steps": n,
                                 "load": [os.getloadavg()[0]]}
            for i in range(rounds):
                k = i % len(arms)
                for arm in arms[k:] + arms[:k]:
                    left = specs[arm]
                    undo_list.remove_all()
                    if left is not None:
                        install_step_hooks(s, p, left)
                    ts = _block(p, n, warm)
                    r["mean"][arm].append(sum(ts) / n / 1e3)
                    r["med"][arm].append(_median([t / 1e3 for t in ts]))
            undo_list.remove_all()
            r["load"].append(os.getloadavg()[0])
            res[script] = r
    return res


def attribution_processes(scripts: tuple[str, ...], rounds: int, block_s: float, arms: tuple[str, ...],
                          processes: int) -> dict[str, dict[str, list[float]]]:
    """Table 2b in ``processes`` fresh processes, one after another: per script and arm (not bare), each process's
    median over rounds of the arm minus bare (block means). Each process lays out its code and data anew (the
    hooks' lines fall in other cache sets), which moves one process's figure by about ±2 µs: the median over
    processes is the figure that survives that."""
    out: dict[str, dict[str, list[float]]] = {sc: {a: [] for a in arms if a != "bare"} for sc in scripts}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--attribute", ",".join(arms), "--pairs", str(rounds),
           "--block-s", str(block_s), "--scripts", ",".join(scripts), "--json"]
    for i in range(processes):
        for sc, figures in process_figures(_child_json(cmd, i, processes)).items():
            for arm, v in figures.items():
                out[sc][arm].append(v)
        print(f"  process {i + 1}/{processes}: " + "; ".join(
            f"{sc} {arm} {v[-1]:+.1f}" for sc, arms_ in out.items() for arm, v in arms_.items()), flush=True)
    return out


def _child_json(cmd: list[str], i: int, processes: int) -> Any:
    """The JSON line a child of ``--processes`` (process ``i``) ends with; a failed child ends the run in one line."""
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise SystemExit(f"process {i + 1} of {processes} failed (exit {done.returncode}): {tail}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def over_processes(v: list[float]) -> tuple[float, float, float]:
    """(low, high, coverage) of the median over processes: the sign-test interval from 6 processes on, their
    range (coverage 0) below that."""
    return sign_interval(v) if len(v) >= 6 else (min(v), max(v), 0.0)


def process_figures(res: dict[str, dict[str, Any]]) -> dict[str, dict[str, float]]:
    """One process's table 2b (``attribution``'s result) as its figure per script and arm: the median over rounds
    of the arm's block mean minus bare's, paired by round (``_paired``'s first figure)."""
    return {sc: {arm: _paired(r, arm, "bare")[0] for arm in r["mean"] if arm != "bare"} for sc, r in res.items()}


def print_attribution_processes(res: dict[str, dict[str, list[float]]]) -> None:
    print(f"\n{'attribution, over processes':<30}{'median':>9}  {'95% sign-test interval':<24}per process")
    for sc, arms_ in res.items():
        for arm, v in arms_.items():
            lo, hi, cover = over_processes(v)
            ci = f"{lo:+.1f} to {hi:+.1f}" + ("" if cover else " (range)")
            print(f"{sc + ' ' + arm + ' - bare':<30}{_median(v):>+8.1f}µs  {ci:<24}"
                  + " ".join(f"{x:+.1f}" for x in v))
    print("  µs of training-thread CPU per step; each process: the median over its rounds of the paired\n"
          "  difference of block means; the interval is over processes (>= 6 for 95%; fewer: their range).")


def print_attribution(res: dict[str, dict[str, Any]]) -> None:
    """Table 2b: each arm minus bare, and what each left-out part costs (all minus the arm), paired by round."""
    print(f"\n{'attribution, one session':<26}{'steps':>6}{'rounds':>7}{'load':>10}")
    for script, r in res.items():
        arms = list(r["mean"])
        print(f"{script:<26}{r['steps']:>6}{len(r['mean'][arms[0]]):>7}{r['load'][0]:>5.1f}-{r['load'][1]:.1f}")
        base = "bare" if "bare" in arms else None
        for arm in arms:
            if arm == base:
                print(f"  {'bare':<24}{_median(r['mean'][arm]):>8.1f}µs a step (median of block means)")
                continue
            cols = []
            if base is not None:
                cols.append(("- bare", _paired(r, arm, base)))
            if arm.startswith("-") and "all" in arms:
                cols.append(("all - this (the part's cost)", _paired(r, "all", arm)))
            text = "   ".join(f"{label} {m:+6.1f} ({lo:+.1f} to {hi:+.1f}) / {mm:+6.1f} ({mlo:+.1f} to {mhi:+.1f})"
                               for label, (m, lo, hi, mm, mlo, mhi) in cols)
            print(f"  {arm:<24}{text}")
    print("  µs of training-thread CPU per step: median over rounds of the paired difference of block means,\n"
          "  then of block medians, each with its sign-test interval (>= 95%). Arms: bare = no hook; all = the\n"
          "  per-step hooks (loader, forward timing, backward, optimizer); -PART = all but PART.")


def _paired(r: dict[str, Any], a: str, b: str) -> tuple[float, float, float, float, float, float]:
    """(median, low, high) of a - b over rounds, by block means and by block medians."""
    d = [x - y for x, y in zip(r["mean"][a], r["mean"][b], strict=True)]
    m = [x - y for x, y in zip(r["med"][a], r["med"][b], strict=True)]
    lo, hi, _ = sign_interval(d)
    mlo, mhi, _ = sign_interval(m)
    return _median(d), lo, hi, _median(m), mlo, mhi


@contextmanager
def _nothing() -> Iterator[None]:
    yield None


STEP_HOOKS = ("loader", "forward", "backward", "optimizer")
"""The hooks that run every step, each a part that an attribution arm can leave out."""


def install_step_hooks(session: Any, parts: Any = None, leave_out: tuple[str, ...] = ()) -> None:
    """The hooks that run every step (DataLoader, models, backward, optimizer), as the session installs them.
    ``leave_out``: parts of :data:`STEP_HOOKS` removed again after two steps of ``parts`` (the first step finds
    the model, which needs the optimizer's timer), the others left as they are."""
    from stepscope.collect.core import undo as undo_list
    from stepscope.collect.torch import hooks

    installs: dict[str, Callable[[], None]] = {
        "optimizer": lambda: hooks._install_optimizer_hooks(session),
        "backward": lambda: hooks._install_backward_hook(session),
        "loader": lambda: hooks._install_part("torch.loader", "install_loader_hooks")(session, undo_list.UNDO),
        "forward": lambda: hooks._install_modules(session),
    }
    undo: dict[str, list[Callable[[], None]]] = {}
    for name, install in installs.items():
        n0 = len(undo_list.UNDO)
        install()
        undo[name] = undo_list.UNDO[n0:]
    if not leave_out:
        return
    for _ in range(2):
        parts.step()
    for name in leave_out:
        for u in undo[name]:
            undo_list.UNDO.remove(u)
            u()


def _block(p: Any, n: int, warm: int) -> list[int]:
    """Thread CPU ns of each of ``n`` steps of ``p`` after ``warm`` untimed ones and a full collection."""
    import gc

    clock = time.thread_time_ns
    p.it = None  # every block starts a pass of the loader (its iterator made inside the block's arm)
    for _ in range(warm):  # the first hooked step finds the model; the FLOP meter measures one
        p.step()
    gc.collect()
    ts = []
    for _ in range(n):
        t = clock()
        p.step()
        ts.append(clock() - t)
    return ts


def sign_interval(xs: list[float], level: float = 0.95) -> tuple[float, float, float]:
    """(low, high, coverage): the distribution-free interval for the median of ``xs`` from the sign test:
    order statistics k and n + 1 - k (1-based), k the largest whose coverage 1 - 2 P(B <= k - 1) with
    B ~ Binomial(n, 1/2) is still at least ``level``. Needs n >= 6 for 95%."""
    s = sorted(xs)
    n = len(s)
    best = None
    total, tail, c = 2**n, 0, 1  # c: comb(n, k - 1); tail: the sum of comb(n, j) for j < k
    for k in range(1, n // 2 + 1):
        tail += c
        cover = 1 - 2 * tail / total
        if cover < level:  # the coverage only falls as k grows
            break
        best = (k, cover)
        c = c * (n - k + 1) // k
    if best is None:
        return s[0], s[-1], 1 - 2 / 2**n
    k, cover = best
    return s[k - 1], s[n - k], cover


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
    print(f"{'per step, by hook':<56}{'µs':>8}   target")
    total = 0.0
    for k, v in costs.items():
        if not k.startswith("region"):
            total += v
            print(f"{k:<56}{v:>8.2f}")
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


def print_whole_steps(res: dict[str, dict[str, Any]], *, toggle: bool = False) -> None:
    title = "hooks on - off, one session" if toggle else "stepscope on - off"
    print(f"\n{title:<30}{'steps':>6}{'pairs':>6}{'bare':>8}{'block means (95% CI)':>28}"
          f"{'block medians (95% CI)':>28}{'+ threads':>11}{'load':>10}")
    for k, r in res.items():
        diffs = [h - b for b, h in zip(r["bare"], r["hooked"], strict=True)]
        meds = [h - b for b, h in zip(r["bare_med"], r["hooked_med"], strict=True)]
        lo, hi, _ = sign_interval(diffs)
        mlo, mhi, _ = sign_interval(meds)
        bare = _median(r["bare"])
        bg = f"{r['bg_ns'] / r['bg_steps'] / 1e3:9.2f}µs" if r["bg_steps"] else f"{'':>11}"
        print(f"{k:<30}{r['steps']:>6}{len(diffs):>6}{bare:>6.0f}µs{_median(diffs):>+8.1f}µs ({lo:+.1f} to {hi:+.1f})"
              f"{_median(meds):>+9.1f}µs ({mlo:+.1f} to {mhi:+.1f}){bg}{r['load'][0]:>5.1f}-{r['load'][1]:.1f}")
    if toggle:
        print("  both arms in one running session: bare with every hook removed, hooked with the per-step hooks\n"
              "  installed again (the session's threads run alike in both)")
    else:
        print("  bare: no stepscope; hooked: a fresh session per block (its threads included)")
    print("  the training thread's CPU time per step (thread_time_ns), hooked minus bare paired by block (the\n"
          "  order alternating): median over pairs of the blocks' mean steps, and of their median steps (robust\n"
          "  to a preempted step), each with its sign-test interval (>= 95% coverage); + threads: the flusher's\n"
          f"  and sampler's CPU per hooked step. Target <= {STEP_TARGET_US:g} µs.")


COLD_FLOORS = ("clock read + a Python lambda", "+ a C function call")
"""Table 4's floors: what the harness costs in the same cache state (``lambda: None``), and a call of a small C
function (``math.floor``) in its place: what any hook, however little it does, pays for being called cold."""
MODE_READS = ("model.training", "model._compiled_call_impl", "  + model.training")
"""Table 4's reads of the watched model's ``training`` flag: alone (as the forward's end read it, after the model's
work), and right after its call slot, beside the slot read alone (as the forward's entry reads it: Python has just
read the slot to call it)."""
COLD_STATE = "after a many step"
"""Table 4's cache state of a real step, the one its summary line reads."""


def cold_hook_costs(n: int = 400) -> dict[str, dict[str, float]]:
    """Table 4: µs of thread CPU time, median over ``n`` calls, of each hook alone (table 1's calls), of the four
    back to back (one step of hooks) and of the floors (:data:`COLD_FLOORS`), in three cache states: warm (a tight
    loop, as table 1), after a bare step of the ``many`` script (201 modules: what a real step leaves the caches)
    and after a 64 MiB write (every cache level the write passes through evicted). The evicting step goes
    through no hooked function (its model is not watched, its gradients come from ``torch.autograd.grad``, its
    update is in place), so it evicts as a real step does instead of running the swapped no-ops."""
    import math

    import torch
    from benchmarks._loop import Parts
    from torch.utils.data import dataloader as dl

    from stepscope.collect.torch import hooks

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

    out: dict[str, dict[str, float]] = {}
    with recording("cold-hooks") as s:
        parts = Parts("loader48", batches=8)
        for _ in range(4):
            parts.step()
        other = Parts("many")
        x, y = torch.randn(32, 16), torch.randn(32, 1)
        params = list(other.model.parameters())

        def many_step() -> None:
            loss = torch.nn.functional.mse_loss(other.model(x), y)
            grads = torch.autograd.grad(loss, params)
            with torch.no_grad():
                for q, g in zip(params, grads, strict=True):
                    q.sub_(g, alpha=1e-3)

        batch = parts.next_batch()
        nxt, it = dl._BaseDataLoaderIter.__next__, parts.it
        watch = hooks._WATCH["modules"]
        model, args = watch.models[0], (batch[0],)
        slot = watch._hooks[2](model, _noop)  # what the model's slot gets, as installed, around a no-op
        backward = torch.autograd.backward
        step = optimizer_step(parts.opt)
        buf = torch.empty(64 << 20, dtype=torch.uint8)

        def one_step_of_hooks() -> None:
            nxt(it)
            slot(*args)
            backward(None)
            step()

        calls: dict[str, Callable[[], Any]] = {
            COLD_FLOORS[0]: lambda: None, COLD_FLOORS[1]: lambda: math.floor(1.5),
            "data loader": lambda: nxt(it), "forward": lambda: slot(*args), "backward": lambda: backward(None),
            "optimizer + step mark": step, "one step of hooks": one_step_of_hooks,
            MODE_READS[0]: lambda: model.training, MODE_READS[1]: lambda: model._compiled_call_impl,
            MODE_READS[2]: lambda: (model._compiled_call_impl, model.training)}
        states: dict[str, Callable[[], Any] | None] = {
            "warm": None, COLD_STATE: many_step, "after a 64 MiB write": lambda: buf.fill_(1)}
        with _swapped(nxt, "orig_next", lambda self: batch), _swapped(backward, "orig", lambda *a, **k: None):
            read = median_us(lambda: None, None)  # the clock read itself, warm
            for state, evict in states.items():
                out[state] = {name: median_us(fn, evict) - read for name, fn in calls.items()}
        s.buffers.drain()
    return out


def print_cold_hook_costs(costs: dict[str, dict[str, float]]) -> None:
    """Table 4: a row per call, a column per cache state; then each hook above the C-call floor."""
    states = list(costs)
    print(f"\n{'cold caches: µs of one call (median)':<40}" + "".join(f"{s:>22}" for s in states))
    for name in costs[states[0]]:
        print(f"{name:<40}" + "".join(f"{costs[s][name]:>22.2f}" for s in states))
    cold = costs[COLD_STATE]
    floor = cold[COLD_FLOORS[1]]
    hooks_only = [k for k in cold if k not in (*COLD_FLOORS, "one step of hooks", *MODE_READS)]
    above = ", ".join(f"{k} {cold[k] - floor:+.2f}" for k in hooks_only)
    print(f"  {COLD_STATE}, above a cold C call: {above}; the four hooks' floor (4 cold C calls above the\n"
          f"  harness) {4 * (floor - cold[COLD_FLOORS[0]]):.2f} µs. What each hook costs in a real step is its cold "
          "figure\n  less the harness (the first row): benchmarks/RESULTS.md, 'seventh change'.")
    alone = cold[MODE_READS[0]] - cold[COLD_FLOORS[0]]
    after = cold[MODE_READS[2]] - cold[MODE_READS[1]]
    print(f"  the model's training flag {COLD_STATE}: {alone:+.2f} µs read alone (as the forward's end read it), "
          f"{after:+.2f}\n  right after the model's call slot (as the forward's entry reads it): "
          "benchmarks/RESULTS.md, 'thirteenth change'")


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
        py, c, _ = process_calls(script)
        print(f"  {script:<10}{py:>6.1f} Python calls, {c:>6.1f} C calls per step")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=5, help="repeats of table 1 (minimum over half of them)")
    p.add_argument("--pairs", type=int, default=24, help="bare / hooked block pairs per script (table 2)")
    p.add_argument("--block-s", type=float, default=0.4, help="seconds of bare steps per block (table 2)")
    p.add_argument("--scripts", default=",".join(ISSUE_SCRIPTS), help="table 2's scripts (comma list)")
    p.add_argument("--only-hooks", action="store_true", help="tables 1, 3 and 4 only (no whole steps)")
    p.add_argument("--only-steps", action="store_true", help="table 2 only")
    p.add_argument("--only-cold", action="store_true", help="table 4 only (each hook with cold caches)")
    p.add_argument("--processes", type=int, default=0, metavar="N",
                   help="with --attribute: run it in N fresh processes and print the median over them")
    p.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # a child of --processes
    p.add_argument("--attribute", nargs="?", const=",".join(ATTRIBUTION_ARMS), metavar="ARMS",
                   help="table 2b only: arms in one session, each hook left out in turn (comma list; default "
                        f"{','.join(ATTRIBUTION_ARMS)}); --pairs rounds")
    args = p.parse_args()
    import torch

    torch.set_num_threads(1)
    print(f"load average at start: {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)\n")
    scripts = tuple(args.scripts.split(","))
    arms = tuple(args.attribute.split(",")) if args.attribute else ()
    if args.processes and (not arms or "bare" not in arms or args.processes < 0):
        raise SystemExit("--processes N (N >= 1) runs --attribute with bare among its arms: e.g. "
                         "--attribute bare,all --processes 6")
    for arm in arms:
        _arm_spec(arm)  # an unknown arm refused here in one line, not in each child
    if args.only_cold:
        print_cold_hook_costs(cold_hook_costs())
        print(f"\nload average at end: {os.getloadavg()[0]:.1f}")
        return
    if arms and args.processes:
        print_attribution_processes(attribution_processes(scripts, args.pairs, args.block_s, arms, args.processes))
        print(f"\nload average at end: {os.getloadavg()[0]:.1f}")
        return
    if arms and args.json:
        print(json.dumps(attribution(scripts, args.pairs, args.block_s, arms)))
        return
    if arms:
        print_attribution(attribution(scripts, args.pairs, args.block_s, arms))
        print(f"\nload average at end: {os.getloadavg()[0]:.1f}")
        return
    if args.only_steps:
        for toggle in (True, False):
            print_whole_steps(whole_steps(scripts, args.pairs, args.block_s, toggle=toggle), toggle=toggle)
        print(f"\nload average at end: {os.getloadavg()[0]:.1f}")
        return
    costs = hook_costs(rounds=max(1, args.rounds // 2))
    background, rate = background_us()
    print_hook_table(costs, background, rate)
    if not args.only_hooks:
        for toggle in (True, False):
            print_whole_steps(whole_steps(scripts, args.pairs, args.block_s, toggle=toggle), toggle=toggle)
    print_call_counts()
    print_background_counts()
    print_cold_hook_costs(cold_hook_costs())
    print(f"\nload average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
