"""Tables of a run's profiled window(s) for the exports: components, kernels, operators, modules."""

from __future__ import annotations

from typing import Any

from stepscope.analyze.trace.multirank import TraceSetAnalysis

Columns = dict[str, list[Any]]


def _rows_to_columns(rows: list[dict[str, Any]], names: tuple[str, ...]) -> Columns:
    return {n: [r.get(n) for r in rows] for n in names}


def trace_tables(result: TraceSetAnalysis) -> dict[str, Columns]:
    """``components`` and ``kernels`` (rank, key, component, count, sum_ns, mean_ns, min_ns, max_ns, std_ns,
    pct), ``operators`` (rank, name, component, calls, cpu_total_ns, cpu_self_ns, device_self_ns,
    device_total_ns, shapes) and ``modules`` (rank, path, depth, calls, cpu_ns, device_ns); times in ns,
    from the traces (see docs/traces.md)."""
    comp: list[dict[str, Any]] = []
    kern: list[dict[str, Any]] = []
    ops: list[dict[str, Any]] = []
    mods: list[dict[str, Any]] = []
    for a in result.ranks:
        comp += [{"rank": a.rank, **k.to_dict()} for k in a.kernels.by_component]
        kern += [{"rank": a.rank, **k.to_dict()} for k in a.kernels.by_kernel]
        ops += [{"rank": a.rank, **{**o.to_dict(), "shapes": "; ".join(o.shapes)}} for o in a.operators]
        mods += [{"rank": a.rank, **{**m.to_dict(), "path": "/".join(m.path)}} for m in a.modules]
    kcols = ("rank", "key", "component", "count", "sum_ns", "mean_ns", "min_ns", "max_ns", "std_ns", "pct")
    return {
        "components": _rows_to_columns(comp, kcols),
        "kernels": _rows_to_columns(kern, kcols),
        "operators": _rows_to_columns(ops, ("rank", "name", "component", "calls", "cpu_total_ns", "cpu_self_ns",
                                            "device_self_ns", "device_total_ns", "shapes")),
        "modules": _rows_to_columns(mods, ("rank", "path", "depth", "calls", "cpu_ns", "device_ns")),
    }
