"""Short display names for GPU kernels and operators (the full name stays on hover).

A CUDA kernel name such as ``void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add
<float>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*,
3>)`` is shortened step by step, stopping as soon as it fits ``limit`` characters: the return type and the
parameter list go, then namespace qualifiers, then template arguments nested two levels deep (the first
level, which tells the ``vectorized_elementwise_kernel`` variants apart, stays), then the argument lists of
functions named inside template arguments, then all template arguments of a
kernel whose own name is long (``name<…>``), and last the middle is cut (``head…tail``). Names
that come out equal within one list are shortened again keeping two levels of template arguments
(middle cut), and any still equal get a ``#2``, ``#3`` suffix in list order, so no two rows look the same.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

LIMIT = 72
_INNER_PARAMS = re.compile(r"\([^()]*\)")
_QUALIFIER = re.compile(r"(?:\(anonymous namespace\)|[A-Za-z_]\w*)::")
_LAMBDA = re.compile(r"\{lambda\([^()]*\)#(\d+)\}")


def _drop_params(name: str) -> str:
    """Cut a trailing top-level ``(...)`` parameter list."""
    if not name.endswith(")"):
        return name
    depth = 0
    for i in range(len(name) - 1, -1, -1):
        c = name[i]
        if c == ")":
            depth += 1
        elif c == "(":
            depth -= 1
            if depth == 0:
                return name[:i] if i > 0 else name
    return name


def _collapse(name: str, keep_depth: int) -> str:
    """Template arguments deeper than ``keep_depth`` levels of ``<...>`` become ``…``."""
    out, depth = [], 0
    for c in name:
        if c == "<":
            depth += 1
            if depth == keep_depth + 1:
                out.append("<…")
            elif depth <= keep_depth:
                out.append(c)
            continue
        if c == ">":
            if depth <= keep_depth + 1:
                out.append(">")
            depth = max(depth - 1, 0)
            continue
        if depth <= keep_depth:
            out.append(c)
    return "".join(out)


def short_name(name: str, limit: int = LIMIT, *, drop_templates: bool = True) -> str:
    """One name shortened to at most ``limit`` characters (unchanged when it already fits).
    ``drop_templates=False`` keeps two levels of template arguments and cuts the middle instead (the second
    try for names whose short forms collide: their difference is often a type two levels down)."""
    if len(name) <= limit:
        return name
    s = name[5:] if name.startswith("void ") else name
    s = _drop_params(s)
    s = _LAMBDA.sub(r"λ#\1", s)
    s = _QUALIFIER.sub("", s).replace("> >", ">>").strip()
    for keep in (2, 1) if drop_templates else (2,):
        if len(s) <= limit:
            break
        s = _collapse(s, keep)
    if len(s) > limit:
        while _INNER_PARAMS.search(s):
            s = _INNER_PARAMS.sub("\x00", s)
        s = s.replace("\x00", "()")
    if len(s) <= limit:
        return s
    suffix = ""
    if drop_templates and "<" in s and s.index("<") >= limit // 2:  # a long name of its own: its template arguments go
        s, suffix = s[: s.index("<")], "<…>"
        if len(s) + len(suffix) <= limit:
            return s + suffix
    room = limit - 1 - len(suffix)
    head = room * 2 // 5
    return s[:head] + "…" + s[len(s) - (room - head):] + suffix


def short_names(names: Sequence[str], limit: int = LIMIT) -> list[str]:
    """Each name shortened; names whose short forms collide are shortened again keeping their template
    arguments (middle cut), and any still equal get ``#2``, ``#3``… (the first keeps its name)."""
    shorts = [short_name(n, limit) for n in names]
    clashes = {s for s, c in Counter(shorts).items() if c > 1}
    shorts = [short_name(n, limit, drop_templates=False) if s in clashes else s for s, n in zip(shorts, names)]
    clashes = {s for s, c in Counter(shorts).items() if c > 1}
    seen: Counter[str] = Counter()
    out = []
    for s, n in zip(shorts, names):
        if s in clashes and s != n:
            seen[s] += 1
            tag = f" #{seen[s]}"
            out.append(s if seen[s] == 1 else short_name(n, limit - len(tag), drop_templates=False) + tag)
        else:
            out.append(s)
    return out
