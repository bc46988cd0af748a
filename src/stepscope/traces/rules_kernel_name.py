"""The kernel's own name inside a demangled C++ signature, which the component rules match on.

A demangled kernel name carries a return type, namespaces, template arguments and a parameter list:
``void fbgemm_gpu::permute_2D_data_kernel<false, int, int, decltype(nullptr)>(int, int, ...)``. Matching rules on
all of it lets an argument type decide (``{lambda(float)#1}`` contains "lamb", ``cublasLtEpilogue_t`` contains
"cublas"), so rules see the parts separately: first the name (``permute_2D_data_kernel``), then, only if no rule
matched the name, its namespaces (``fbgemm_gpu``), never the template arguments or parameters. Kept whole:

* a name that is not a signature (no template arguments, no parameter list, no return type): an operator such as
  ``aten::mm`` or ``c10d::allreduce_``, or a runtime record such as ``Memcpy HtoD (Pinned -> Device)``;
* a generic launcher (``cutlass::Kernel<Op>``, ``cutlass::device_kernel<Op>``) is read through: its first template
  argument is the real kernel, so that argument's own name and namespaces are used.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ANON = "(anonymous namespace)"
_TOKEN = re.compile(r"[<>(){}]|::| ")
_IDENT_END = re.compile(r"[\w>\]]")
_LAUNCHERS = frozenset({"Kernel", "Kernel2", "device_kernel"})
"""Launch templates (CUTLASS, CuTe) whose first template argument is the kernel that does the work."""
_PAIRS = {"(": ")", "{": "}", "<": ">"}


@dataclass(frozen=True, slots=True)
class KernelName:
    """The parts of a signature the rules see; ``signature[start:end] == name`` (``whole``: not a signature)."""

    signature: str
    name: str
    start: int
    end: int
    scope: str
    """Namespaces and enclosing classes without template arguments ("" when none), e.g. ``fbgemm_gpu``."""
    scope_start: int
    scope_end: int

    @property
    def whole(self) -> bool:
        return self.start == 0 and self.end == len(self.signature)


def _whole(sig: str) -> KernelName:
    return KernelName(sig, sig, 0, len(sig), "", 0, 0)


def _skip(sig: str, i: int) -> int:
    """Index just past the bracket group opening at ``sig[i]``; inside ``(`` / ``{`` angle brackets are text."""
    stack = [_PAIRS[sig[i]]]
    for m in _TOKEN.finditer(sig, i + 1):
        t = m.group()
        if t == stack[-1]:
            stack.pop()
            if not stack:
                return m.end()
        elif t in "({" or (t == "<" and stack[-1] == ">"):
            stack.append(_PAIRS[t])
    return len(sig)


def kernel_name(signature: str) -> KernelName:
    """Split a demangled signature into the kernel's name and its namespaces (see the module doc)."""
    sig = signature
    if not any(c in sig for c in "<( "):
        return _whole(sig)  # "aten::mm", "ampere_sgemm_128x64_tn": nothing to strip
    i, n = 0, len(sig)
    start = 0       # start of the last space-separated token: the qualified name after any return type
    comp = 0        # start of the last "::" component
    tmpl = -1       # where the last component's template arguments open
    params = -1
    while i < n:
        m = _TOKEN.search(sig, i)
        if m is None:
            break
        t, at = m.group(), m.start()
        if t == "(" and sig.startswith(_ANON, at):
            i = at + len(_ANON)
        elif t == "(":
            if at > 0 and _IDENT_END.match(sig[at - 1]):
                params = at
                break
            return _whole(sig)  # a space before "(": prose such as "Memcpy HtoD (Pinned -> Device)"
        elif t == "<":
            if tmpl < 0:
                tmpl = at
            i = _skip(sig, at)
        elif t == "::":
            comp, tmpl = m.end(), -1
            i = m.end()
        elif t == " ":
            start = comp = m.end()
            tmpl = -1
            i = m.end()
        else:  # a stray closing bracket or "{": not C++ we can read
            return _whole(sig)
    if params < 0 and tmpl < 0 and start == 0:
        return _whole(sig)
    name_end = tmpl if tmpl >= 0 else (params if params >= 0 else n)
    name = sig[comp:name_end]
    if name in _LAUNCHERS and tmpl >= 0:
        arg = _first_template_argument(sig, tmpl)
        if arg is not None:
            a, b = arg
            inner = kernel_name(sig[a:b])
            return KernelName(sig, inner.name, a + inner.start, a + inner.end, inner.scope,
                              a + inner.scope_start, a + inner.scope_end)
    scope_end = comp - 2 if comp - 2 > start else start
    scope = _strip_templates(sig[start:scope_end])
    return KernelName(sig, name, comp, name_end, scope, start, scope_end)


def _strip_templates(text: str) -> str:
    out, i = [], 0
    while True:
        j = text.find("<", i)
        if j < 0:
            out.append(text[i:])
            return "".join(out)
        out.append(text[i:j])
        i = _skip(text, j)


def _first_template_argument(sig: str, at: int) -> tuple[int, int] | None:
    """Span of the first argument of the template list opening at ``sig[at]`` (None if empty)."""
    end = _skip(sig, at) - 1
    i = at + 1
    while i < end:
        c = sig[i]
        if c in "<({":
            i = _skip(sig, i)
            continue
        if c == ",":
            break
        i += 1
    a, b = at + 1, min(i, end)
    while a < b and sig[a] == " ":
        a += 1
    while b > a and sig[b - 1] == " ":
        b -= 1
    return (a, b) if b > a else None
