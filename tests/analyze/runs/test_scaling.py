"""Scaling analysis on hand-built runs whose throughputs and efficiencies are known in advance."""

from __future__ import annotations

import math

import pytest

from stepscope.analyze.runs.scaling import Target, analyze_scaling, script_of
from stepscope.model.run import RunStatus
from tests.analyze.distdata import rank_data, run_data


def _run(run_id: str, world: int, step_ms: float, *, samples: float = 8.0, script: str = "train.py",
         status: RunStatus = RunStatus.COMPLETED, epoch_len: int | None = None, metrics=None):  # type: ignore[no-untyped-def]
    ranks = [rank_data(r, world, [step_ms] * 10, comm_ms=[step_ms / 10] * 10, samples=samples, epoch_len=epoch_len,
                       metrics=metrics if r == 0 else None) for r in range(world)]
    return run_data(ranks, run_id=run_id, command=("torchrun", f"--nproc-per-node={world}", script), status=status)


def test_weak_scaling_table_by_hand() -> None:
    runs = [_run("a", 1, 100), _run("b", 2, 100), _run("c", 4, 125), _run("d", 4, 150)]
    a = analyze_scaling(runs)
    assert (a.mode, a.mode_source, a.sizes, a.base_size) == ("weak", "inferred", (1, 2, 4), 1)
    rows = {r.world_size: r for r in a.table("all").rows}  # type: ignore[union-attr]
    # 1 rank: 80 samples in 1.0 s; 2 ranks: 160 in 1.0 s; 4 ranks: 320 in 1.25 s and in 1.5 s
    assert rows[1].total_throughput_mean == pytest.approx(80)
    assert rows[2].total_throughput_mean == pytest.approx(160)
    assert rows[2].total_efficiency == pytest.approx(1.0)
    assert rows[4].runs == 2
    assert rows[4].total_time_mean_s == pytest.approx(1.375)
    assert rows[4].total_time_std_s == pytest.approx(0.25 / math.sqrt(2))
    assert rows[4].total_throughput_mean == pytest.approx((256 + 320 / 1.5) / 2)
    assert rows[4].total_throughput_std == pytest.approx((256 - 320 / 1.5) / math.sqrt(2))
    assert rows[4].local_throughput_mean == pytest.approx((64 + 80 / 1.5) / 2)
    assert rows[4].total_ideal == pytest.approx(320)
    assert rows[4].local_ideal == pytest.approx(80)
    assert rows[4].total_efficiency == pytest.approx(rows[4].total_throughput_mean / 320)
    assert rows[4].time_efficiency == pytest.approx(1.0 / 1.375)
    assert rows[4].comm_share == pytest.approx(0.1)
    assert a.to_dict()["schema"] == "stepscope.scaling/1"


def test_strong_scaling_speedup_and_efficiency() -> None:
    runs = [_run("a", 1, 100, samples=8), _run("b", 2, 60, samples=4)]
    a = analyze_scaling(runs)
    assert a.mode == "strong"
    r2 = a.table("all").rows[1]  # type: ignore[union-attr]
    assert r2.speedup == pytest.approx(1 / 0.6)
    assert r2.time_efficiency == pytest.approx(1 / (0.6 * 2))
    assert r2.total_efficiency == pytest.approx((80 / 0.6) / 160)
    assert analyze_scaling(runs, mode="weak").warnings == ("--mode weak, but the samples look like strong scaling",)


def test_first_and_later_epochs() -> None:
    runs = [_run("a", 1, 100, epoch_len=5), _run("b", 2, 100, epoch_len=5)]
    a = analyze_scaling(runs)
    assert [t.selection for t in a.tables] == ["all", "first_epoch", "later_epochs"]
    first = a.table("first_epoch").rows[1]  # type: ignore[union-attr]
    assert (first.samples, first.total_time_mean_s) == pytest.approx((80, 0.5))
    assert a.table("later_epochs").rows[0].windows == 1  # type: ignore[union-attr]


def test_time_to_target() -> None:
    loss = [(0.1, 1.0), (0.5, 0.6), (0.9, 0.4), (1.0, 0.3)]
    acc = [(0.2, 0.1), (0.4, 0.7), (0.8, 0.9)]
    a = analyze_scaling([_run("a", 1, 100, metrics=loss), _run("b", 2, 100, metrics=loss)], target=Target("loss", 0.5))
    assert [r.time_to_target_mean_s for r in a.table("all").rows] == pytest.approx([0.9, 0.9])  # type: ignore[union-attr]
    a = analyze_scaling([_run("a", 1, 100, metrics=acc), _run("b", 2, 100, metrics=acc)],
                        target=Target("loss", 0.95))
    assert [r.target_reached for r in a.table("all").rows] == [0, 0]  # type: ignore[union-attr]


def test_bad_groups_are_named() -> None:
    a = analyze_scaling([_run("a", 2, 100), _run("b", 2, 110)])
    assert a.sizes == (2,) and any("only one world size (2)" in w for w in a.warnings)
    mixed = analyze_scaling([_run("a", 1, 100), _run("b", 2, 100, script="other.py"),
                             _run("c", 4, 100, status=RunStatus.FAILED)])
    assert mixed.excluded == {"c": "status failed"}
    assert mixed.scripts == {"train.py": ["a", "c"], "other.py": ["b"]}
    assert any("different scripts (other.py: b; train.py: a, c)" in w for w in mixed.warnings)
    assert mixed.sizes == (1, 2)


def test_script_of() -> None:
    assert script_of(("torchrun", "--nproc-per-node", "2", "/x/train.py", "--lr", "1")) == "train.py"
    assert script_of(("python", "-m", "pkg.train")) == "pkg.train"
    assert script_of(("./run.sh",)) == "run.sh"


def test_runs_without_samples_give_no_numpy_warning() -> None:
    """Scripts without a DataLoader (before samples came from the forward input) have NaN samples:
    the table says '—', and no NumPy RuntimeWarning leaks to the terminal."""
    import warnings

    runs = [_run("a", 1, 100, samples=math.nan), _run("b", 2, 100, samples=math.nan)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rows = {r.world_size: r for r in analyze_scaling(runs).table("all").rows}  # type: ignore[union-attr]
    assert math.isnan(rows[2].samples) and rows[2].total_throughput_mean is None
