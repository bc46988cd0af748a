"""Settings applied without editing the user's code: DataLoader arguments at construction, torch thread counts
once at torch import, from the JSON environment variable ``STEPSCOPE_OVERRIDES`` that ``advise --verify`` and
``tune`` set (model/changes.py writes it): ``{"loader": {"num_workers": 4}, "threads": {"intra": 2}}``.

Construction time only: the steps' hot path is untouched. What was applied, and what could not be (no DataLoader
constructed, a value torch refuses), is written as ``override`` records when the stream closes, so the run says
which settings it ran with. A refused value never reaches the user's program as an exception: the DataLoader is
built as the code asked, and the refusal is noted.
"""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from stepscope.collect.core.options import ENV_OVERRIDES
from stepscope.collect.core.session import Session

LOADER_KEYS = ("num_workers", "pin_memory", "persistent_workers", "prefetch_factor")
THREAD_KEYS = ("intra", "inter")


@dataclass
class Applied:
    """One requested setting and what became of it in this process."""

    target: str
    key: str
    value: Any
    applied: int = 0
    """DataLoaders built with it (threads: 1 once set)."""
    was: list[Any] = field(default_factory=list)
    """The values the code asked for, per DataLoader (threads: torch's count before)."""
    refused: str | None = None
    """Why it could not be applied (the last reason), None when it never was refused."""

    def note(self) -> str:
        what = {"intra": "torch intra-op threads", "inter": "torch inter-op threads"}.get(self.key, self.key)
        where = (f"DataLoader {what}={self.value!r} on {self.applied} DataLoader{'s' if self.applied > 1 else ''}"
                 if self.target == "loader" else f"{what} = {self.value!r}")
        was = sorted({repr(w) for w in self.was})
        return (f"override applied by stepscope ({ENV_OVERRIDES}), not in the code: {where}"
                + (f" (the code's: {', '.join(was)})" if was else ""))

    def record(self) -> dict[str, Any]:
        why = self.refused
        if why is None and not self.applied:
            why = "no DataLoader was constructed" if self.target == "loader" else "not applied"
        return {"target": self.target, "key": self.key, "value": self.value, "applied": self.applied,
                "was": self.was[:16], "refused": why}


def read_overrides(text: str | None) -> tuple[dict[str, dict[str, Any]], str | None]:
    """The overrides in ``text`` (the environment variable's value) by target, and what was wrong with it (None:
    nothing). Unknown targets and keys are left out and named."""
    if not text:
        return {}, None
    try:
        doc = json.loads(text)
    except ValueError as e:
        return {}, f"{ENV_OVERRIDES} is not JSON ({e})"
    if not isinstance(doc, dict):
        return {}, f"{ENV_OVERRIDES} is not a JSON object"
    out: dict[str, dict[str, Any]] = {}
    bad: list[str] = []
    for target, keys in (("loader", LOADER_KEYS), ("threads", THREAD_KEYS)):
        part = doc.get(target)
        if isinstance(part, dict):
            out[target] = {k: v for k, v in part.items() if k in keys}
            bad += [f"{target}.{k}" for k in part if k not in keys]
    bad += [str(t) for t in doc if t not in ("loader", "threads")]
    return out, (f"{ENV_OVERRIDES}: ignored {', '.join(bad)}" if bad else None)


def install_overrides(session: Session, undo: list[Callable[[], None]]) -> str | None:
    """Apply the thread overrides now and hook DataLoader construction for the loader overrides. Returns the hook's
    name for ``note_hooks`` (None: no overrides asked for, nothing installed)."""
    wanted, problem = read_overrides(os.environ.get(ENV_OVERRIDES))
    if problem:
        session.note_once("overrides-env", problem)
    if not wanted.get("loader") and not wanted.get("threads"):
        return None
    results = [Applied(t, k, v) for t in ("threads", "loader") for k, v in wanted.get(t, {}).items()]
    _apply_threads(session, [a for a in results if a.target == "threads"])
    loader = [a for a in results if a.target == "loader"]
    if loader:
        _hook_loader(session, loader, undo)

    def write() -> None:
        for a in results:
            session.buffers.add_other({"kind": "override", **a.record()})
            if a.applied:  # a note too: show and the report list notes, so the user sees the run was not as coded
                session.buffers.add_other({"kind": "note", "text": a.note()})

    session.closers.append(write)
    return "overrides (" + ", ".join(f"{a.target}.{a.key}={a.value}" for a in results) + ")"


def _apply_threads(session: Session, threads: list[Applied]) -> None:
    import torch

    for a in threads:
        get, put = ((torch.get_num_threads, torch.set_num_threads) if a.key == "intra"
                    else (torch.get_num_interop_threads, torch.set_num_interop_threads))
        try:
            before = int(get())
            if isinstance(a.value, bool) or not isinstance(a.value, int):
                raise ValueError(f"{a.value!r} is not an integer")
            put(a.value)
        except Exception as e:  # torch refuses (< 1, interop threads after parallel work began): noted
            a.refused = f"torch refused {a.key}-op threads = {a.value!r}: {_line(e)}"
            session.note_once(f"override:threads.{a.key}", f"override not applied: {a.refused}")
            continue
        a.was.append(before)
        a.applied = 1


def _hook_loader(session: Session, loader: list[Applied], undo: list[Callable[[], None]]) -> None:
    """Wrap ``DataLoader.__init__``: the overrides replace the code's arguments; where torch refuses the result,
    the DataLoader is built as the code asked and the refusal noted."""
    from torch.utils.data import DataLoader

    orig_init = DataLoader.__init__
    sig = inspect.signature(orig_init)

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            bound = sig.bind(self, *args, **kwargs)
        except TypeError:  # torch will say what is wrong with the code's own call
            orig_init(self, *args, **kwargs)
            return
        asked = {a.key: bound.arguments.get(a.key, sig.parameters[a.key].default) for a in loader
                 if a.key in sig.parameters}
        for a in loader:
            if a.key in sig.parameters:
                bound.arguments[a.key] = a.value
        try:
            orig_init(*bound.args, **bound.kwargs)
        except (ValueError, TypeError, RuntimeError) as e:
            why = _line(e)
            for a in loader:
                a.refused = f"torch refused DataLoader({', '.join(f'{x.key}={x.value!r}' for x in loader)}): {why}"
            session.note_once("override:loader", f"override not applied: {loader[0].refused}; the DataLoader was "
                                                 "built as the code asks")
            orig_init(self, *args, **kwargs)
            return
        for a in loader:
            if a.key in asked:
                a.applied += 1
                a.was.append(asked[a.key] if isinstance(asked[a.key], (int, float, bool, str)) else None)
            else:
                a.refused = f"this torch's DataLoader has no {a.key} argument"

    DataLoader.__init__ = __init__  # type: ignore[method-assign]

    def restore() -> None:
        DataLoader.__init__ = orig_init  # type: ignore[method-assign]

    undo.append(restore)


def _line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:300]
