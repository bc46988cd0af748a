"""Operators by unique arguments with a roofline: per (operator, Input Dims, Input type), the GPU time of the work
its calls launched, FLOPs and bytes from :mod:`~stepscope.analyze.trace.opmodels`, achieved TFLOP/s and TB/s,
arithmetic intensity, the share of the device's peaks (:mod:`~stepscope.analyze.trace.gpu_peaks`) and the bound.

The operators are those that launched GPU compute kernels themselves (their kernel self time, attributed by
correlation id as the operator table does): ``aten::linear`` launches nothing, its ``aten::addmm`` does, so no
time counts twice.
Memory copies, memsets and communication kernels are left out: a host-device copy or a collective runs at a
link's speed, not on the device's roofline.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from stepscope.analyze.trace.gpu_peaks import GpuPeaks, bandwidth_tbps, lookup
from stepscope.analyze.trace.opmodels import NoModel, OpCost, op_cost
from stepscope.analyze.trace.ops import HostTimes
from stepscope.model.events import DeviceInfo, EventKind, EventTable


@dataclass(frozen=True, slots=True)
class OpRoofline:
    """One operator with one set of input dims and types, over all its calls that launched GPU work.

    input_dims: as the trace records them (JSON text). input_types: ``Input type`` (None where not recorded). gpu_ns:
    summed GPU time of the kernels the calls launched themselves (trace durations). family: the model
    (gemm, convolution, attention, elementwise, normalization); None with no_model saying why. flops / bytes:
    per call (bytes: compulsory traffic, a lower bound). precision: the peak compared with (fp32, bf16, ...).
    tflops / tbps: flops x calls / gpu_ns (1e12 FLOP/s) and bytes x calls / gpu_ns (1e12 bytes/s). intensity:
    FLOPs per byte. compute_pct / memory_pct: tflops / the compute peak, tbps / the memory peak (%); None
    without a peak. bound: "compute" when intensity exceeds the ridge point (compute peak / memory peak), else
    "memory"; None without both peaks.
    """

    name: str
    input_dims: str
    input_types: tuple[str, ...] | None
    calls: int
    gpu_ns: int
    family: str | None
    no_model: str | None
    flops: float | None
    bytes: float | None
    precision: str | None
    tflops: float | None
    tbps: float | None
    intensity: float | None
    compute_pct: float | None
    memory_pct: float | None
    bound: str | None

    @property
    def why(self) -> str | None:
        """no_model in a table's words: "operator not modelled" where no model exists for the operator."""
        if self.no_model is None:
            return None
        return "operator not modelled" if self.no_model == f"no model for {self.name}" else self.no_model

    def to_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k in self.__slots__ for v in [getattr(self, k)]}


@dataclass(frozen=True, slots=True)
class Roofline:
    """device: the name of the device most kernels ran on (deviceProperties). peaks: its row of the peak table
    (label, source) or None when the device is unknown (no share of peak, no bound). memory_tbps: the memory
    peak used, memory_source whether it comes from deviceProperties (clock x bus width) or the table. ops:
    largest GPU time first. gpu_ns: GPU time of kernels launched by operators themselves; modeled_gpu_ns: of
    which by calls with a model."""

    device: str | None
    peaks: GpuPeaks | None
    memory_tbps: float | None
    memory_source: str | None
    ops: tuple[OpRoofline, ...]
    gpu_ns: int
    modeled_gpu_ns: int

    def to_dict(self) -> dict[str, Any]:
        p = self.peaks
        return {"device": self.device, "peaks": None if p is None else {
            "label": p.label, "source": p.source, "matrix_tflops": {k: v / p.devices_per_card for k, v in
                                                                    sorted(p.matrix_tflops.items())},
            "vector_fp32_tflops": p.vector_fp32_tflops / p.devices_per_card},
            "memory_tbps": self.memory_tbps, "memory_source": self.memory_source, "gpu_ns": self.gpu_ns,
            "modeled_gpu_ns": self.modeled_gpu_ns, "ops": [o.to_dict() for o in self.ops]}


def _memory(dev: DeviceInfo | None, peaks: GpuPeaks | None) -> tuple[float | None, str | None]:
    bw = bandwidth_tbps(dev.memory_clock_khz, dev.memory_bus_bits) if dev else None
    if bw is not None:
        return bw, "deviceProperties"
    return (peaks.memory_tbps / peaks.devices_per_card, "table") if peaks else (None, None)


def _device(table: EventTable) -> DeviceInfo | None:
    """The device most kernels ran on (deviceProperties lists every GPU of the host; rank 3 may run on GPU 3),
    else the first one listed."""
    ids = table["device"][(table["kind"] == EventKind.KERNEL) & (table["device"] >= 0)]
    found = table.meta.device(int(np.bincount(ids).argmax())) if ids.size else None
    return found or (table.meta.devices[0] if table.meta.devices else None)


def compute_peak(peaks: GpuPeaks | None, cost: OpCost) -> float | None:
    """TFLOP/s one device reaches for this work: the matrix peak of its precision, or the vector FP32 peak."""
    if peaks is None:
        return None
    value = peaks.matrix_tflops.get(cost.precision or "") if cost.matrix else peaks.vector_fp32_tflops
    return None if value is None else value / peaks.devices_per_card


def op_roofline(table: EventTable, host: HostTimes) -> Roofline:
    """Group the operator calls that launched GPU work by (name, Input Dims, Input type) and place each on the
    device's roofline."""
    dev = _device(table)
    peaks = lookup(dev.name, dev.total_memory_bytes) if dev else None
    mem, mem_source = _memory(dev, peaks)
    kind = table["kind"][host.rows]
    sel = np.flatnonzero((kind == EventKind.CPU_OP) & (host.kernel_self_ns > 0))
    rows = host.rows[sel]
    keys = np.stack([table["name"][rows], table["shape"][rows], table["optype"][rows]], axis=1)
    uniq, inverse = np.unique(keys, axis=0, return_inverse=True) if rows.size else (keys, np.zeros(0, np.int64))
    inverse = inverse.reshape(-1)
    calls = np.bincount(inverse, minlength=len(uniq))
    gpu = np.bincount(inverse, weights=host.kernel_self_ns[sel], minlength=len(uniq))
    out = [_group(table, int(n), int(s), int(o), int(c), int(g), peaks, mem)
           for (n, s, o), c, g in zip(uniq.tolist(), calls.tolist(), gpu.tolist(), strict=True)]
    out.sort(key=lambda r: (-r.gpu_ns, r.name, r.input_dims))
    return Roofline(dev.name if dev else None, peaks, mem, mem_source, tuple(out), sum(r.gpu_ns for r in out),
                    sum(r.gpu_ns for r in out if r.family is not None))


def _group(table: EventTable, name: int, shape: int, optype: int, calls: int, gpu_ns: int,
           peaks: GpuPeaks | None, mem: float | None) -> OpRoofline:
    op = table.names[name]
    dims_text = table.shapes[shape] if shape >= 0 else "null"
    types, concrete = table.optype_value(optype)
    cost = op_cost(op, table.shape_value(shape), types, concrete)
    types_text = tuple(map(str, types)) if isinstance(types, list) else None
    if isinstance(cost, NoModel):
        return OpRoofline(op, dims_text, types_text, calls, gpu_ns, None, cost.reason, None, None, None, None, None,
                          None, None, None, None)
    sec = gpu_ns * 1e-9
    tflops, tbps = cost.flops * calls / sec / 1e12, cost.bytes * calls / sec / 1e12
    intensity = cost.flops / cost.bytes if cost.bytes > 0 else None
    peak = compute_peak(peaks, cost)
    bound = None
    if peak is not None and mem and intensity is not None:
        bound = "compute" if intensity > peak / mem else "memory"  # TFLOP/s over TB/s: FLOPs per byte
    return OpRoofline(op, dims_text, types_text, calls, gpu_ns, cost.family, None, cost.flops, cost.bytes,
                      cost.precision, tflops, tbps, intensity, 100.0 * tflops / peak if peak else None,
                      100.0 * tbps / mem if mem else None, bound)
