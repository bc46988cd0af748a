"""Peak compute and memory bandwidth of known GPUs, from their vendors' data sheets (dense, no sparsity).

One table serves the roofline of a trace (:mod:`stepscope.analyze.trace.roofline`) and the MFU of a run
(:data:`stepscope.analyze.run.flops.PEAK_TABLE` is built from it). A device is found by a regular expression on
its name (``deviceProperties`` of the trace, or the run's GPU name); where the name alone does not tell the
variant (A100 40 GB or 80 GB), the memory size does. A device the table does not know has no peaks: figures
against a peak are then absent, never guessed. Where the trace records ``memoryClockRate`` (kHz) and
``memoryBusWidth`` (bits), the memory bandwidth is 2 x clock x width / 8 (double data rate), preferred to
the table's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

A100 = "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"
H100 = "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"
H200 = "https://www.nvidia.com/en-us/data-center/h200/"
GH200 = "https://resources.nvidia.com/en-us-grace-cpu/grace-hopper-superchip"
V100 = "https://images.nvidia.com/content/technologies/volta/pdf/volta-v100-datasheet-update-us-1165301-r5.pdf"
L40S = "https://resources.nvidia.com/en-us-l40s/l40s-datasheet-28413"
L4 = "https://resources.nvidia.com/en-us-data-center-overview/l4-gpu-datasheet"
A10 = "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a10/pdf/datasheet-new/nvidia-a10-datasheet.pdf"
MI300X = "https://www.amd.com/content/dam/amd/en/documents/instinct-tech-docs/data-sheets/amd-instinct-mi300x-data-sheet.pdf"
MI250X = "https://www.amd.com/en/products/accelerators/instinct/mi200/mi250x.html"
MI250 = "https://www.amd.com/en/products/accelerators/instinct/mi200/mi250.html"


@dataclass(frozen=True, slots=True)
class GpuPeaks:
    """One row of the table. matrix_tflops: dense peak TFLOP/s of the matrix units (tensor / matrix cores) per
    precision ("fp64", "tf32", "bf16", "fp16", "fp8"), and "fp32": the FP32 peak MFU compares float32 matmuls
    with (the matrix FP32 peak where the device has one, AMD; else the vector peak). vector_fp32_tflops: the
    FP32 peak of the vector units (elementwise and normalisation work). memory_tbps: peak memory bandwidth
    (TB/s, 1e12 bytes/s). min_memory_gb: the row applies only to devices with at least this much memory
    (GB, 1e9 bytes), where the memory tells the variant. source: the data sheet. devices_per_card: devices
    PyTorch sees on one card (an MI250's two GCDs): a device's peaks are the card's divided by it."""

    label: str
    pattern: str
    matrix_tflops: dict[str, float]
    vector_fp32_tflops: float
    memory_tbps: float
    source: str
    min_memory_gb: float = 0.0
    devices_per_card: int = 1


_HOPPER = {"fp64": 66.9, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9, "fp32": 66.9}
_AMPERE = {"fp64": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0, "fp32": 19.5}

GPUS: tuple[GpuPeaks, ...] = (
    # first match wins: the more specific names first
    GpuPeaks("H100 PCIe", r"H100.*PCIe", {"fp64": 51.2, "tf32": 378.0, "bf16": 756.0, "fp16": 756.0, "fp8": 1513.0,
                                          "fp32": 51.2}, 51.2, 2.0, H100),
    GpuPeaks("H100 NVL", r"H100.*NVL", {"fp64": 60.0, "tf32": 417.5, "bf16": 835.0, "fp16": 835.0, "fp8": 1670.5,
                                        "fp32": 60.0}, 60.0, 3.9, H100),
    GpuPeaks("GH200", r"GH200", _HOPPER, 66.9, 4.0, GH200),
    GpuPeaks("H100 SXM", r"H100|H800", _HOPPER, 66.9, 3.35, H100),
    GpuPeaks("H200 SXM", r"H200", _HOPPER, 66.9, 4.8, H200),
    GpuPeaks("A100 80GB PCIe", r"(A100|A800).*PCIe", _AMPERE, 19.5, 1.935, A100, min_memory_gb=60.0),
    GpuPeaks("A100 80GB SXM", r"A100|A800", _AMPERE, 19.5, 2.039, A100, min_memory_gb=60.0),
    GpuPeaks("A100 40GB", r"A100|A800", _AMPERE, 19.5, 1.555, A100),
    GpuPeaks("V100 PCIe", r"V100.*PCIe", {"fp64": 7.0, "fp16": 112.0, "fp32": 14.0}, 14.0, 0.9, V100),
    GpuPeaks("V100 SXM2", r"V100", {"fp64": 7.8, "fp16": 125.0, "fp32": 15.7}, 15.7, 0.9, V100),
    GpuPeaks("L40S", r"L40S", {"tf32": 183.0, "bf16": 362.05, "fp16": 362.05, "fp8": 733.0, "fp32": 91.6}, 91.6,
             0.864, L40S),
    GpuPeaks("L4", r"\bL4\b", {"tf32": 60.0, "bf16": 121.0, "fp16": 121.0, "fp8": 242.5, "fp32": 30.3}, 30.3, 0.3, L4),
    GpuPeaks("A10", r"\bA10\b", {"tf32": 62.5, "bf16": 125.0, "fp16": 125.0, "fp32": 31.2}, 31.2, 0.6, A10),
    GpuPeaks("MI300X", r"MI300X", {"fp64": 163.4, "tf32": 653.7, "bf16": 1307.4, "fp16": 1307.4, "fp8": 2614.9,
                                   "fp32": 163.4}, 163.4, 5.3, MI300X),
    GpuPeaks("MI250X", r"MI250X", {"fp64": 95.7, "bf16": 383.0, "fp16": 383.0, "fp32": 95.7}, 47.9, 3.2768, MI250X,
             devices_per_card=2),
    GpuPeaks("MI250", r"MI250", {"fp64": 90.5, "bf16": 362.1, "fp16": 362.1, "fp32": 90.5}, 45.3, 3.2768, MI250,
             devices_per_card=2),
)
"""Vendor data-sheet figures (dense, per card). The A100 rows share compute and differ in memory bandwidth."""


def lookup(name: str | None, memory_bytes: int | None = None) -> GpuPeaks | None:
    """The first row whose pattern matches ``name`` and whose memory bound the device meets (an unknown memory
    size meets only rows without a bound); None for an unknown device."""
    if not isinstance(name, str) or not name:
        return None
    for row in GPUS:
        if not re.search(row.pattern, name, flags=re.IGNORECASE):
            continue
        if row.min_memory_gb and (memory_bytes is None or memory_bytes < row.min_memory_gb * 1e9):
            continue
        return row
    return None


def bandwidth_tbps(memory_clock_khz: int | None, memory_bus_bits: int | None) -> float | None:
    """Peak memory bandwidth in TB/s from deviceProperties' ``memoryClockRate`` (kHz) and ``memoryBusWidth``
    (bits), two transfers a clock; None unless both are recorded and positive."""
    if not memory_clock_khz or not memory_bus_bits or memory_clock_khz < 0 or memory_bus_bits < 0:
        return None
    return 2.0 * memory_clock_khz * 1e3 * memory_bus_bits / 8.0 / 1e12


def flops_table() -> tuple[tuple[str, dict[str, float]], ...]:
    """(pattern, {precision: FLOP/s}) rows as MFU reads them: bf16 / fp16 / tf32 / fp32, one row per pattern."""
    out: list[tuple[str, dict[str, float]]] = []
    for row in GPUS:
        if any(p == row.pattern for p, _ in out):
            continue
        out.append((row.pattern, {k: float(f"{v}e12") for k, v in row.matrix_tflops.items()  # 989.4e12 exactly
                                  if k in ("bf16", "fp16", "tf32", "fp32")}))
    return tuple(out)
