"""Components: ordered regex rules that map kernel and operator names to what they do.

The first rule whose pattern matches (``re.search``, case-insensitive) names the component; a name no
rule matches is ``other``. In a demangled C++ signature the rules see the kernel's own name, then (when no rule
matched it) its namespaces, never its return type, template arguments or parameters (``rules_kernel_name.py``).
A project's ``stepscope.toml`` adds rules before the defaults (so they win)::

    [[components.rules]]
    pattern = "my_fused_rope"
    component = "attention"

    [components]
    replace_defaults = false   # true: use only the project's rules

``stepscope trace rules`` prints the effective list; ``--explain NAME`` says which rule matched.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from stepscope.errors import UserError
from stepscope.traces.rules_kernel_name import kernel_name

COMPONENTS: tuple[str, ...] = (
    "gemm", "convolution", "attention", "elementwise", "reduction", "softmax", "optimizer",
    "communication", "memcpy", "memset", "other",
)
"""Built-in component names, in report order. Project rules may introduce others."""

OTHER = "other"

XLA_TF_RULES: tuple[tuple[str, str], ...] = (
    # TensorFlow / JAX profiles (traces/xla.py): XLA HLO op names ("all-reduce.3", "copy-start.1", "fusion.12")
    # and TensorFlow op types ("CollectiveReduceV2", "MemcpyH2D", "_Send"). Anchored, so no PyTorch name matches.
    (r"^(all-reduce|all-gather|reduce-scatter|all-to-all|collective-permute|collective-broadcast|ragged-all-to-all"
     r"|send|recv)(-start|-done)?([._]\d+)*$|^collective(reduce|gather|bcast|permute|alltoall)|^horovod"
     r"|^nccl(allreduce|reduce|broadcast)", "communication"),
    (r"^(copy|copy-start|copy-done)([._]\d+)*$|^memcpy(h2d|d2h|d2d|p2p)|^_(host)?(send|recv)$", "memcpy"),
    (r"^(dot|dot_general)([._]\d+)*$|^(ynn|xnn|onednn|gemm|cublas|triton_gemm)_fusion", "gemm"),
    (r"^(reduce|reduce-window|reduce_window|input_reduce_fusion|reduction_fusion)([._]\d+)*$", "reduction"),
    (r"^(loop_|input_)?(\w+_)?fusion([._]\d+)*$|^wrapped_", "elementwise"),
    (r"^(sum|mean|max|min|prod|argmax|argmin|all|any|l2loss|biasaddgrad)$", "reduction"),
    (r"^(biasadd(v1)?|addv2|addn|sub|mul|realdiv|div|neg|square|squareddifference|sqrt|rsqrt|exp|log|cast"
     r"|select(v2)?|tile|transpose|reshape|concatv2|pack|fill|zeroslike|oneslike|relugrad|sigmoidgrad|tanhgrad|pow|stridedslice|slice|gatherv2|bitcast)$",
     "elementwise"),
)
"""XLA and TensorFlow names, tried before the rules below (docs/traces.md, "TensorFlow and JAX profiles")."""

DEFAULT_RULES: tuple[tuple[str, str], ...] = (
    *XLA_TF_RULES,
    # Communication first: NCCL kernels are named ncclKernel_* (NCCL < 2.19) and ncclDevKernel_* (newer);
    # RCCL keeps the nccl prefix; operator-level names cover c10d / gloo.
    (r"nccl|rccl|gloo|^c10d::|record_param_comms|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all",
     "communication"),
    (r"^memcpy|^dma|memcpy(async|htod|dtoh|dtod|peer)|^(cuda|hip)memcpy", "memcpy"),
    (r"^memset|^(cuda|hip)memset", "memset"),
    (r"flash|fmha|attention|_attn|sdpa|scaled_dot_product|mha_fwd|mha_bwd", "attention"),
    (r"multi_tensor_apply|adam|sgd|lamb|adagrad|rmsprop|optimizer\.|zero_grad", "optimizer"),
    (r"softmax", "softmax"),
    (r"bn_fw|bn_bw|batch_?norm|layer_?norm|group_?norm|instance_?norm|rms_?norm|welford"
     r"|gammabetabackward|rowwisemoments", "reduction"),
    (r"conv|implicit_gemm|implicit_convolve|winograd|fft2d|fprop|dgrad|wgrad|cudnn|miopen"
     r"|nchwtonhwc|nhwctonchw", "convolution"),
    # FBGEMM's kernels and operators (embeddings, permutes, quantisation) are not GEMMs despite the name
    (r"(?<!fb)gemm|gemv|cublas|cutlass|nvjet|matmul|^cijk_|wmma|triton_tem|dot_kernel|splitk"
     r"|^aten::(mm|bmm|addmm|addmv|mv|linear|baddbmm|einsum|dot)$|^(mm|bmm|addmm|linear)backward", "gemm"),
    (r"reduce|reduction|triton_red|triton_per|sum_kernel|norm_kernel|argmax|argmin|max_pool|avg_pool|average_pool"
     r"|^aten::(sum|mean|max|min|norm|var|std|amax|amin)$", "reduction"),
    (r"elementwise|triton_poi|pointwise|copy|catarray|fill|index|scatter|gather|where|relu|gelu|silu|sigmoid"
     r"|tanh|dropout|clamp|^aten::(add|sub|mul|div|pow|exp|neg|cat|to|_to_copy|zero_|ones_like|zeros_like)_?$"
     r"|functor|unrolled|vectorized", "elementwise"),
)
"""(pattern, component) in the order they are tried. Tested against real names in tests/traces."""


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule: ``pattern`` is searched case-insensitively in the name."""

    pattern: str
    component: str
    source: str
    """"default" or "<file>:<n>" for the n-th project rule."""
    regex: re.Pattern[str] = field(compare=False, repr=False)

    def to_dict(self) -> dict[str, str]:
        return {"pattern": self.pattern, "component": self.component, "source": self.source}


PARTS = ("name", "namespace", "whole")
"""What a rule was matched on: a signature's kernel name, its namespaces, or a name that is not a signature."""


@dataclass(frozen=True, slots=True)
class Explanation:
    """Which rule named a name's component (``rule`` None: no rule matched, so ``other``) and on which part."""

    name: str
    component: str
    rule_index: int | None
    rule: Rule | None
    part: str
    """One of PARTS: the part the rule matched (or, with no match, the last part tried)."""
    matched: str
    """The text of that part."""
    span: tuple[int, int]
    """Where that part sits in ``name``."""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "component": self.component, "rule_index": self.rule_index,
                "rule": self.rule.to_dict() if self.rule else None, "part": self.part, "matched": self.matched,
                "span": list(self.span)}


def _compile(pattern: str, component: str, source: str) -> Rule:
    try:
        regex = re.compile(pattern, re.IGNORECASE)
    except re.error as exc:
        raise UserError(f"{source}: bad component pattern {pattern!r} ({exc}) — fix the regular expression") from None
    return Rule(pattern, component, source, regex)


class ComponentRules:
    """An ordered rule list with a per-name cache."""

    def __init__(self, rules: Sequence[Rule]) -> None:
        self.rules: tuple[Rule, ...] = tuple(rules)
        self._cache: dict[str, tuple[int, int]] = {}

    @classmethod
    def defaults(cls) -> ComponentRules:
        return cls([_compile(p, c, "default") for p, c in DEFAULT_RULES])

    @classmethod
    def from_toml(cls, path: str | Path) -> ComponentRules:
        """Defaults plus the ``[[components.rules]]`` of a ``stepscope.toml`` (which come first)."""
        import tomllib  # only where a project has rules (start-up of `stepscope trace`)

        p = Path(path)
        try:
            doc = tomllib.loads(p.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise UserError(f"{p}: cannot read ({exc}) — fix or remove the file") from None
        section = doc.get("components", {})
        entries = section.get("rules", []) if isinstance(section, dict) else []
        if not isinstance(entries, list):
            raise UserError(f"{p}: components.rules must be an array of tables — write [[components.rules]]")
        own = []
        for i, entry in enumerate(entries, start=1):
            if not isinstance(entry, dict) or not isinstance(entry.get("pattern"), str) \
                    or not isinstance(entry.get("component"), str):
                raise UserError(f"{p}: components.rules #{i} needs string keys pattern and component")
            own.append(_compile(entry["pattern"], entry["component"], f"{p.name}:{i}"))
        base = [] if section.get("replace_defaults") is True else list(cls.defaults().rules)
        return cls(own + base)

    @classmethod
    def for_project(cls, start: str | Path | None = None) -> ComponentRules:
        """Rules of the nearest ``stepscope.toml`` at or above ``start`` (default: cwd), else defaults."""
        here = Path(start or Path.cwd()).resolve()
        for folder in (here, *here.parents):
            candidate = folder / "stepscope.toml"
            if candidate.is_file():
                return cls.from_toml(candidate)
        return cls.defaults()

    def _first(self, text: str) -> int:
        return next((i for i, r in enumerate(self.rules) if r.regex.search(text)), -1)

    def _index(self, name: str) -> tuple[int, int]:
        """(rule index or -1, index into PARTS of the part it matched or the last part tried); cached."""
        hit = self._cache.get(name)
        if hit is None:
            k = kernel_name(name)
            if k.whole:
                hit = (self._first(name), 2)
            else:
                i = self._first(k.name)
                hit = (i, 0) if i >= 0 or not k.scope else (self._first(k.scope), 1)
            self._cache[name] = hit
        return hit

    def classify(self, name: str) -> str:
        i = self._index(name)[0]
        return self.rules[i].component if i >= 0 else OTHER

    def explain(self, name: str) -> Explanation:
        i, part = self._index(name)
        rule = self.rules[i] if i >= 0 else None
        k = kernel_name(name)
        span = (0, len(name)) if part == 2 else (k.start, k.end) if part == 0 else (k.scope_start, k.scope_end)
        matched = name if part == 2 else k.name if part == 0 else k.scope
        return Explanation(name, rule.component if rule else OTHER, i if i >= 0 else None, rule, PARTS[part],
                           matched, span)

    def component_names(self) -> tuple[str, ...]:
        extra = [r.component for r in self.rules if r.component not in COMPONENTS]
        return COMPONENTS + tuple(dict.fromkeys(extra))

    def codes(self, names: Sequence[str]) -> tuple[npt.NDArray[np.int32], tuple[str, ...]]:
        """Component code per distinct name, and the component names the codes index."""
        comps = self.component_names()
        at = {c: i for i, c in enumerate(comps)}
        return np.asarray([at[self.classify(n)] for n in names], dtype=np.int32), comps
