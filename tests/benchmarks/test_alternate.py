"""benchmarks/_alternate.py: the sites the per-step hooks patch are found by comparing the patched objects, only
those a step calls are swapped, each swap puts back exactly the bare or the hooked object, and a run of real
steps alternates the arms in balanced order with the loader's passes starting on hooked steps."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from benchmarks._alternate import _MISSING, Sites, _patched_objects, _snapshot, alternate, find_sites
from benchmarks._loop import Parts
from benchmarks.hook_costs import install_step_hooks, recording

from stepscope.collect import hooks


class Patched:
    kept = 1
    changed = 2
    removed = 3


def test_find_sites_compares_by_identity() -> None:
    before = _snapshot([Patched])
    old = Patched.changed
    Patched.changed = 2000  # type: ignore[assignment]  # another object, equal or not
    del Patched.removed
    Patched.added = 4  # type: ignore[attr-defined]
    try:
        sites = find_sites([Patched], before, _snapshot([Patched]))
        got = {n: (b, h) for _, n, b, h in sites.attrs}
        assert got == {"added": (_MISSING, 4), "changed": (old, 2000), "removed": (3, _MISSING)}
        sites.apply("bare")
        assert (Patched.changed, Patched.removed, hasattr(Patched, "added")) == (2, 3, False)
        sites.apply("hooked")
        assert (Patched.changed, hasattr(Patched, "removed"), Patched.added) == (2000, False, 4)  # type: ignore
    finally:
        Patched.changed, Patched.removed = 2, 3  # type: ignore[assignment]
        if "added" in vars(Patched):
            del Patched.added  # type: ignore[attr-defined]


def _sites_of(session: Any, p: Parts) -> Sites:
    hooks.remove_all()
    objs = _patched_objects(p)
    bare = _snapshot(objs)
    install_step_hooks(session, p)
    for _ in range(3):
        p.step()
    return find_sites(objs, bare, _snapshot(objs))


def test_only_what_a_step_calls_is_swapped_and_each_swap_is_exact() -> None:
    orig_backward = torch.autograd.backward
    with recording("alternate-sites") as s:
        p = Parts("loader48")
        every = _sites_of(s, p)
        names = {n for _, n, _, _ in every.attrs}
        # once-a-pass and once-a-model patches are found too, but stay hooked in both arms
        assert {"__next__", "backward", "_compiled_call_impl", "__iter__", "_patch_step_function"} <= names
        step = every.per_step()
        assert sorted(n for _, n, _, _ in step.attrs) == ["__next__", "_compiled_call_impl", "backward"]
        assert len(step.cells) == 1  # the optimizer's step wrapper
        hooked_backward = torch.autograd.backward
        assert hooked_backward is not orig_backward
        step.apply("bare")
        assert torch.autograd.backward is orig_backward
        assert vars(p.model)["_compiled_call_impl"] is None  # an empty slot is None, not deleted
        assert step.cells[0][0].cell_contents is step.cells[0][1]
        step.apply("hooked")
        assert torch.autograd.backward is hooked_backward
        assert vars(p.model)["_compiled_call_impl"] is step.attrs[[n for _, n, _, _ in step.attrs].index(
            "_compiled_call_impl")][3]
        hooks.remove_all()
    assert torch.autograd.backward is orig_backward


@pytest.mark.parametrize("aa", [False, True])
def test_real_steps_alternate_in_a_seeded_random_order(aa: bool) -> None:
    with recording("alternate-run") as s:
        p = Parts("loader48")
        before = s.step_index
        r = alternate(s, p, 68, warm=2, aa=aa)  # 136 steps: the loader's 64-batch passes start at 0, 64, 128
        # the optimizer's hook marks a step: on the warm steps and the hooked ones (all of them in the A/A check)
        assert s.step_index - before == 2 + (136 if aa else 68)
        assert len(r["hooked"]) == len(r["bare"]) == 68 and len(r["diff"]) == 68 - 3  # pairs 0, 32, 64 start passes
        assert r["diff"][4] == pytest.approx((r["hooked"][5] - r["bare"][5]) / 1e3)  # pair 0 left out
        assert r["sites"] == ([] if aa else ["torch.autograd.backward", "_BaseDataLoaderIter.__next__",
                                             "Sequential._compiled_call_impl", "optimizer step cell (1)"])
        first = r["hooked_first"]
        assert first[0] and first[32] and first[64]  # the pairs whose first step starts a pass
        assert 14 <= sum(first) <= 54  # the others drawn: about half each way
        assert alternate(s, p, 68, warm=0, aa=aa)["hooked_first"] == first  # seeded
        assert alternate(s, p, 68, warm=0, aa=aa, seed=1)["hooked_first"] != first
    assert hooks.installed() == 0


def test_the_hooked_steps_are_the_hooks_steady_state_and_the_bare_ones_log_nothing() -> None:
    """What the hooked arm times is log mode (collect/_hooks_log.c), as in a real run's steady state: the steps in
    between, with the sites bare, leave it on, and each hooked step appends the four hooks' events."""
    from stepscope.collect import _hooks

    with recording("alternate-log") as s:
        p = Parts("loader48")
        seen: list[tuple[bool, bool, int, int]] = []  # (log mode on before, after, events pending before, after)
        real_step = p.step

        def step() -> None:
            on0, n0 = _hooks.log_state()
            real_step()
            on1, n1 = _hooks.log_state()
            seen.append((on0, on1, n0, n1))

        p.step = step  # type: ignore[method-assign]
        r = alternate(s, p, 68, warm=2)
    hooked_steps = [2 + 2 * k + (not first) for k, first in enumerate(r["hooked_first"])]
    bare_steps = [2 + 2 * k + first for k, first in enumerate(r["hooked_first"])]
    # a pass's first batch is not logged (the fetch's other path), and the first pass's first mark is not common;
    # the passes start on the pairs alternate() leaves out, whose hooked step comes first
    batches = len(p.loader) if p.loader is not None else 0
    starts = {2 + 2 * k for k in range(68) if (2 * k) % batches == 0}
    assert len(starts) == 3
    steady = [i for i in hooked_steps if i not in starts]
    # the other hooked steps end in log mode (the margin: a background thread's write of a session attribute ends
    # it, until the next mark) and append the four events, unless another thread (the flush, the sampler) applies
    # them mid-step, which a loaded machine makes more frequent; the Python hook bodies log nothing (0 and 0)
    assert sum(seen[i][1] for i in steady) >= 0.9 * len(steady), seen
    assert sum(seen[i][3] - seen[i][2] == 4 for i in steady) >= 0.5 * len(steady), seen
    assert all(seen[i][3] <= seen[i][2] for i in bare_steps)  # nothing logged (some applied by another thread)


def test_the_probe_arm_wraps_what_the_bare_step_calls_and_logs_each_call() -> None:
    from benchmarks._probe_build import load_probe

    probe = load_probe()
    with recording("alternate-probe") as s:
        p = Parts("loader48")
        before, written = s.step_index, probe.written()
        r = alternate(s, p, 68, warm=2, arms=("probe", "bare"))
        # no step is marked on a probe or bare step; each probe step goes through the four sites once, and the
        # steps that start passes 2 and 3 (probe steps) also end the pass before: its __next__ raising StopIteration
        assert s.step_index - before == 2
        assert probe.written() - written == 4 * 68 + 2
        assert len(r["diff"]) == 68 - 3
    assert hooks.installed() == 0
    with recording("alternate-probe-sites") as s:
        p = Parts("loader48")
        sites = _sites_of(s, p).per_step().with_probes(probe.Probe)
        sites.apply("probe")
        written = probe.written()
        p.it = None
        p.step()  # the first batch of a pass: the hooked __iter__ (not swapped) sets it, the probe's __next__ reads
        site, t0, t1, _ = probe.last()
        assert probe.written() - written == 4 and site == 3 and t1 >= t0  # the optimizer's cell, last
        loader = [n for _, n, _, _ in sites.attrs].index("__next__")
        assert loader != 3
        # the log arm: the same wrappers with the reads a clock-and-log design keeps
        log = sites.extra["log"]
        forward = [n for _, n, _, _ in sites.attrs].index("_compiled_call_impl")
        sites.apply("log")
        p.step()
        p.step()
        assert log[3].count == 2 and sites.extra["probe"][3].count == 0  # the step count, the optimizer's cell
        assert log[forward].flag == 1  # the model's training flag read (a training model)
        p.model.eval()
        p.step()
        assert log[forward].flag == 0
        p.model.train()
        sites.apply("hooked")
        hooks.remove_all()
    with pytest.raises(SystemExit, match="two different arms"):
        alternate(s, p, 4, arms=("probe", "probe"))


def test_a_pass_that_would_start_on_a_bare_step_is_refused() -> None:
    with recording("alternate-odd") as s:
        p = Parts("loader48", batches=62)
        with pytest.raises(SystemExit, match="62 batches a pass"):
            alternate(s, p, 4)


@pytest.mark.parametrize(("script", "args"), [
    ("hook_costs.py", ["--alternate", "--pairs", "3", "--scripts", "linear"]),
    ("hook_costs.py", ["--alternate", "--pairs", "50", "--processes", "-1"]),
    ("overhead.py", ["--alternate-pairs", "3", "--no-tools", "--no-keras", "--no-scripts"]),
    ("overhead.py", ["--alternate-pairs", "-5", "--no-tools", "--no-keras", "--no-scripts"]),
])
def test_too_few_pairs_are_refused_in_one_line(script: str, args: list[str]) -> None:
    import subprocess
    import sys
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / script
    done = subprocess.run([sys.executable, str(path), *args], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "at least 10" in done.stderr.strip().splitlines()[-1]


def test_arms_are_read_as_runs_and_a_bad_pair_is_refused_in_one_line() -> None:
    import subprocess
    import sys
    from pathlib import Path

    from benchmarks.hook_costs import alt_run

    assert alt_run("aa") == (("hooked", "bare"), True)
    assert alt_run("probe,bare") == (("probe", "bare"), False)
    assert alt_run("hooked,probe", aa=True) == (("hooked", "probe"), True)
    for bad in ("hooked", "hooked,fast"):
        with pytest.raises(SystemExit, match=f"got {bad}$"):
            alt_run(bad)
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "hook_costs.py"
    done = subprocess.run([sys.executable, str(path), "--alternate", "--arms", "probe,probe", "--pairs", "40"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "--arms takes two different arms of hooked, bare, probe, log (A,B), or aa; got probe,probe")
