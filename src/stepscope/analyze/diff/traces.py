"""Diff of the profiled windows: components, the aligned module tree, operators and kernels.

Times are per profiled step when both windows know their step count (``ProfilerStep#N`` annotations), so
windows of different lengths compare; otherwise window totals (``per_step`` says which). Module time is
CPU time for modules whose work is on the CPU and GPU time (kernels launched inside the module) where the
trace has GPU work, as the Kineto diff design says. A window holds a few steps: no significance test is
made on these parts; their verdicts come from the step-level numbers.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from stepscope.analyze.diff.significance import Verdict
from stepscope.analyze.diff.window import OpStat, WindowTables, window_tables

NOT_PROFILED = "not profiled — record a window with `stepscope run --profile-steps 5 -- python train.py`"
OTHER_NODE = "(other: outside any module)"
LOW_OVERLAP = 0.5
"""Module trees sharing fewer than this share of their time (by path) are called barely overlapping."""


@dataclass(frozen=True, slots=True)
class DeltaRow:
    """One operator, kernel or component in both windows.

    ``calls_*``: calls (per profiled step when ``TraceDiff.per_step``); ``self_*``/``total_*``: CPU self and
    total time of an operator (ns; None for kernels and components); ``device_*``: GPU time (ns) of the
    kernels it launched (operators), of the kernel, or of the component's kernels. ``delta``/``delta_pct``
    are of ``sort_key`` (device time where the windows have GPU work, else CPU self time). ``component``:
    component by the ordered rules; ``module``: the innermost module the row's time falls in most (None:
    outside modules or not known). ``presence``: "both", "only in baseline", "only in experiment".
    """

    name: str
    component: str
    module: str | None
    calls_baseline: float
    calls_experiment: float
    self_baseline: float | None
    self_experiment: float | None
    total_baseline: float | None
    total_experiment: float | None
    device_baseline: float | None
    device_experiment: float | None
    sort_key: str
    delta: float
    delta_pct: float | None
    presence: str


@dataclass(frozen=True, slots=True)
class ModuleRow:
    """A node of the aligned module tree: ``path`` ('model/encoder/layer0'; the explicit other node is
    ``OTHER_NODE``), ``depth`` from 0, ``type`` (class name, from either run), ``time_kind`` "gpu" or
    "cpu", times in ns (per profiled step when per_step), None where the run lacks the module."""

    path: str
    name: str
    depth: int
    type: str | None
    time_kind: str
    baseline_ns: float | None
    experiment_ns: float | None
    delta_ns: float
    delta_pct: float | None
    presence: str


@dataclass(frozen=True, slots=True)
class TraceDiff:
    """The windows compared. ``rank_*``: the rank whose trace was used on each side (rank 0, or the only
    trace); ``steps_*``: profiled steps in each window (None: unknown); ``module_overlap``: weighted Jaccard
    similarity of the two trees, sum over paths of min(baseline, experiment) time / sum of max (1 = same
    model and time, ~0 = different models; None without module data); ``notes``: what could not be compared and why."""

    per_step: bool
    rank_baseline: int
    rank_experiment: int
    steps_baseline: int | None
    steps_experiment: int | None
    time_kind: str
    components: tuple[DeltaRow, ...]
    modules: tuple[ModuleRow, ...]
    module_overlap: float | None
    operators: tuple[DeltaRow, ...]
    kernels: tuple[DeltaRow, ...]
    notes: tuple[str, ...]

    def findings(self) -> list[Any]:
        """The biggest component, module and kernel change (no verdict: a window is a few steps)."""
        from stepscope.analyze.diff.compare import Finding

        unit = "ns per profiled step" if self.per_step else "ns in window"
        out = []
        for kind, rows in (("component", self.components), ("kernel", self.kernels),
                           ("operator", self.operators)):
            if rows and rows[0].delta:
                r = rows[0]
                b = r.device_baseline if r.sort_key == "device" else r.self_baseline
                e = r.device_experiment if r.sort_key == "device" else r.self_experiment
                out.append(Finding(kind, r.name, unit, b, e, r.delta, r.delta_pct, None))
        mods = [m for m in self.modules if m.path != OTHER_NODE and m.depth > 0] or list(self.modules)
        if mods:
            m = max(mods, key=lambda r: abs(r.delta_ns))
            if m.delta_ns:
                out.append(Finding("module", m.path, unit, m.baseline_ns, m.experiment_ns, m.delta_ns, m.delta_pct,
                                   None))
        return out

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _presence(b: object, e: object) -> str:
    return "both" if b is not None and e is not None else ("only in baseline" if e is None else "only in experiment")


def _pct(b: float | None, e: float | None) -> float | None:
    return 100.0 * ((e or 0.0) - b) / b if b else None


def _ops_diff(b: dict[str, OpStat], e: dict[str, OpStat], sb: float, se: float, use_device: bool) -> list[DeltaRow]:
    rows = []
    for name in dict.fromkeys([*b, *e]):
        ob, oe = b.get(name), e.get(name)
        key = "device" if use_device else "self"

        def val(o: OpStat | None, attr: str, scale: float) -> float | None:
            v = getattr(o, attr) if o is not None else None
            return None if v is None else v / scale

        vb = val(ob, "device_ns" if use_device else "self_ns", sb)
        ve = val(oe, "device_ns" if use_device else "self_ns", se)
        ref = ob or oe
        assert ref is not None
        rows.append(DeltaRow(
            name=name, component=ref.component, module=ref.module,
            calls_baseline=(ob.calls / sb) if ob else 0.0, calls_experiment=(oe.calls / se) if oe else 0.0,
            self_baseline=val(ob, "self_ns", sb), self_experiment=val(oe, "self_ns", se),
            total_baseline=val(ob, "total_ns", sb), total_experiment=val(oe, "total_ns", se),
            device_baseline=val(ob, "device_ns", sb), device_experiment=val(oe, "device_ns", se),
            sort_key=key, delta=(ve or 0.0) - (vb or 0.0), delta_pct=_pct(vb, ve), presence=_presence(ob, oe)))
    rows.sort(key=lambda r: (-abs(r.delta), r.name))
    return rows


def _components(kernels: list[DeltaRow], ops: list[DeltaRow], use_device: bool) -> list[DeltaRow]:
    src = kernels if use_device else ops
    acc: dict[str, list[float]] = {}
    for r in src:
        a = acc.setdefault(r.component, [0.0, 0.0, 0.0, 0.0, 0, 0])
        vb = (r.device_baseline if use_device else r.self_baseline) or 0.0
        ve = (r.device_experiment if use_device else r.self_experiment) or 0.0
        a[0] += vb
        a[1] += ve
        a[2] += r.calls_baseline
        a[3] += r.calls_experiment
        a[4] += r.presence != "only in experiment"
        a[5] += r.presence != "only in baseline"
    rows = []
    for comp, (vb, ve, cb, ce, nb, ne) in acc.items():
        b = vb if nb else None
        e = ve if ne else None
        rows.append(DeltaRow(
            name=comp, component=comp, module=None, calls_baseline=cb, calls_experiment=ce,
            self_baseline=None if use_device else b, self_experiment=None if use_device else e,
            total_baseline=None, total_experiment=None,
            device_baseline=b if use_device else None, device_experiment=e if use_device else None,
            sort_key="device" if use_device else "self", delta=ve - vb, delta_pct=_pct(b, e),
            presence=_presence(b, e)))
    rows.sort(key=lambda r: (-abs(r.delta), r.name))
    return rows


def _modules(b: WindowTables, e: WindowTables, sb: float, se: float,
             use_device: bool) -> tuple[list[ModuleRow], float | None]:
    if not b.modules and not e.modules:
        return [], None
    attr = "gpu_ns" if use_device else "cpu_ns"
    rows = []
    for path in dict.fromkeys([*b.modules, *e.modules]):
        mb, me = b.modules.get(path), e.modules.get(path)
        vb = getattr(mb, attr) / sb if mb else None
        ve = getattr(me, attr) / se if me else None
        ref = mb or me
        assert ref is not None
        rows.append(ModuleRow(path, path.rsplit("/", 1)[-1], path.count("/"), ref.type, "gpu" if use_device else "cpu",
                              vb, ve, (ve or 0.0) - (vb or 0.0), _pct(vb, ve), _presence(mb, me)))
    ob = (b.outside_gpu_ns if use_device else b.outside_cpu_ns) / sb
    oe = (e.outside_gpu_ns if use_device else e.outside_cpu_ns) / se
    rows.append(ModuleRow(OTHER_NODE, OTHER_NODE, 0, None, "gpu" if use_device else "cpu", ob, oe, oe - ob,
                          _pct(ob, oe), "both"))
    mods = [r for r in rows if r.path != OTHER_NODE]
    union = sum(max(r.baseline_ns or 0.0, r.experiment_ns or 0.0) for r in mods)
    shared = sum(min(r.baseline_ns or 0.0, r.experiment_ns or 0.0) for r in mods if r.presence == "both")
    overlap = shared / union if union > 0 else None
    return _tree_order(rows), overlap


def _tree_order(rows: list[ModuleRow]) -> list[ModuleRow]:
    """Parents before children; siblings by absolute delta; the other node last."""
    by_parent: dict[str, list[ModuleRow]] = {}
    paths = {r.path for r in rows}
    for r in rows:
        parent = r.path.rsplit("/", 1)[0] if "/" in r.path else ""
        by_parent.setdefault(parent if parent in paths else "", []).append(r)
    out: list[ModuleRow] = []

    def walk(parent: str) -> None:
        for r in sorted(by_parent.get(parent, []), key=lambda x: (x.path == OTHER_NODE, -abs(x.delta_ns), x.path)):
            out.append(r)
            walk(r.path)

    walk("")
    return out


def compare_windows(b: WindowTables, e: WindowTables) -> TraceDiff:
    """Diff two windows' tables (pure; see :func:`trace_diff` for the inputs)."""
    per_step = bool(b.steps and e.steps)
    sb = float(b.steps) if per_step and b.steps else 1.0
    se = float(e.steps) if per_step and e.steps else 1.0
    use_device = b.has_gpu and e.has_gpu
    notes: list[str] = []
    if b.has_gpu != e.has_gpu:
        notes.append("one window has GPU work and the other none: CPU self time is compared")
    if not per_step:
        notes.append("the windows' step counts are not both known: window totals are compared, not per step")
    ops_device = use_device and all(any((o.device_ns or 0) > 0 for o in w.operators.values()) for w in (b, e))
    if use_device and not ops_device:
        notes.append("the traces attribute no GPU time to operators (no external ids): operators compare CPU "
                     "self time")
    ops = _ops_diff(b.operators, e.operators, sb, se, ops_device)
    kernels = _ops_diff(b.kernels, e.kernels, sb, se, True) if use_device else []
    modules, overlap = _modules(b, e, sb, se, use_device)
    if not b.modules and not e.modules:
        notes.append("no module tree in the traces (record with with_stack=True, or the model ran outside "
                     "nn.Module calls)")
    elif overlap is not None and overlap < LOW_OVERLAP:
        notes.append(f"the module trees barely overlap (similarity {overlap:.0%} by path and time): these look "
                     "like different models; only matching paths compare, the rest is shown as only in one run")
    return TraceDiff(per_step=per_step, rank_baseline=b.rank, rank_experiment=e.rank, steps_baseline=b.steps,
                     steps_experiment=e.steps, time_kind="gpu" if use_device else "cpu",
                     components=tuple(_components(kernels, ops, use_device)), modules=tuple(modules),
                     module_overlap=overlap, operators=tuple(ops), kernels=tuple(kernels), notes=tuple(notes))


def trace_diff(base: Any, exp: Any, *, settings: Any = None) -> tuple[TraceDiff | None, str | None]:
    """The windows' diff of two DiffSides, or None and the reason (not profiled, ...)."""
    missing = [name for name, side in (("baseline", base), ("experiment", exp)) if side.traces is None]
    if missing:
        reasons = [f"{name}: {side.trace_note or NOT_PROFILED}" for name, side in (("baseline", base),
                   ("experiment", exp)) if side.traces is None]
        return None, "; ".join(reasons)
    return compare_windows(window_tables(base.traces), window_tables(exp.traces)), None


def trace_overview(traces: Any) -> WindowTables | None:
    """The window tables of one side's trace analysis (for overview figures of bare trace sets)."""
    return window_tables(traces) if traces is not None else None


def overview_rows_from_traces(base: Any, exp: Any, settings: Any) -> list[Any]:
    """Overview rows when an input is a bare trace set: device, world size, GPU utilisation and step time
    from the windows (``ProfilerStep#N`` durations; one window a side is one run a side, judged against the
    default noise floor)."""
    from stepscope.analyze.diff.overview import OverviewRow, device_names, row
    from stepscope.analyze.diff.significance import compare_runs
    from stepscope.analyze.stats import default_noise_floor

    if base.traces is None or exp.traces is None:
        return []
    wb, we = window_tables(base.traces), window_tables(exp.traces)
    rows: list[OverviewRow] = [
        row("device", "device", "text", "trace", device_names(wb.devices) or "CPU", device_names(we.devices) or "CPU"),
        row("device_memory_bytes", "device memory", "bytes", "per device", wb.device_memory_bytes,
             we.device_memory_bytes),
        row("world_size", "world size", "", "trace", wb.world_size, we.world_size),
        row("measured_steps", "profiled steps", "", f"rank {wb.rank} / {we.rank}", wb.steps, we.steps),
    ]
    if len(wb.step_times_ns) and len(we.step_times_ns):
        import numpy as np

        # one window a side is one run a side: its steps are not evidence of a between-run change
        ch = compare_runs([float(np.median(wb.step_times_ns))], [float(np.median(we.step_times_ns))],
                          settings=settings, floor=default_noise_floor())
        rows.append(row("step_time_median_ns", "step time (median, profiled window)", "ns", "one rank",
                         ch.baseline, ch.experiment, ch))
    rows.append(row("gpu_util_pct", "GPU utilisation (window)", "%", "one rank", wb.gpu_util_pct, we.gpu_util_pct))
    return rows


__all__ = ["NOT_PROFILED", "OTHER_NODE", "DeltaRow", "ModuleRow", "TraceDiff", "Verdict", "compare_windows",
           "trace_diff"]
