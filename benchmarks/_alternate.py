"""Hooked and bare steps alternated one by one (hook_costs.py ``--alternate``): what the zero-code hooks add to a
step, measured so that the machine's drift cancels.

Blocks of steps (table 2 and 2b) compare block means taken a second apart; on a shared VM the bare step moves by
tens of µs between blocks, more than the hooks cost on a 4 ms step. Here every other step is hooked: the hooks are
installed once, the attributes and closure cells they changed are found by comparing the objects they patch
before and after (``Sites``), and between two steps those values are swapped in or out by plain assignment, off
the clock. Steps go in pairs, each pair's order drawn at random (seeded), and each pair gives one difference,
hooked minus bare: the random order balances a drift and anything periodic in the steps (a fixed H B B H order
put the garbage collector's older generations, every 20 steps or so, on the same position each time: an A/A
run of ``many`` gave +1.5 to +13.7 µs in all six processes), and each difference is one step against one
(comparing a step with the mean of its two neighbours was tried first: with step times skewed to the right,
the median of such differences is below zero when nothing differs, -3 µs on ``linear`` in an A/A run).

Only what a step calls is swapped (``PER_STEP``); what runs once a pass or once a model stays hooked in both arms.
The loader's passes start on a hooked step (with a multiple of 4 batches a pass, as the issue's scripts have),
so the pass state the hooked ``__iter__`` sets is there for the hooked steps of that pass, as in a real run; a
pass that starts on a bare step is refused. Those pairs are left out of the differences: every pass's start
(the DataLoader making its iterator, hundreds of µs) falls in their hooked step, and one pair in 32 with a large
positive difference moved the median of ``many``'s differences by +14 to +39 µs in an A/A run. What the hooks
add once a pass (+50 to +68 µs a pass of 64 batches, benchmarks/RESULTS.md "eighth change") is not in this figure.
"""

from __future__ import annotations

import gc
import random
import time
from dataclasses import dataclass, field
from typing import Any

_MISSING = object()
PER_STEP = frozenset({"__next__", "backward", "_compiled_call_impl"})
"""The hooked attributes every step calls: the DataLoader iterators' ``__next__``, ``torch.autograd.backward``
and a watched model's call slot (the optimizer's hook is a closure cell, always swapped). Swapping a class
attribute such as ``nn.Module._replicate_for_data_parallel`` (called once a model) would bump the version tag
of every module class, and the interpreter's specialised attribute reads of all 201 modules of ``many`` would
miss after each swap, in both arms but unlike any real run."""


ARMS = ("hooked", "bare", "probe", "log")
"""What a step runs at the swapped sites: stepscope's hooks, torch's own code, the floor of a hook there, or that
floor with the reads a clock-and-log design keeps on the training thread (``with_probes``)."""

READS = {"__next__": 1, "_compiled_call_impl": 2}
"""The log arm's reads by site (benchmarks/_probe.c): the loader's pass, the model's training flag; the
optimizer's cell counts the step (3); backward reads nothing more."""


def check_arms(arms: tuple[str, ...]) -> tuple[str, str]:
    """``arms`` if they are two different arms of ``ARMS``; else the run ends in one line."""
    if len(arms) != 2 or arms[0] == arms[1] or not set(arms) <= set(ARMS):
        raise SystemExit(f"--arms takes two different arms of {', '.join(ARMS)} (A,B), or aa; got {','.join(arms)}")
    return arms[0], arms[1]


@dataclass
class Sites:
    """The values the hooks changed: (object, attribute, bare value, hooked value) and (cell, bare, hooked); in
    ``extra``, each site's value for the other arms (attributes first, then cells)."""

    attrs: list[tuple[Any, str, Any, Any]] = field(default_factory=list)
    cells: list[tuple[Any, Any, Any]] = field(default_factory=list)
    extra: dict[str, list[Any]] = field(default_factory=dict)

    def apply(self, arm: str) -> None:
        """Puts ``arm``'s value (one of ``ARMS``) at every site."""
        if arm in ("hooked", "bare"):
            on = arm == "hooked"
            values = [h if on else b for _, _, b, h in self.attrs] + [h if on else b for _, b, h in self.cells]
        else:
            values = self.extra[arm]
        for (obj, name, _, _), value in zip(self.attrs, values[:len(self.attrs)], strict=True):
            if value is _MISSING:
                if name in vars(obj):
                    delattr(obj, name)
            else:
                setattr(obj, name, value)
        for (cell, _, _), value in zip(self.cells, values[len(self.attrs):], strict=True):
            cell.cell_contents = value

    def with_probes(self, probe_type: Any) -> Sites:
        """These sites with a probe at each for the ``probe`` and ``log`` arms (``probe_type(fn, site, rows, reads,
        owner)``, benchmarks/_probe.c): a wrapper of what the bare step calls there, reading the clock around it
        and writing the readings to a C array, the loader's also the batch's first dimension; the ``log`` arm's
        also does ``READS``. What a bare step calls is read with the bare values in place: the inherited
        ``__next__`` where a class had none, the model's ``_call_impl`` where its slot is empty."""
        self.apply("bare")
        extra: dict[str, list[Any]] = {"probe": [], "log": []}
        for arm, log in (("probe", False), ("log", True)):
            for i, (obj, name, _, _) in enumerate(self.attrs):
                slot = name == "_compiled_call_impl"
                fn = obj._call_impl if slot else getattr(obj, name)
                extra[arm].append(probe_type(fn, i, name == "__next__", READS.get(name, 0) if log else 0,
                                             obj if slot else None))
            extra[arm] += [probe_type(bare, len(self.attrs) + i, False, 3 if log else 0)
                           for i, (_, bare, _) in enumerate(self.cells)]
        self.apply("hooked")
        return Sites(self.attrs, self.cells, extra)

    def per_step(self) -> Sites:
        """The sites a step goes through (``PER_STEP``); the others (called once a pass or once a model) stay
        hooked in both arms. A model's empty call slot is swapped to None, not deleted: a deletion each step would
        turn the model's instance dict from shared keys to its own, slowing both arms' attribute reads."""
        attrs = [(o, n, None if n == "_compiled_call_impl" and b is _MISSING else b, h)
                 for o, n, b, h in self.attrs if n in PER_STEP]
        return Sites(attrs, self.cells)


def _patched_objects(parts: Any) -> list[Any]:
    """Every object the per-step hooks patch: torch.autograd, the DataLoader classes, nn.Module, the optimizer
    classes and the model's modules."""
    import torch.autograd
    import torch.utils.data.dataloader as dl
    from torch import nn
    from torch.optim.optimizer import Optimizer

    classes = [c for c in vars(dl).values() if isinstance(c, type) and issubclass(c, (dl.DataLoader,
                                                                                   dl._BaseDataLoaderIter))]
    from stepscope.collect.hooks import _subclasses

    return [torch.autograd, nn.Module, *classes, *_subclasses(Optimizer), *parts.model.modules()]


def _step_cells() -> list[Any]:
    """The ``func`` closure cells of torch's optimizer step wrappers (where the optimizer hook sits)."""
    from torch.optim.optimizer import Optimizer

    from stepscope.collect.hooks import _func_cell, _subclasses

    cells = [_func_cell(vars(cls).get("step")) for cls in _subclasses(Optimizer)]
    return [c for c in cells if c is not None]


def _snapshot(objs: list[Any]) -> tuple[list[dict[str, Any]], list[Any]]:
    cells = _step_cells()
    return [dict(vars(o)) for o in objs], [c.cell_contents for c in cells]


def find_sites(objs: list[Any], before: tuple[list[dict[str, Any]], list[Any]],
               after: tuple[list[dict[str, Any]], list[Any]]) -> Sites:
    """What differs between two snapshots of ``objs`` (bare first, hooked second), by identity."""
    sites = Sites()
    for obj, b, a in zip(objs, before[0], after[0], strict=True):
        for name in sorted(set(b) | set(a)):
            vb, va = b.get(name, _MISSING), a.get(name, _MISSING)
            if vb is not va:
                sites.attrs.append((obj, name, vb, va))
    for cell, vb, va in zip(_step_cells(), before[1], after[1], strict=True):
        if vb is not va:
            sites.cells.append((cell, vb, va))
    return sites


def alternate(session: Any, parts: Any, pairs: int, warm: int = 8, *, aa: bool = False,
              seed: int = 0, arms: tuple[str, str] = ("hooked", "bare")) -> dict[str, Any]:
    """``pairs`` hooked steps of ``parts`` alternated with bare ones (module docstring). Returns the training
    thread's CPU ns of each step (``hooked``, ``bare``: pair i's two steps), whether each pair ran its hooked
    step first (``hooked_first``: drawn with ``seed``; always for a pair that starts a loader pass), the
    per-pair differences (``diff``: hooked[i] - bare[i], µs, the pairs that start a loader pass left out) and
    the sites swapped. ``aa``: the A/A check of the method: the same steps, nothing swapped (both arms
    hooked), so the differences are the method's noise alone. ``arms``: the two arms compared, first minus
    second (``ARMS``; ``hooked`` and ``bare`` unless asked), named ``hooked`` and ``bare`` in what is returned;
    a loader pass starts on a step of the first arm."""
    check_arms(arms)
    from benchmarks.hook_costs import install_step_hooks

    from stepscope.collect import hooks

    batches = len(parts.loader) if parts.loader is not None else 0
    if batches % 4:
        raise SystemExit(f"the loader has {batches} batches a pass: its passes would start on bare steps")
    hooks.remove_all()
    objs = _patched_objects(parts)
    bare_state = _snapshot(objs)
    install_step_hooks(session, parts)
    parts.it = None
    for _ in range(warm):  # the first hooked steps find the model and wrap its call slot
        parts.step()
    sites = find_sites(objs, bare_state, _snapshot(objs)).per_step()
    if not sites.attrs and not sites.cells:
        raise SystemExit("installing the hooks changed nothing that could be swapped")
    if "probe" in arms or "log" in arms:
        from benchmarks._probe_build import load_probe

        sites = sites.with_probes(load_probe().Probe)
    if aa:
        sites = Sites()
    clock = time.thread_time_ns
    hooked: list[int] = []
    bare: list[int] = []
    parts.it = None
    step = 0
    gc.collect()
    starts = {k for k in range(pairs) if batches and (2 * k) % batches == 0}
    rng = random.Random(seed)
    first: list[bool] = []
    for k in range(pairs):
        first.append(k in starts or rng.random() < 0.5)
        for on in (True, False) if first[-1] else (False, True):
            out = hooked if on else bare
            sites.apply(arms[0] if on else arms[1])
            if batches and step % batches == 0 and not on:
                raise SystemExit("a loader pass started on a bare step")
            t = clock()
            parts.step()
            out.append(clock() - t)
            step += 1
    sites.apply("hooked")
    hooks.remove_all()
    # a pair that starts a loader pass has the pass's start (the iterator made, hooked or not) in its hooked step
    # only: left out (see the module docstring)
    diff = [(h - b) / 1e3 for k, (h, b) in enumerate(zip(hooked, bare, strict=True)) if k not in starts]
    return {"hooked": hooked, "bare": bare, "diff": diff, "hooked_first": first,
            "sites": [f"{getattr(o, '__name__', type(o).__name__)}.{n}" for o, n, _, _ in sites.attrs]
            + [f"optimizer step cell ({len(sites.cells)})"] * bool(sites.cells)}
