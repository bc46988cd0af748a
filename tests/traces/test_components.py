"""Real kernel / operator names -> expected component (tested data; NCCL renaming must stay communication)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stepscope.errors import UserError
from stepscope.traces.components import ComponentRules

CASES = [
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "communication"),
    ("ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", "communication"),
    ("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", "communication"),
    ("void ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", "communication"),
    ("rcclGenericKernel<1, false>(ncclDevComm*, unsigned long, ncclWork*)", "communication"),
    ("nccl:all_reduce", "communication"),
    ("c10d::allreduce_", "communication"),
    ("ampere_sgemm_128x64_tn", "gemm"),
    ("volta_fp16_s884gemm_fp16_128x128_ldg8_f2f_nn", "gemm"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off", "gemm"),
    ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_16x5_tn_align4>(cutlass_80_tensorop_s1688gemm"
     "_128x128_16x5_tn_align4::Params)", "gemm"),
    ("void cublasLt::splitKreduce_kernel<32, 16, int, float, float, float, float, false, false>", "gemm"),
    ("nvjet_tst_128x256_64x4_2x1_v_bz_coopA_TNT", "gemm"),
    ("void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false, false>", "gemm"),
    ("Cijk_Ailk_Bljk_SB_MT64x64x16_MI32x32x2x1_SN_1LDSB0_APM1", "gemm"),
    ("triton_tem_fused_mm_0", "gemm"),
    ("aten::mm", "gemm"),
    ("aten::addmm", "gemm"),
    ("void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)2>", "convolution"),
    ("sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x16_stage4", "convolution"),
    ("void implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, false, true, true>", "convolution"),
    ("aten::cudnn_convolution", "convolution"),
    ("void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 512, true, 1>", "reduction"),
    ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>", "reduction"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float>>>",
     "reduction"),
    ("triton_red_fused_native_layer_norm_0", "reduction"),
    ("triton_per_fused_sum_1", "reduction"),
    ("void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, false, false>", "softmax"),
    ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float>", "softmax"),
    ("void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<128, 128, 64, 4>>", "attention"),
    ("flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel", "attention"),
    ("fmha_cutlassF_f16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::half_t>::Params)",
     "attention"),
    ("aten::_scaled_dot_product_flash_attention", "attention"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
     "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
     "elementwise"),
    ("triton_poi_fused_add_relu_0", "elementwise"),
    ("void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 4, 64, 64>", "elementwise"),
    ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
     "TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4>>", "optimizer"),
    ("Optimizer.step#SGD.step", "optimizer"),
    ("Memcpy HtoD (Pinned -> Device)", "memcpy"),
    ("Memcpy DtoD (Device -> Device)", "memcpy"),
    ("Memset (Device)", "memset"),
    ("some_custom_kernel_xyz", "other"),
]


@pytest.mark.parametrize(("name", "component"), CASES)
def test_default_rules_classify_real_names(name: str, component: str) -> None:
    assert ComponentRules.defaults().classify(name) == component


def test_project_rules_come_first_and_explain(tmp_path: Path) -> None:
    toml = tmp_path / "stepscope.toml"
    toml.write_text('[[components.rules]]\npattern = "custom_kernel"\ncomponent = "rope"\n')
    rules = ComponentRules.for_project(tmp_path / "sub" if False else tmp_path)
    assert rules.classify("some_custom_kernel_xyz") == "rope"
    assert rules.classify("ampere_sgemm_128x64_tn") == "gemm"
    ex = rules.explain("some_custom_kernel_xyz")
    assert ex.rule_index == 0 and ex.rule is not None and ex.rule.source == "stepscope.toml:1"
    assert ComponentRules.defaults().explain("zzz").rule is None
    assert "rope" in rules.component_names()


def test_bad_project_rules_are_one_line_user_errors(tmp_path: Path) -> None:
    toml = tmp_path / "stepscope.toml"
    toml.write_text('[[components.rules]]\npattern = "("\ncomponent = "x"\n')
    with pytest.raises(UserError, match="bad component pattern"):
        ComponentRules.from_toml(toml)
    toml.write_text("[[components.rules]]\npattern = 3\n")
    with pytest.raises(UserError, match="needs string keys"):
        ComponentRules.from_toml(toml)
