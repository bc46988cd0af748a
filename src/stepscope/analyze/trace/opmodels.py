"""FLOPs and bytes of one operator call from what the trace recorded: ``Input Dims``, ``Input type`` and, for
convolutions, ``Concrete Inputs`` (stride, padding, dilation, groups).

FLOPs count a multiply-add as two, as PyTorch's FLOP counter does (``torch.utils.flop_counter``, which gives
MFU its figure), so a GEMM's FLOPs here are the counter's:

- GEMM: ``mm`` A[M,K] B[K,N]: 2MNK; ``addmm`` / ``linear`` the same (the bias add is not counted, as PyTorch's
  counter); ``bmm`` / ``baddbmm`` 2BMNK; ``matmul`` as ``mm`` / ``bmm`` over the broadcast batch dims.
- Convolution (N,C,*in) x (K,C/g,*k): 2·N·K·prod(out)·(C/g)·prod(k), out = floor((in + 2p − d(k−1) − 1)/s) + 1
  per spatial dim (stride s, padding p, dilation d, groups g from Concrete Inputs). Without Concrete Inputs the
  stride is unknown: no model; transposed convolutions: no model.
- Convolution backward (``convolution_backward``: grad_out (N,K,*out), input, weight, ..., output_mask from
  Concrete Inputs): the forward's FLOPs for the input gradient, g times them for the weight gradient (as PyTorch's
  counter, which counts the weight gradient over all C input channels).
- Scaled-dot-product attention, q (B,H,L,D), k (B,H,S,D), v (B,H,S,Dv): 2BHLSD + 2BHLSDv (4BHLSD), causal or
  not (as PyTorch's counter); backward (``_scaled_dot_product_{flash,efficient,cudnn}_attention_backward``):
  2BHLS(3D + 2Dv), the scores recomputed and four gradient matmuls.
- Elementwise: one FLOP per output element (the broadcast shape of the tensor inputs); copies and fills none.
- Normalisation (layer, batch, group, RMS): 5 FLOPs per element (mean, centre, square, sum, scale), 2 more with
  an affine weight.

Bytes are the compulsory traffic: every tensor input read once and every output written once, at the sizes of
their dtypes (``Input type``); a copy reads its source and writes its destination, a fill only writes. Real
kernels may move more (re-reads, workspaces), never less, so achieved TB/s is a lower bound.

Anything else, or a call whose dims or types do not fit its model, gets a :class:`NoModel` with the reason:
never a guess.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

DTYPE_BYTES = {"float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2, "long int": 8, "int": 4, "short int": 2,
               "signed char": 1, "unsigned char": 1, "bool": 1, "c10::complex<float>": 8, "c10::complex<double>": 16,
               "c10::complex<c10::Half>": 4}
"""Bytes per element of the dtype names Kineto writes in ``Input type`` (``c10::Float8_*``: 1)."""
PRECISION = {"float": "fp32", "double": "fp64", "c10::Half": "fp16", "c10::BFloat16": "bf16"}
"""The peak a dtype's matrix work is compared with (``c10::Float8_*``: fp8); integers have none here."""

GEMM = frozenset({"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear"})
ATTENTION_BACKWARD = frozenset({"aten::_scaled_dot_product_flash_attention_backward",
                                "aten::_scaled_dot_product_efficient_attention_backward",
                                "aten::_scaled_dot_product_cudnn_attention_backward"})
ATTENTION = frozenset({"aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention",
                       "aten::_scaled_dot_product_efficient_attention", "aten::_scaled_dot_product_cudnn_attention",
                       "aten::_scaled_dot_product_flash_attention_for_cpu"})
CONV_ARGS: dict[str, tuple[int | None, int, int, int, int, int | None]] = {
    # name: (bias, stride, padding, dilation, groups, transposed) argument positions; a bool position: read there
    "aten::conv1d": (2, 3, 4, 5, 6, None), "aten::conv2d": (2, 3, 4, 5, 6, None),
    "aten::conv3d": (2, 3, 4, 5, 6, None),
    "aten::convolution": (2, 3, 4, 5, 8, 6), "aten::_convolution": (2, 3, 4, 5, 8, 6),
    "aten::cudnn_convolution": (None, 3, 2, 4, 5, None), "aten::miopen_convolution": (2, 4, 3, 5, 6, None),
    "aten::mkldnn_convolution": (2, 4, 3, 5, 6, None),
}
"""Where each convolution op keeps its arguments (its ATen signature)."""
NORMS = {"aten::native_layer_norm": 2, "aten::layer_norm": 2, "aten::native_batch_norm": 1,
         "aten::cudnn_batch_norm": 1, "aten::miopen_batch_norm": 1, "aten::batch_norm": 1,
         "aten::_batch_norm_impl_index": 1, "aten::native_group_norm": 1, "aten::group_norm": 2,
         "aten::rms_norm": 2, "aten::_fused_rms_norm": 2}
"""Normalisation ops and the position of their affine weight."""
ELEMENTWISE = frozenset(
    f"aten::{n}{s}" for n in ("add", "sub", "mul", "div", "rsub", "neg", "abs", "relu", "sigmoid", "tanh", "exp",
                              "log", "sqrt", "rsqrt", "gelu", "silu", "threshold_backward", "sigmoid_backward",
                              "tanh_backward", "gelu_backward", "silu_backward", "clamp", "clamp_min", "clamp_max",
                              "maximum", "minimum", "pow", "reciprocal", "where", "addcmul", "addcdiv", "lerp",
                              "nan_to_num", "hardtanh", "leaky_relu", "dropout", "native_dropout", "masked_fill")
    for s in ("", "_"))
COMPARISONS = frozenset(f"aten::{n}" for n in ("eq", "ne", "lt", "le", "gt", "ge"))
MOVES = frozenset({"aten::copy_", "aten::fill_", "aten::zero_"})


@dataclass(frozen=True, slots=True)
class OpCost:
    """One call's model. family: gemm, convolution, attention, elementwise or normalization. flops and bytes
    per call. dtype: the first tensor input's ``Input type``; precision: the peak it is compared with (None: no
    peak for it). matrix: runs on the matrix units (tensor / matrix cores) rather than the vector units."""

    family: str
    flops: float
    bytes: float
    dtype: str
    precision: str | None
    matrix: bool


@dataclass(frozen=True, slots=True)
class NoModel:
    """Why a call has no model (e.g. "missing stride", "no model for aten::cumsum")."""

    reason: str


class _Miss(Exception):
    """The call does not fit its model; the message is the reason."""


def _size(dtype: str) -> int:
    if dtype.startswith("c10::Float8_"):
        return 1
    if dtype not in DTYPE_BYTES:
        raise _Miss(f"unknown dtype {dtype!r}" if dtype else "missing dtype")
    return DTYPE_BYTES[dtype]


def _precision(dtype: str) -> str | None:
    return "fp8" if dtype.startswith("c10::Float8_") else PRECISION.get(dtype)


def _tensor(dims: list[Any], i: int) -> list[int]:
    if i >= len(dims) or not isinstance(dims[i], list) or not all(isinstance(d, int) for d in dims[i]) \
            or not dims[i]:
        raise _Miss(f"input {i} is not a tensor with recorded dims")
    return list(dims[i])


def _nbytes(shape: list[int], dtype: str) -> float:
    return float(math.prod(shape) * _size(dtype))


def _inputs_bytes(dims: list[Any], types: list[Any]) -> float:
    """Every tensor input (a list of integers with a dtype) read once."""
    return sum(_nbytes(d, t) for d, t in zip(dims, types, strict=False)
               if isinstance(d, list) and d and all(isinstance(x, int) for x in d) and isinstance(t, str)
               and (t in DTYPE_BYTES or t.startswith("c10::Float8_")))


def _gemm(name: str, dims: list[Any], types: list[Any]) -> tuple[float, list[int]]:
    """FLOPs and output shape of a GEMM-family op."""
    off = 1 if name in ("aten::addmm", "aten::baddbmm") else 0
    a, b = _tensor(dims, off), _tensor(dims, off + 1)
    if name == "aten::linear":
        if len(b) != 2 or a[-1] != b[1]:
            raise _Miss("linear: weight is not (out, in) of the input's last dim")
        m = math.prod(a[:-1])
        return 2.0 * m * b[0] * a[-1], [*a[:-1], b[0]]
    if name in ("aten::mm", "aten::addmm") and (len(a) != 2 or len(b) != 2):
        raise _Miss("mm: inputs are not matrices")
    if name in ("aten::bmm", "aten::baddbmm") and (len(a) != 3 or len(b) != 3 or a[0] != b[0]):
        raise _Miss("bmm: inputs are not batches of one size")
    if len(a) < 2 or len(b) < 2:
        raise _Miss("matmul of a vector: no model")
    if a[-1] != b[-2]:
        raise _Miss("inner dims differ")
    try:
        batch = _broadcast([a[:-2], b[:-2]])
    except _Miss:
        raise _Miss("batch dims do not broadcast") from None
    return 2.0 * math.prod(batch) * a[-2] * b[-1] * a[-1], [*batch, a[-2], b[-1]]


def _broadcast(shapes: list[list[int]]) -> list[int]:
    n = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(n):
        sizes = {s[len(s) - n + i] for s in shapes if len(s) - n + i >= 0} - {1}
        if len(sizes) > 1:
            raise _Miss("shapes do not broadcast")
        out.append(sizes.pop() if sizes else 1)
    return out


def _ints(text: Any, name: str) -> list[int]:
    """A Concrete Inputs list such as "[2, 2]" (or a single "1")."""
    if not isinstance(text, str) or not text:
        raise _Miss(f"missing {name}")
    try:
        vals = [int(x) for x in text.strip("[]").split(",") if x.strip()]
    except ValueError:
        raise _Miss(f"unreadable {name} {text!r}") from None
    if not vals:
        raise _Miss(f"missing {name}")
    return vals


def _conv(name: str, dims: list[Any], concrete: list[Any] | None) -> tuple[float, list[int]]:
    """FLOPs and output shape of a convolution."""
    _, stride_at, pad_at, dil_at, groups_at, transposed_at = CONV_ARGS[name]
    x, w = _tensor(dims, 0), _tensor(dims, 1)
    if concrete is None or len(concrete) <= max(stride_at, pad_at, dil_at, groups_at):
        raise _Miss("missing stride (no Concrete Inputs)")
    spatial = len(x) - 2
    if spatial < 1 or len(w) != len(x):
        raise _Miss("input and weight ranks differ")

    def per_dim(v: list[int], what: str) -> list[int]:
        if len(v) == 1:
            return v * spatial
        if len(v) != spatial:
            raise _Miss(f"{what} has {len(v)} values for {spatial} dims")
        return v

    stride = per_dim(_ints(concrete[stride_at], "stride"), "stride")
    pad = per_dim(_ints(concrete[pad_at], "padding"), "padding")
    dil = per_dim(_ints(concrete[dil_at], "dilation"), "dilation")
    groups = _ints(concrete[groups_at], "groups")[0]
    transposed = transposed_at is not None and concrete[transposed_at] in ("True", "true", "1")
    if transposed:
        raise _Miss("transposed convolution: no model")
    n, c, k, kernel = x[0], x[1], w[0], w[2:]
    if groups < 1 or c % groups or w[1] * groups != c:
        raise _Miss("channels do not match the weight and groups")
    out = [(i + 2 * p - d * (kk - 1) - 1) // s + 1 for i, p, d, kk, s in zip(x[2:], pad, dil, kernel, stride)]
    if min(out) < 1:
        raise _Miss("empty output")
    return 2.0 * n * k * math.prod(out) * (c // groups) * math.prod(kernel), [n, k, *out]


def _conv_backward(dims: list[Any], types: list[Any], concrete: list[Any] | None) -> OpCost:
    """grad_out (N,K,*out), input (N,C,*in), weight (K,C/g,*k); Concrete Inputs: transposed at 7, groups at 9,
    output_mask at 10."""
    grad, x, w = _tensor(dims, 0), _tensor(dims, 1), _tensor(dims, 2)
    if concrete is None or len(concrete) < 11:
        raise _Miss("missing output mask (no Concrete Inputs)")
    if concrete[7] in ("True", "true", "1"):
        raise _Miss("transposed convolution: no model")
    groups = _ints(concrete[9], "groups")[0]
    mask = [m.strip() == "True" for m in str(concrete[10]).strip("[]").split(",")]
    if len(mask) != 3 or len(grad) != len(x) or len(w) != len(x) or grad[1] != w[0] or w[1] * groups != x[1]:
        raise _Miss("grad_out, input and weight do not match")
    forward = 2.0 * grad[0] * grad[1] * math.prod(grad[2:]) * w[1] * math.prod(w[2:])
    dtype = str(types[1])
    written = (_nbytes(x, dtype) if mask[0] else 0) + (_nbytes(w, dtype) if mask[1] else 0) \
        + (w[0] * _size(dtype) if mask[2] else 0)
    return OpCost("convolution", forward * mask[0] + forward * groups * mask[1],
                  _inputs_bytes(dims, types) + written, dtype, _precision(dtype), True)


def _attention(dims: list[Any]) -> tuple[float, list[int]]:
    q, k, v = _tensor(dims, 0), _tensor(dims, 1), _tensor(dims, 2)
    if len(q) != 4 or len(k) != 4 or len(v) != 4 or q[-1] != k[-1] or k[-2] != v[-2]:
        raise _Miss("q, k, v are not (B, H, L, D) with matching dims")
    b, h, ln, d = q
    s, dv = k[-2], v[-1]
    return 2.0 * b * h * ln * s * d + 2.0 * b * h * ln * s * dv, [b, h, ln, dv]


def op_cost(name: str, dims: Any, types: Any, concrete: Any = None) -> OpCost | NoModel:
    """The model of one call of ``name`` with its recorded ``Input Dims``, ``Input type`` and ``Concrete Inputs``
    (the latter two None where the trace has none)."""
    if not isinstance(dims, list):
        return NoModel("no Input Dims")
    if not isinstance(types, list) or len(types) != len(dims):
        return NoModel("no Input type")
    try:
        return _cost(name, dims, types, concrete if isinstance(concrete, list) else None)
    except _Miss as e:
        return NoModel(str(e))
    except ArithmeticError:  # a zero stride, sizes past float range: damage, not a shape to model
        return NoModel("dims or arguments out of range")


def _cost(name: str, dims: list[Any], types: list[Any], concrete: list[Any] | None) -> OpCost:
    if name in GEMM:
        off = 1 if name in ("aten::addmm", "aten::baddbmm") else 0
        dtype = str(types[off])
        flops, out = _gemm(name, dims, types)
        return OpCost("gemm", flops, _inputs_bytes(dims, types) + _nbytes(out, dtype), dtype, _precision(dtype), True)
    if name in CONV_ARGS:
        dtype = str(types[0])
        flops, out = _conv(name, dims, concrete)
        return OpCost("convolution", flops, _inputs_bytes(dims, types) + _nbytes(out, dtype), dtype,
                      _precision(dtype), True)
    if name == "aten::convolution_backward":
        return _conv_backward(dims, types, concrete)
    if name in ATTENTION_BACKWARD:
        grad, q, k, v = (_tensor(dims, i) for i in range(4))
        if len(q) != 4 or len(k) != 4 or len(v) != 4 or grad[:-1] != q[:-1] or grad[-1] != v[-1] \
                or k[-2] != v[-2]:
            raise _Miss("grad_out, q, k, v are not (B, H, L, D) with matching dims")
        b, h, ln, d = q
        dtype = str(types[1])
        written = sum(_nbytes(_tensor(dims, i), str(types[i])) for i in (1, 2, 3))  # dq, dk, dv
        return OpCost("attention", 2.0 * b * h * ln * k[-2] * (3 * d + 2 * v[-1]),
                      _inputs_bytes(dims, types) + written, dtype, _precision(dtype), True)
    if name in ATTENTION:
        dtype = str(types[0])
        flops, out = _attention(dims)
        return OpCost("attention", flops, _inputs_bytes(dims, types) + _nbytes(out, dtype), dtype,
                      _precision(dtype), True)
    if name in NORMS:
        x, dtype = _tensor(dims, 0), str(types[0])
        n = math.prod(x)
        w = NORMS[name]
        affine = w < len(dims) and isinstance(dims[w], list) and bool(dims[w])
        return OpCost("normalization", float(n * (7 if affine else 5)),
                      _inputs_bytes(dims, types) + _nbytes(x, dtype), dtype, _precision(dtype), False)
    if name in ELEMENTWISE or name in COMPARISONS or name in MOVES:
        return _elementwise(name, dims, types)
    raise _Miss(f"no model for {name}")


def _elementwise(name: str, dims: list[Any], types: list[Any]) -> OpCost:
    tensors = [(list(d), str(t)) for d, t in zip(dims, types, strict=False)
               if isinstance(d, list) and d and all(isinstance(x, int) for x in d)]
    if not tensors:
        raise _Miss("no tensor input with recorded dims")
    dtype = tensors[0][1]
    if name == "aten::copy_":
        if len(tensors) < 2:
            raise _Miss("copy_ without a source tensor")
        (dst, dt), (src, st) = tensors[0], tensors[1]
        return OpCost("elementwise", 0.0, _nbytes(src, st) + _nbytes(dst, dt), dtype, _precision(dtype), False)
    if name in ("aten::fill_", "aten::zero_"):
        return OpCost("elementwise", 0.0, _nbytes(tensors[0][0], dtype), dtype, _precision(dtype), False)
    out = _broadcast([s for s, _ in tensors])
    n = math.prod(out)
    written = n * (1 if name in COMPARISONS else _size(dtype))
    read = sum(_nbytes(s, t) for s, t in tensors)
    return OpCost("elementwise", float(n), read + written, dtype, _precision(dtype), False)
