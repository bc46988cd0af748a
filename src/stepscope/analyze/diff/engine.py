"""Adapter from the trace engine (``stepscope.analyze.trace``) to the diff's :class:`WindowTables`.

Uses the engine's public analyses (``analyze_trace``, ``gpu_view``, ``host_times``) and adds what the diff
needs beyond them: the innermost module of each operator (for filtering by module) and the explicit
"outside any module" time.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stepscope.analyze.diff.window import ModuleStat, OpStat, WindowTables
from stepscope.model.events import EventKind, EventTable

MODULE_PREFIX = "nn.Module: "


def analyze_window(table: EventTable) -> WindowTables:
    """Reduce one rank's trace (an EventTable from ``stepscope.traces.kineto.read_trace``) for the diff."""
    from stepscope.analyze.trace.analysis import analyze_trace
    from stepscope.analyze.trace.gpuview import gpu_view
    from stepscope.analyze.trace.ops import host_times

    result = analyze_trace(table)
    modules_of_ops: dict[str, str | None] = {}
    if result.modules:
        host = host_times(table, gpu_view(table))
        modules_of_ops = _op_modules(table, host.rows, host.parent)
    return from_engine(result, table=table, op_modules=modules_of_ops)


def _op_modules(table: EventTable, rows: np.ndarray, parent: np.ndarray) -> dict[str, str | None]:
    """Per operator name: the module path holding most of its CPU time (None: mostly outside modules)."""
    names = table["name"][rows].tolist()
    kinds = table["kind"][rows].tolist()
    dur = table["dur_ns"][rows].tolist()
    order = np.lexsort((-(table["ts_ns"][rows] + table["dur_ns"][rows]), table["ts_ns"][rows])).tolist()
    par = parent.tolist()
    mod: list[str | None] = [None] * len(names)
    acc: dict[str, dict[str | None, float]] = {}
    for j in order:
        up = mod[par[j]] if par[j] >= 0 else None
        name = table.names[names[j]]
        if name.startswith(MODULE_PREFIX):
            mod[j] = f"{up}/{name[len(MODULE_PREFIX):]}" if up else name[len(MODULE_PREFIX):]
            continue
        mod[j] = up
        if kinds[j] == EventKind.CPU_OP:
            per = acc.setdefault(name, {})
            per[up] = per.get(up, 0.0) + dur[j]
    return {name: max(per.items(), key=lambda kv: kv[1])[0] for name, per in acc.items()}


def from_engine(result: Any, *, table: EventTable | None = None,
                op_modules: dict[str, str | None] | None = None) -> WindowTables:
    """WindowTables from a ``TraceAnalysis`` (device names and memory come from ``table.meta`` when given)."""
    op_modules = op_modules or {}
    has_gpu = bool(result.gpu_events)
    ops = {o.name: OpStat(calls=o.calls, self_ns=float(o.cpu_self_ns), total_ns=float(o.cpu_total_ns),
                          device_ns=float(o.device_self_ns) if has_gpu else None, component=o.component,
                          module=op_modules.get(o.name)) for o in result.operators}
    kernels = {k.key: OpStat(calls=k.count, self_ns=None, total_ns=None, device_ns=float(k.sum_ns),
                             component=k.component) for k in result.kernels.by_kernel}
    modules = {"/".join(m.path): ModuleStat(type=_module_type(m.path[-1]), calls=m.calls, cpu_ns=float(m.cpu_ns),
                                            gpu_ns=float(m.device_ns)) for m in result.modules}
    roots = [m for m in result.modules if len(m.path) == 1]
    steps = result.steps.steps
    step_times = np.asarray([s.dur_ns for s in steps], dtype="float64")
    host_span = float(step_times.sum()) if steps else float(sum(o.cpu_self_ns for o in result.operators))
    devices: tuple[str, ...] = ()
    memory = None
    if table is not None:
        devices = tuple(d.name for d in table.meta.devices)
        mems = [d.total_memory_bytes for d in table.meta.devices if d.total_memory_bytes]
        memory = float(max(mems)) if mems else None
    util = result.utilization.utilization_pct if result.utilization is not None else None
    return WindowTables(
        rank=result.rank, world_size=result.world_size, devices=devices, device_memory_bytes=memory,
        steps=len(steps) or None, step_times_ns=step_times, has_gpu=has_gpu, gpu_util_pct=util,
        operators=ops, kernels=kernels, modules=modules,
        outside_cpu_ns=max(host_span - sum(m.cpu_ns for m in roots), 0.0) if modules else 0.0,
        outside_gpu_ns=max(float(result.kernels.total_ns) - sum(m.device_ns for m in roots), 0.0) if modules else 0.0,
    )


def _module_type(name: str) -> str:
    """``Linear_0`` (the profiler's module label: class name and instance number) -> ``Linear``."""
    head, sep, tail = name.rpartition("_")
    return head if sep and tail.isdigit() else name
