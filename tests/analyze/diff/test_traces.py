"""Window diffs: aligned module tree, operators, kernels, components — hand-built tables and real traces."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from stepscope.analyze.diff.engine import analyze_window
from stepscope.analyze.diff.traces import OTHER_NODE, compare_windows
from stepscope.analyze.diff.window import ModuleStat, OpStat, WindowTables
from stepscope.model.events import EventKind
from stepscope.traces.components import ComponentRules
from stepscope.traces.kineto import read_trace

PAIR = Path(__file__).resolve().parents[3] / "tests" / "data" / "traces" / "a100_8rank_diff"


def _window(modules: dict[str, tuple[float, float]], ops: dict[str, tuple[int, float, float]], steps: int = 2,
            outside: float = 0.0) -> WindowTables:
    return WindowTables(
        rank=0, world_size=1, devices=(), device_memory_bytes=None, steps=steps,
        step_times_ns=np.full(steps, 1e6), has_gpu=False, gpu_util_pct=None,
        operators={k: OpStat(calls=c, self_ns=s, total_ns=t, device_ns=None, component="gemm" if "mm" in k else "other",
                             module="model/fc" if "mm" in k else None) for k, (c, s, t) in ops.items()},
        modules={k: ModuleStat(type=None, calls=1, cpu_ns=cpu, gpu_ns=gpu) for k, (cpu, gpu) in modules.items()},
        outside_cpu_ns=outside)


def test_module_tree_aligned_by_path_with_only_in_and_other_nodes() -> None:
    base = _window({"model": (800, 0), "model/fc": (600, 0), "model/act": (100, 0)}, {}, steps=2, outside=200)
    exp = _window({"model": (1800, 0), "model/fc": (1500, 0), "model/drop": (200, 0)}, {}, steps=3, outside=600)
    d = compare_windows(base, exp)
    assert d.per_step and d.time_kind == "cpu"
    rows = {m.path: m for m in d.modules}
    assert rows["model"].baseline_ns == 400 and rows["model"].experiment_ns == 600 and rows["model"].delta_ns == 200
    assert rows["model/fc"].delta_pct == pytest.approx(100 * (500 - 300) / 300)
    assert rows["model/act"].presence == "only in baseline" and rows["model/act"].experiment_ns is None
    assert rows["model/drop"].presence == "only in experiment"
    assert rows[OTHER_NODE].baseline_ns == 100 and rows[OTHER_NODE].experiment_ns == 200
    order = [m.path for m in d.modules]
    assert order[0] == "model" and order[-1] == OTHER_NODE
    assert order.index("model/fc") < order.index("model/drop") < order.index("model/act")  # |delta| 200, 67, 50


def test_barely_overlapping_trees_are_named() -> None:
    base = _window({"resnet": (1000, 0), "resnet/conv1": (900, 0)}, {})
    exp = _window({"gpt": (1000, 0), "gpt/attn": (900, 0), "resnet": (10, 0)}, {})
    d = compare_windows(base, exp)
    assert d.module_overlap is not None and d.module_overlap < 0.05
    assert any("barely overlap" in n for n in d.notes)
    assert {m.presence for m in d.modules if m.path.startswith("gpt")} == {"only in experiment"}


def test_operators_sorted_by_absolute_delta_per_step() -> None:
    base = _window({}, {"aten::mm": (4, 800, 1000), "aten::relu": (4, 100, 100), "aten::gone": (2, 50, 50)})
    exp = _window({}, {"aten::mm": (4, 200, 300), "aten::relu": (4, 160, 160), "aten::new": (2, 400, 400)})
    d = compare_windows(base, exp)
    assert [o.name for o in d.operators] == ["aten::mm", "aten::new", "aten::relu", "aten::gone"]
    mm = d.operators[0]
    assert (mm.self_baseline, mm.self_experiment, mm.delta) == (400, 100, -300)
    assert mm.calls_baseline == 2 and mm.component == "gemm" and mm.module == "model/fc"
    assert d.operators[-1].presence == "only in baseline"
    comps = {c.name: c for c in d.components}
    assert comps["gemm"].delta == -300 and comps["other"].delta == pytest.approx(30 + 200 - 25)
    assert any("no module tree" in n for n in d.notes)


@cache
def _pair() -> tuple:
    return tuple(read_trace(PAIR / f) for f in ("control_rank3.json.gz", "test_rank3.json.gz"))


def _steps(table) -> int:  # type: ignore[no-untyped-def]
    return sum(1 for n in table.name_of(table.of_kind(EventKind.USER_ANNOTATION)["name"])
               if re.fullmatch(r"ProfilerStep#\d+", n))


def test_fixture_pair_kernels_and_components_match_the_events() -> None:
    b, e = _pair()
    d = compare_windows(analyze_window(b), analyze_window(e))
    nb, ne = _steps(b), _steps(e)
    assert d.per_step and (d.steps_baseline, d.steps_experiment) == (nb, ne) == (6, 6)
    assert d.time_kind == "gpu" and (d.rank_baseline, d.rank_experiment) == (3, 1)

    def kernel_sum(t, name: str) -> float:  # type: ignore[no-untyped-def]
        work = t.of_kind(EventKind.KERNEL, EventKind.MEMCPY, EventKind.MEMSET)
        return float(work["dur_ns"][np.asarray(work.name_of(work["name"])) == name].sum())

    name = "Memcpy DtoD (Device -> Device)"
    row = next(k for k in d.kernels if k.name == name)
    assert row.delta == pytest.approx(kernel_sum(e, name) / ne - kernel_sum(b, name) / nb)
    assert abs(row.delta) == max(abs(k.delta) for k in d.kernels)  # biggest kernel change first
    assert d.kernels[0].name == name

    rules = ComponentRules.defaults()

    def gemm(t) -> float:  # type: ignore[no-untyped-def]
        work = t.of_kind(EventKind.KERNEL, EventKind.MEMCPY, EventKind.MEMSET)
        names = work.name_of(work["name"])
        return float(sum(d_ for n, d_ in zip(names, work["dur_ns"].tolist()) if rules.classify(n) == "gemm"))

    comp = next(c for c in d.components if c.name == "gemm")
    assert comp.delta == pytest.approx(gemm(e) / ne - gemm(b) / nb)
    assert [abs(c.delta) for c in d.components] == sorted((abs(c.delta) for c in d.components), reverse=True)
    assert not d.modules and any("no module tree" in n for n in d.notes)
