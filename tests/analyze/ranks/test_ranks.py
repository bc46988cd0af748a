"""Per-rank analysis on hand-built timings: POP metrics against values computed by hand, stragglers
beyond noise only, the transfer / sync split, incomplete ranks, roles."""

from __future__ import annotations

import numpy as np
import pytest

from stepscope.analyze.ranks.commsplit import split_calls, split_kernels
from stepscope.analyze.ranks.ranks import analyze_ranks, pop_metrics
from stepscope.analyze.ranks.roles import analyze_roles
from tests.analyze.distdata import MS, rank_data, run_data


def _three_ranks(**kw):  # type: ignore[no-untyped-def]
    # every rank steps 100 ms in lockstep; comm 40 / 20 / 10 ms -> useful 60 / 80 / 90 ms
    return run_data([rank_data(r, 3, [100.0] * 10, comm_ms=[c] * 10, **kw) for r, c in enumerate((40.0, 20.0, 10.0))])


def test_pop_metrics_match_hand_computed_values() -> None:
    a = analyze_ranks(_three_ranks())
    assert a.window == (0, 9)
    assert [r.useful_ns / MS for r in a.ranks] == pytest.approx([60, 80, 90])
    # LB = mean(60, 80, 90) / 90; CommE = 90 / 100; PE = LB * CommE = mean / 100
    assert a.pop is not None
    assert a.pop.load_balance == pytest.approx((230 / 3) / 90)
    assert a.pop.communication_efficiency == pytest.approx(0.9)
    assert a.pop.parallel_efficiency == pytest.approx((230 / 3) / 100)
    assert a.pop.runtime_ns == pytest.approx(100 * MS)
    assert a.balanced is False
    assert a.to_dict()["schema"] == "stepscope.ranks/1"


def test_straggler_named_only_beyond_noise() -> None:
    a = analyze_ranks(_three_ranks())
    # rank 2 (90 ms useful) exceeds the median of the others' medians (70 ms) by 20 ms, every step;
    # rank 1 (80 ms) exceeds median(60, 90) = 75 ms by 5 ms, but sits inside the others' spread: p = 1
    assert [s.rank for s in a.stragglers] == [2]
    assert a.stragglers[0].excess_ns == pytest.approx(20 * MS)
    assert a.stragglers[0].excess_share == pytest.approx(0.2)


def test_balanced_ranks_with_noise() -> None:
    rng = np.random.default_rng(1)
    ranks = [rank_data(r, 2, list(100 + rng.normal(0, 2, 30)), comm_ms=list(10 + rng.normal(0, 1, 30)))
             for r in range(2)]
    a = analyze_ranks(run_data(ranks))
    assert a.stragglers == ()
    assert a.balanced is True
    assert a.pop is not None and a.pop.load_balance > 0.97


def test_pop_metrics_function_directly() -> None:
    p = pop_metrics([50.0, 100.0], [120.0, 110.0])
    assert p is not None
    assert (p.load_balance, p.communication_efficiency) == pytest.approx((0.75, 100 / 120))
    assert pop_metrics([], []) is None


def test_transfer_sync_split_by_hand() -> None:
    durs = {0: [5, 6, 7, 9], 1: [2, 6, 3], 2: [4, 1, 3]}
    rows = {}
    for r, d in durs.items():
        n = len(d)
        rows[r] = {"op": ["all_reduce"] * n + ["send"], "step": [0] * (n + 1), "start_ns": [0] * (n + 1),
                   "duration_ns": [x * MS for x in d] + [50 * MS], "bytes": [400.0] * (n + 1),
                   "peer": [-1] * n + [1], "group_size": [3] * (n + 1), "seq": [*list(range(n)), 0]}
    ranks = [rank_data(r, 3, [100.0] * 3, comm_ms=[10.0] * 3, comm_rows=rows[r]) for r in range(3)]
    a = analyze_ranks(run_data(ranks))
    split = a.comm_split
    assert split is not None and len(split.ops) == 1  # point-to-point calls are left out
    op = split.ops[0]
    # shortest per instance: 2, 1, 3 ms -> transfer 6 ms per rank; sync 12 / 5 / 2 ms; seq 3 only on rank 0
    assert (op.instances, op.calls, op.unmatched_calls) == (3, 9, 1)
    assert op.transfer_ns == pytest.approx(18 * MS)
    assert op.sync_ns == pytest.approx(19 * MS)
    assert [x for r in split.ranks for x in (r.transfer_ns / MS, r.sync_ns / MS)] == pytest.approx([6, 12, 6, 5, 6, 2])
    assert a.ranks[0].sync_ns == pytest.approx(4 * MS)  # 12 ms over 3 steps


def test_kernel_split_matches_kth_instance_by_name() -> None:
    s = split_kernels([(0, ["ncclAllReduce(x)", "ncclAllReduce(x)", "ncclBroadcast"], np.array([10.0, 30.0, 5.0])),
                       (1, ["ncclAllReduce(x)", "ncclAllReduce(x)"], np.array([40.0, 20.0]))])
    assert s is not None
    ar = next(o for o in s.ops if o.op == "ncclAllReduce")
    # per instance the shortest (10, then 20) is each rank-call's transfer: 2 x 30; waits 0+30 and 10+0
    assert (ar.transfer_ns, ar.sync_ns, ar.time_ns) == (60.0, 40.0, 100.0)
    assert next(o for o in s.ops if o.op == "ncclBroadcast").unmatched_calls == 1
    assert split_calls([]) is None


def test_rank_that_died_is_marked_and_kept() -> None:
    ranks = [rank_data(0, 2, [100.0] * 10, comm_ms=[5.0] * 10),
             rank_data(1, 2, [100.0] * 6, comm_ms=[5.0] * 6, complete=False)]
    a = analyze_ranks(run_data(ranks))
    assert a.incomplete_ranks == (1,)
    assert a.window == (0, 9)  # from the complete rank
    assert [r.steps for r in a.ranks] == [10, 6]
    assert not a.ranks[1].complete
    assert any("rank 1" in w for w in a.warnings)
    assert a.pop is not None


def test_no_comm_measured_and_single_rank() -> None:
    off = run_data([rank_data(r, 2, [100.0] * 5) for r in range(2)], options={"comm_timing": False, "warmup_steps": 0})
    a = analyze_ranks(off)
    assert a.pop is None and "no communication" in (a.pop_note or "")
    assert a.ranks[0].comm_ns is None
    one = analyze_ranks(run_data([rank_data(0, 1, [100.0] * 5, comm_ms=[1.0] * 5)]))
    assert one.pop is None and one.pop_note == "one rank: nothing to balance"


def test_roles_learner_saturates_while_actors_wait() -> None:
    ranks = [rank_data(0, 3, [100.0] * 20, comm_ms=[3.0] * 20, role="learner"),
             rank_data(1, 3, [100.0] * 20, comm_ms=[80.0] * 20, role="actor"),
             rank_data(2, 3, [100.0] * 20, comm_ms=[70.0] * 20, wait_ms=[5.0] * 20, role="actor")]
    r = analyze_roles(run_data(ranks), bins=4)
    by = {x.role: x for x in r.roles}
    assert by["learner"].busy_share == pytest.approx(0.97)
    assert by["actor"].waiting_share == pytest.approx((80 + 75) / 200)
    assert by["learner"].saturated_bins == (0, 1, 2, 3)
    assert by["actor"].busy_by_bin == pytest.approx([0.225] * 4)
    assert len(r.findings) == 1 and r.findings[0].startswith("learner is saturated")


def test_split_and_gpu_pop_from_two_real_rank_traces() -> None:
    import gzip
    import json

    from stepscope.traces.kineto import read_trace
    from tests.conftest import TRACES

    paths = {r: TRACES / "sampled_128rank" / f"rank{r}.json.gz" for r in (0, 1)}
    durs = {}
    for r, p in paths.items():  # independently: the NCCL kernels straight from the JSON, in start order
        with gzip.open(p) as fh:
            events = json.loads(fh.read())["traceEvents"]
        kernels = sorted((e["ts"], e["dur"]) for e in events
                         if e.get("cat") == "kernel" and e["name"].startswith("nccl"))
        durs[r] = np.array([d for _, d in kernels]) * 1000
    transfer = np.minimum(durs[0], durs[1])
    data = run_data([rank_data(r, 2, [100.0] * 5, comm_ms=[1.0] * 5) for r in (0, 1)])
    a = analyze_ranks(data, traces={r: read_trace(p) for r, p in paths.items()})
    assert a.trace_split is not None and a.trace_split.source == "trace"
    (op,) = a.trace_split.ops
    assert op.op.startswith("ncclKernel_SendRecv") and (op.instances, op.calls) == (10, 20)
    assert op.transfer_ns == pytest.approx(2 * transfer.sum())
    assert op.sync_ns == pytest.approx((durs[0] - transfer).sum() + (durs[1] - transfer).sum())
    assert [t.rank for t in a.trace_ranks] == [0, 1]
    assert a.trace_pop is not None and 0 < a.trace_pop.load_balance <= 1
