"""Component rules see the kernel's own name, not its template arguments or parameter types (issue 41, item 1).

The hand table below was checked against what each kernel does (PyTorch, FBGEMM, cuDNN, cuBLAS sources); the
golden file covers every distinct kernel of every fixture in tests/data/traces/.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import orjson
import pytest

from stepscope.traces.components import ComponentRules
from stepscope.traces.rules_kernel_name import kernel_name

FIXTURES = Path(__file__).parents[1] / "data" / "traces"
GOLDEN = Path(__file__).parent / "golden" / "kernel_components.json"
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")

# (signature as in the trace, the name the rules see, component) — the ones the whole signature got wrong.
HAND = [
    ("void fbgemm_gpu::permute_2D_data_kernel<false, int, int, decltype(nullptr)>(int, int, int, int const*, "
     "decltype(nullptr) const*, int const*, int const*, int const*, int*, decltype(nullptr)*)",
     "permute_2D_data_kernel", "other"),
    ("void fbgemm_gpu::permute_2D_lengths_kernel<int>(int, int, int const*, int const*, int*)",
     "permute_2D_lengths_kernel", "other"),
    ("void fbgemm_gpu::(anonymous namespace)::_compute_FP8_quantize_cuda_kernel<float>(float const*, float const*, "
     "int, int, unsigned char*, bool)", "_compute_FP8_quantize_cuda_kernel", "other"),
    ("void bounds_check_indices_kernel<long, false>(at::GenericPackedTensorAccessor<long, 1ul, at::RestrictPtrTraits,"
     " int>, fbgemm_gpu::FixedDivisor, long)", "bounds_check_indices_kernel", "other"),
    ("void split_embedding_codegen_forward_unweighted_kernel<c10::Half, c10::Half, float, false, long, 2ul, 32ul>"
     "(at::GenericPackedTensorAccessor<c10::Half, 1ul, at::RestrictPtrTraits, long>, fbgemm_gpu::FixedDivisor)",
     "split_embedding_codegen_forward_unweighted_kernel", "other"),
    # "{lambda(float)#1}" among the template arguments contains "lamb" (the LAMB optimizer's rule)
    ("void at::native::vectorized_elementwise_kernel<4, fbgemm_gpu::_float_to_hfp8_gpu(at::Tensor const&, long, "
     "long, double)::{lambda(float)#1}, at::detail::Array<char*, 2> >(int, fbgemm_gpu::_float_to_hfp8_gpu("
     "at::Tensor const&, long, long, double)::{lambda(float)#1}, at::detail::Array<char*, 2>)",
     "vectorized_elementwise_kernel", "elementwise"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
     "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, "
     "unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
     "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, "
     "unsigned int, float, 4>)", "reduce_kernel", "reduction"),
    # a launcher: the first template argument is the kernel
    ("void cutlass_cudnn_infer::Kernel<cutlass_tensorop_s1688fprop_optimized_tf32_128x128_16x4_nhwc_align4>("
     "cutlass_tensorop_s1688fprop_optimized_tf32_128x128_16x4_nhwc_align4::Params)",
     "cutlass_tensorop_s1688fprop_optimized_tf32_128x128_16x4_nhwc_align4", "convolution"),
    ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_16x5_tn_align4>(cutlass_80_tensorop_s1688gemm"
     "_128x128_16x5_tn_align4::Params)", "cutlass_80_tensorop_s1688gemm_128x128_16x5_tn_align4", "gemm"),
    # a name that says nothing: its namespace decides (cuBLAS's gemv, cuDNN's convolution helpers)
    ("std::enable_if<!(false), void>::type internal::gemvx::kernel<int, int, float, float, float, float, false, "
     "true, false, false, 7, false, cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<float const>, "
     "cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float>, float> >("
     "cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float "
     "const>, cublasGemvTensorStridedBatched<float>, float>)", "kernel", "gemm"),
    ("void cask_cudnn::computeOffsetsKernel<false, false>(cask_cudnn::ComputeOffsetsParams)",
     "computeOffsetsKernel", "convolution"),
    ("void cudnn::ops::scalePackedTensor_kernel<float, float>(long, float*, float)", "scalePackedTensor_kernel",
     "convolution"),
    # PyTorch's layer-norm backward and group-norm statistics are reductions
    ("void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernel<float, float>(long, long, float const*, "
     "float const*, float const*, float const*, float*, float*)", "GammaBetaBackwardCUDAKernel", "reduction"),
    ("void at::native::(anonymous namespace)::RowwiseMomentsCUDAKernel<float, float>(long, float, float const*, "
     "float*, float*)", "RowwiseMomentsCUDAKernel", "reduction"),
    # not signatures: kept whole
    ("Memcpy HtoD (Pinned -> Device)", "Memcpy HtoD (Pinned -> Device)", "memcpy"),
    ("aten::mm", "aten::mm", "gemm"),
    ("c10d::allreduce_", "c10d::allreduce_", "communication"),
    ("fbgemm::jagged_to_padded_dense", "fbgemm::jagged_to_padded_dense", "other"),
]


@pytest.mark.parametrize(("signature", "name", "component"), HAND)
def test_hand_checked_kernels(signature: str, name: str, component: str) -> None:
    k = kernel_name(signature)
    assert k.name == name and signature[k.start:k.end] == name
    assert ComponentRules.defaults().classify(signature) == component


def _fixture_kernels() -> dict[str, dict[str, float]]:
    """fixture file -> kernel signature -> total µs, read straight from the JSON."""
    out: dict[str, dict[str, float]] = {}
    for f in sorted(FIXTURES.glob("*/*.json.gz")):
        doc = orjson.loads(gzip.decompress(f.read_bytes()))
        per: dict[str, float] = {}
        for e in doc.get("traceEvents", []):
            if e.get("cat") in GPU_CATS:
                per[e["name"]] = per.get(e["name"], 0.0) + float(e.get("dur", 0))
        out[f"{f.parent.name}/{f.name}"] = per
    return out


def test_every_fixture_kernel_matches_the_golden_table() -> None:
    golden: dict[str, dict[str, str]] = json.loads(GOLDEN.read_text())
    rules = ComponentRules.defaults()
    found = {fx: {sig: rules.classify(sig) for sig in per} for fx, per in _fixture_kernels().items()}
    assert {fx for fx, per in found.items() if per} == set(golden)
    for fx, per in golden.items():
        assert found[fx] == per, fx


def test_sampled_128rank_gemm_is_only_gemm_kernels() -> None:
    """Rank 0's "gemm" time is the time of the kernels whose own name says GEMM (cuBLAS sgemm, gemv, splitK)."""
    per = _fixture_kernels()["sampled_128rank/rank0.json.gz"]
    rules = ComponentRules.defaults()
    gemm_us = sum(us for sig, us in per.items() if rules.classify(sig) == "gemm")
    # by hand: a kernel is a GEMM when the text before its parameter list (cuBLAS's enable_if return type and
    # FBGEMM's namespace aside) says gemm / gemv / splitK: cuBLAS sgemm / gemv / splitKreduce, CUTLASS s1688gemm
    def head(sig: str) -> str:
        return sig.replace("std::enable_if<!(false), void>::type ", "").split("(")[0].replace("fbgemm_gpu::", "")\
            .lower()
    by_hand = sum(us for sig, us in per.items() if any(w in head(sig) for w in ("gemm", "gemv", "splitk")))
    assert by_hand > 0 and gemm_us == pytest.approx(by_hand)
    fbgemm_us = sum(us for sig, us in per.items() if "fbgemm_gpu::" in sig or "FixedDivisor" in sig)
    assert fbgemm_us > 30_000  # the 38.8 ms the whole-signature match filed as gemm


def test_explain_shows_the_part_that_matched() -> None:
    rules = ComponentRules.defaults()
    sig = HAND[3][0]
    e = rules.explain(sig)
    assert e.component == "other" and e.part == "name" and e.matched == "bounds_check_indices_kernel"
    e = rules.explain(HAND[9][0])
    assert e.component == "gemm" and e.part == "namespace" and e.matched == "internal::gemvx"
    d = e.to_dict()
    assert d["part"] == "namespace" and d["matched"] == "internal::gemvx" and d["name"] == HAND[9][0]
    e = rules.explain("aten::mm")
    assert e.part == "whole" and e.matched == "aten::mm"


def test_rules_explain_cli_takes_the_full_signature(capsys: pytest.CaptureFixture[str]) -> None:
    from stepscope.cli import main

    sig = HAND[3][0]
    assert main(["trace", "rules", "--explain", sig, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["component"] == "other" and out["part"] == "name" and out["matched"] == "bounds_check_indices_kernel"
    assert sig[out["span"][0]:out["span"][1]] == "bounds_check_indices_kernel"
    assert main(["trace", "rules", "--explain", HAND[11][0]]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "-> convolution" in text and "namespaces: 'cudnn::ops'" in text
