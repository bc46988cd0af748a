"""Suggestions as changes stepscope can apply without editing the user's code.

A :class:`Change` is one setting: an environment variable (``env``), a DataLoader argument applied at
construction by the zero-code torch hooks (``loader``), a torch thread count applied once at torch import
(``threads``: key ``intra`` or ``inter``), or a parameter of the user's command line (``param``: a ``{key}``
placeholder, or the value of ``--key``/``--key=``). :func:`apply_changes` turns a list of them into the
child's environment and command line; ``loader`` and ``threads`` travel as one JSON environment variable,
``STEPSCOPE_OVERRIDES``, that the hooks read (``{"loader": {"num_workers": 4}, "threads": {"intra": 2}}``).
Pure: nothing here runs or reads anything. A record of model/ (the advisor, ``advise --verify``, ``tune`` and the
torch hooks share it); ``stepscope.analyze.advisor.changes`` is where the advisor's users import it from.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

OVERRIDES_ENV = "STEPSCOPE_OVERRIDES"
"""The environment variable the torch hooks read their loader / thread overrides from (JSON); the same name as
``stepscope.collect.core.options.ENV_OVERRIDES``."""

ENV_KEYS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "TF_NUM_INTEROP_THREADS", "TF_NUM_INTRAOP_THREADS",
            "PYTORCH_CUDA_ALLOC_CONF")
"""Environment variables a change may set (besides any ``NCCL_*``)."""

LOADER_KEYS = ("num_workers", "pin_memory", "persistent_workers", "prefetch_factor")
THREAD_KEYS = ("intra", "inter")

ChangeKind = Literal["env", "loader", "threads", "param"]

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class Change:
    """One setting to apply: ``Change("loader", "num_workers", 4, "DataLoader num_workers=4")``."""

    kind: ChangeKind
    key: str
    value: str | int | bool
    label: str

    def __post_init__(self) -> None:
        problem = change_problem(self)
        if problem:
            raise ValueError(problem)

    def to_dict(self) -> dict[str, str | int | bool]:
        return {"kind": self.kind, "key": self.key, "value": self.value, "label": self.label}

    @staticmethod
    def from_dict(d: Mapping[str, object]) -> Change:
        value = d.get("value")
        if not isinstance(value, (str, int, bool)):
            raise ValueError(f"change value {value!r}: expected a string, integer or boolean")
        kind = str(d.get("kind"))
        if kind not in ("env", "loader", "threads", "param"):
            raise ValueError(f"change kind {kind!r}: expected env, loader, threads or param")
        return Change(kind, str(d.get("key")), value, str(d.get("label") or f"{d.get('key')}={value}"))  # type: ignore[arg-type]


def change_problem(c: Change) -> str:
    """Why ``c`` cannot be applied ("" when it can)."""
    if c.kind == "env":
        if c.key not in ENV_KEYS and not c.key.startswith("NCCL_"):
            return (f"environment change {c.key!r}: stepscope sets only {', '.join(ENV_KEYS)} and NCCL_* "
                    "variables")
    elif c.kind == "loader":
        if c.key not in LOADER_KEYS:
            return f"DataLoader change {c.key!r}: expected one of {', '.join(LOADER_KEYS)}"
    elif c.kind == "threads":
        if c.key not in THREAD_KEYS:
            return f"thread change {c.key!r}: expected intra or inter"
        if isinstance(c.value, bool) or not isinstance(c.value, int) or c.value < 1:
            return f"thread change {c.key}={c.value!r}: expected a positive integer"
    elif c.kind == "param":
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", c.key):
            return f"parameter change {c.key!r}: expected a name such as batch_size"
    else:
        return f"change kind {c.kind!r}: expected env, loader, threads or param"
    return ""


def _text(value: str | int | bool) -> str:
    # Environment variables and argv take text; booleans as 1/0 would be ambiguous for argparse flags.
    return str(value).lower() if isinstance(value, bool) else str(value)


def placeholders(argv: Sequence[str]) -> set[str]:
    """The ``{name}`` placeholders of a command line."""
    return {m for a in argv for m in _PLACEHOLDER.findall(a)}


def fill_placeholders(argv: Sequence[str], values: Mapping[str, str]) -> list[str]:
    """``argv`` with each ``{name}`` that ``values`` holds replaced by its value (others left as written)."""
    return [_PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), a) for a in argv]


def apply_param(argv: Sequence[str], key: str, value: str) -> list[str] | None:
    """``argv`` with parameter ``key`` set to ``value``: every ``{key}`` placeholder filled, else the value after
    ``--key`` (or of ``--key=``; ``_`` and ``-`` in the name are one) replaced. None when ``argv`` has neither."""
    out = list(argv)
    if any(f"{{{key}}}" in a for a in out):
        return fill_placeholders(out, {key: value})
    names = {f"--{key}", f"--{key.replace('_', '-')}", f"--{key.replace('-', '_')}"}
    hit = False
    for i, a in enumerate(out):
        if a in names and i + 1 < len(out):
            out[i + 1], hit = value, True
        elif "=" in a and a.split("=", 1)[0] in names:
            out[i], hit = f"{a.split('=', 1)[0]}={value}", True
    return out if hit else None


def apply_changes(changes: Sequence[Change], env: Mapping[str, str],
                  argv: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    """The child's environment and command line with ``changes`` applied (later changes of one key win).

    ``env`` changes set the variable; ``loader`` / ``threads`` changes merge into ``STEPSCOPE_OVERRIDES``
    (keeping what ``env`` already holds there); ``param`` changes edit ``argv`` (:func:`apply_param`).
    Raises ValueError (one line) for a parameter the command line does not carry."""
    out_env, out_argv = dict(env), list(argv)
    overrides: dict[str, dict[str, str | int | bool]] = {}
    if out_env.get(OVERRIDES_ENV):
        try:
            old = json.loads(out_env[OVERRIDES_ENV])
        except ValueError:
            old = None
        if isinstance(old, dict):
            overrides = {k: dict(v) for k, v in old.items() if k in ("loader", "threads") and isinstance(v, dict)}
    for c in changes:
        if c.kind == "env":
            out_env[c.key] = _text(c.value)
        elif c.kind in ("loader", "threads"):
            overrides.setdefault(c.kind, {})[c.key] = c.value
        else:
            edited = apply_param(out_argv, c.key, _text(c.value))
            if edited is None:
                raise ValueError(f"{c.label}: the command line has no {{{c.key}}} placeholder and no --{c.key} "
                                 "option to set")
            out_argv = edited
    if overrides:
        out_env[OVERRIDES_ENV] = json.dumps(overrides, sort_keys=True)
    return out_env, out_argv


NEEDS_CODE_CHANGE = "needs a code change"
"""What a finding whose remedy is not a setting says in place of a change."""
