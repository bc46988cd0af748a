"""Warnings for processes that recorded no training step: what stepscope found there (the ``hooks`` records that
collect/core/session.py's ``note_hooks`` leaves: framework, version, hooks installed and refused) and the one thing to
do, so that "0 steps" is never silent about why."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from stepscope.model.tables import RankData

ORDER = ("tensorflow", "keras", "jax", "torch", "mpi4py")
"""Frameworks in the order a warning names them (others after, as noted)."""
ADVICE = (
    ("keras", "train with Model.fit or apply gradients with a Keras optimizer (a loop that updates variables "
              "by hand is not seen), or call stepscope.step() at the end of each training step"),
    ("tensorflow", "a loop that updates variables without a Keras optimizer is not seen: call stepscope.step() "
                   "at the end of each training step, or loop over stepscope.steps(dataset)"),
    ("torch", "step a torch.optim optimizer, or call stepscope.step() at the end of each training step (or loop "
              "over stepscope.steps(loader))"),
    ("jax", "JAX has no step stepscope can hook: call stepscope.step() at the end of each training step, or loop "
            "over stepscope.steps(batches)"),
)
"""The one thing to do, by the first framework of this list that the process imported."""
DEFAULT_ADVICE = "call stepscope.step() at the end of each training step, or loop over stepscope.steps(batches)"
REASON_CHARS = 160


def hook_notes(rank: RankData) -> list[dict[str, Any]]:
    """The rank's well-formed ``hooks`` records, one per framework (the last one wins), in :data:`ORDER`."""
    by_name: dict[str, dict[str, Any]] = {}
    for rec in rank.extra.get("hooks", []):
        name, version = rec.get("framework"), rec.get("version")
        installed, refused = rec.get("installed"), rec.get("refused")
        if (isinstance(name, str) and isinstance(version, (str, type(None))) and isinstance(installed, list)
                and isinstance(refused, dict)):
            by_name[name] = {"framework": name, "version": version, "installed": [str(h) for h in installed],
                             "refused": {str(k): str(v) for k, v in refused.items()}}
    return sorted(by_name.values(), key=lambda n: ORDER.index(n["framework"]) if n["framework"] in ORDER
                  else len(ORDER))


def _one(note: Mapping[str, Any]) -> tuple[str, str]:
    """("tensorflow 2.21.0", "(hooks installed: tf.data, tf.function; refused: none)")."""
    refused: dict[str, str] = note["refused"]
    ref = ", ".join(f"{part}: {_short(why)}" for part, why in refused.items()) or "none"
    installed = ", ".join(note["installed"]) or "none"
    return f"{note['framework']} {note['version'] or '(version unknown)'}", f"(hooks installed: {installed}; " \
        f"refused: {ref})"


def _short(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= REASON_CHARS else line[:REASON_CHARS - 1] + "…"


def advice(frameworks: Sequence[str]) -> str:
    """The one thing to do in a process that imported ``frameworks`` and recorded no step."""
    return next((text for name, text in ADVICE if name in frameworks), DEFAULT_ADVICE)


def blind_text(notes: Sequence[Mapping[str, Any]]) -> str:
    """"tensorflow 2.21.0 was imported but no training step was seen (hooks installed: ...; refused: none) — ..."."""
    parts = [_one(n) for n in notes]
    todo = advice([n["framework"] for n in notes])
    if len(parts) == 1:
        (name, hooks), = parts
        return f"{name} was imported but no training step was seen {hooks} — {todo}"
    listed = ", ".join(f"{name} {hooks}" for name, hooks in parts[:-1]) + f" and {' '.join(parts[-1])}"
    return f"{listed} were imported but no training step was seen — {todo}"


def blind_warnings(ranks: Sequence[RankData]) -> list[str]:
    """One warning per distinct finding over the ranks that noted a framework but recorded no training step
    (prefixed with the ranks where the run has more than one stream)."""
    found: dict[str, list[int]] = {}
    for rank in ranks:
        if int((rank.steps["phase"] == 0).sum()):
            continue
        notes = hook_notes(rank)
        if notes:
            found.setdefault(blind_text(notes), []).append(rank.stream.rank)
    if len(ranks) == 1:
        return list(found)
    return [f"{'rank' if len(r) == 1 else 'ranks'} {', '.join(map(str, sorted(r)))}: {text}"
            for text, r in found.items()]


def frameworks_used(rank: RankData) -> list[str]:
    """What a rank's records say it used: frameworks noted or described, torch where the stream's software
    names it, mpi4py where it made communication calls without torch (torch.distributed needs torch)."""
    names = [n["framework"] for n in hook_notes(rank)]
    names += [str(rec["name"]) for rec in rank.extra.get("framework", []) if isinstance(rec.get("name"), str)]
    software = rank.stream.software
    if software is not None and software.torch:
        names.append("torch")
    elif len(rank.comm):
        names.append("mpi4py")
    return sorted(set(names), key=lambda n: ORDER.index(n) if n in ORDER else len(ORDER))


def no_step_warning(ranks: Sequence[RankData]) -> str:
    """The warning of a run whose streams recorded no step (none of them noted a framework), naming the
    frameworks that ran."""
    used = sorted({n for r in ranks for n in frameworks_used(r)},
                  key=lambda n: ORDER.index(n) if n in ORDER else len(ORDER))
    if not used or used == ["torch"]:
        what = "no torch.optim optimizer stepped (parameters updated by hand?)" if used else (
            "nothing stepscope hooks (a torch.optim optimizer, Keras fit or a Keras optimizer) marked a step")
        return f"no step was recorded: {what} — {DEFAULT_ADVICE.replace('batches', 'loader')}"
    return f"no step was recorded: {' and '.join(used)} ran, but nothing marked a training step — {advice(used)}"
