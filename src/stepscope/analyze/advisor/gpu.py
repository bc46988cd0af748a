"""Rules about the GPU side of a step, from the profiled window (trace) or NVML samples."""

from __future__ import annotations

from typing import ClassVar

from stepscope.analyze.advisor.base import AdvisorInput, Finding, finding, per_step_s, worst_trace

GPU_IDLE_SHARE = 0.20
GPU_UTIL_LOW_PCT = 50.0
SHORT_KERNEL_SHARE = 1 / 3
"""Share of kernels that finished faster than the CPU call that launched them. (Until the advisor read the trace
engine's launch pairing it counted kernels under a fixed 10 µs with a 40% bar; the launch-relative count is
stricter, e.g. 38% instead of 43% of the kernels of the a100_2rank_nccl fixture, so the bar is a third.)"""
FP32_GEMM_SHARE = 0.20
AMP_GEMM_SPEEDUP = 2.0
OPTIMIZER_SHARE = 0.10
OPTIMIZER_LAUNCHES_PER_STEP = 4


class GpuIdle:
    id: ClassVar[str] = "gpu-idle"
    title: ClassVar[str] = "The GPU waits for the host"
    explanation: ClassVar[str] = ("Between kernels the GPU has nothing to run: the Python / CPU side (data "
                                  "transfer, synchronisation, host-side logic, launches) does not feed it fast "
                                  "enough.")
    threshold: ClassVar[str] = (f"GPU idle >= {GPU_IDLE_SHARE:.0%} of the profiled window's GPU span (trace), "
                                f"or mean GPU utilisation < {GPU_UTIL_LOW_PCT:g}% (NVML) without a trace")
    suggestion: ClassVar[str] = ("Remove host synchronisations in the step (.item(), .cpu(), print of tensors, "
                                 "torch.cuda.synchronize), use non_blocking=True copies from pinned memory, "
                                 "increase the batch size, or capture the step with CUDA graphs / torch.compile"
                                 "(mode='reduce-overhead').")

    def evaluate(self, inp: AdvisorInput) -> Finding | None:
        if any(t.gpu_idle_share is not None for t in inp.traces):
            t = worst_trace(inp, lambda t: t.gpu_idle_share, GPU_IDLE_SHARE)
            if t is None:
                return None
            idle = t.gpu_idle_ns
            ev: dict[str, float | int | str] = {"rank": t.rank, "gpu_idle_share": t.gpu_idle_share or 0.0,
                                                "gpu_idle_per_step_s": per_step_s(t, idle),
                                                "gpu_busy_per_step_s": per_step_s(t, t.gpu_busy_ns),
                                                "profiled_steps": t.profiled_steps}
            return finding(self, inp, ev, per_step_s=per_step_s(t, idle), source="trace",
                           basis="all GPU idle time in the profiled window removed (upper bound)", upper_bound=True)
        util = [(r.rank, m.name, m.mean) for r in inp.summary.ranks for m in r.system
                if m.name.endswith("_util_pct") and m.mean is not None]
        if not util:
            return None
        rank, name, mean = min(util, key=lambda u: u[2] or 0.0)
        if mean is None or mean >= GPU_UTIL_LOW_PCT:
            return None
        r0 = inp.rank0
        step_s = (r0.steps.step_time.mean / 1e9) if r0 and r0.steps.step_time else None
        per_step = step_s * (1 - mean / 100) if step_s else None
        return finding(self, inp, {"rank": rank, "gpu": name.split("_")[0], "gpu_util_mean_pct": mean},
                       per_step_s=per_step, source="samples",
                       basis="the step's time not covered by GPU utilisation (upper bound; NVML utilisation "
                             "counts any kernel running, so it overstates busy time)", upper_bound=True)


class LaunchBound:
    id: ClassVar[str] = "launch-bound"
    title: ClassVar[str] = "Many tiny kernels: launch overhead dominates"
    explanation: ClassVar[str] = ("Most kernels finish faster than the CPU can launch the next (a launch costs "
                                  "~5-10 µs), so the GPU idles between them.")
    threshold: ClassVar[str] = (f">= {SHORT_KERNEL_SHARE:.0%} of kernels shorter than the CPU call that "
                                "launched them (launch-bound; `trace analyze` launches.short_kernels) and GPU idle >= "
                                f"{GPU_IDLE_SHARE:.0%} of the window (trace)")
    suggestion: ClassVar[str] = ("Fuse small operations: torch.compile the model, CUDA graphs "
                                 "(torch.cuda.graphs / mode='reduce-overhead'), fused optimizers and layers "
                                 "(fused=True, fused attention), larger batches per kernel.")

    def evaluate(self, inp: AdvisorInput) -> Finding | None:
        t = worst_trace(inp, lambda t: t.short_kernels / t.kernels if t.kernels and t.gpu_idle_share is not None
                        and t.gpu_idle_share >= GPU_IDLE_SHARE else None, SHORT_KERNEL_SHARE)
        if t is None:
            return None
        save = min(t.gpu_idle_ns, t.launch_api_ns)
        ev: dict[str, float | int | str] = {
            "rank": t.rank, "kernels_per_step": t.kernels / t.steps_in_window,
            "short_kernel_share": t.short_kernels / t.kernels, "kernel_median_us": (t.kernel_median_ns or 0.0) / 1e3,
            "launch_api_per_step_s": per_step_s(t, t.launch_api_ns), "gpu_idle_share": t.gpu_idle_share or 0.0}
        return finding(self, inp, ev, per_step_s=per_step_s(t, save), source="trace",
                       basis="the smaller of GPU idle time and host time in launch calls (upper bound)",
                       upper_bound=True)


class NoMixedPrecision:
    id: ClassVar[str] = "no-mixed-precision"
    title: ClassVar[str] = "fp32 matrix multiplies on a GPU with tensor cores"
    explanation: ClassVar[str] = ("GEMM / convolution kernels run in fp32 (sgemm, TF32 s1688) although the GPU "
                                  "has tensor cores that run bf16/fp16 several times faster.")
    threshold: ClassVar[str] = (f"GPU with tensor cores (compute capability >= 7.0) and fp32 GEMM kernels >= "
                                f"{FP32_GEMM_SHARE:.0%} of kernel time (trace)")
    suggestion: ClassVar[str] = ("Train with automatic mixed precision: with torch.autocast('cuda', "
                                 "dtype=torch.bfloat16): ... (fp16 needs torch.amp.GradScaler); at least allow "
                                 "TF32: torch.set_float32_matmul_precision('high').")

    def evaluate(self, inp: AdvisorInput) -> Finding | None:
        t = worst_trace(inp, lambda t: t.fp32_gemm_ns / t.kernel_ns if t.tensor_cores and t.kernel_ns > 0 else None,
                        FP32_GEMM_SHARE)
        if t is None:
            return None
        ev: dict[str, float | int | str] = {
            "rank": t.rank, "device": t.device_name or "", "compute_capability": t.compute_capability or "",
            "fp32_gemm_share_of_kernel_time": t.fp32_gemm_ns / t.kernel_ns,
            "fp32_gemm_per_step_s": per_step_s(t, t.fp32_gemm_ns),
            "gemm_share_fp32": t.fp32_gemm_ns / t.gemm_ns if t.gemm_ns else 0.0}
        save = per_step_s(t, t.fp32_gemm_ns * (1 - 1 / AMP_GEMM_SPEEDUP))
        return finding(self, inp, ev, per_step_s=save, source="trace",
                       basis=f"fp32 GEMM time running {AMP_GEMM_SPEEDUP:g}× faster in bf16/fp16")


class UnfusedOptimizer:
    id: ClassVar[str] = "unfused-optimizer"
    title: ClassVar[str] = "The optimizer step runs as many small kernels"
    explanation: ClassVar[str] = ("The optimizer updates parameters one tensor at a time (no foreach / fused "
                                  "implementation), launching several kernels per parameter.")
    threshold: ClassVar[str] = (f"Optimizer.step without multi_tensor_apply / fused kernels, >= "
                                f"{OPTIMIZER_LAUNCHES_PER_STEP} launches per step and >= {OPTIMIZER_SHARE:.0%} "
                                "of the profiled window (trace)")
    suggestion: ClassVar[str] = ("Use a fused or foreach optimizer: torch.optim.AdamW(..., fused=True) (or "
                                 "foreach=True), apex FusedAdam, or torch.compile the optimizer step.")

    def evaluate(self, inp: AdvisorInput) -> Finding | None:
        t = worst_trace(inp, lambda t: t.optimizer_ns / t.gpu_span_ns if t.optimizer_steps and not t.optimizer_fused
                        and t.gpu_span_ns > 0
                        and t.optimizer_launches / t.steps_in_window >= OPTIMIZER_LAUNCHES_PER_STEP
                        else None, OPTIMIZER_SHARE)
        if t is None:
            return None
        ev: dict[str, float | int | str] = {
            "rank": t.rank, "optimizer_per_step_s": per_step_s(t, t.optimizer_ns),
            "optimizer_share_of_window": t.optimizer_ns / t.gpu_span_ns,
            "optimizer_launches_per_step": t.optimizer_launches / t.steps_in_window}
        return finding(self, inp, ev, per_step_s=per_step_s(t, t.optimizer_ns) / 2, source="trace",
                       basis="half the optimizer step (fused optimizers are typically 2-5× faster)")
