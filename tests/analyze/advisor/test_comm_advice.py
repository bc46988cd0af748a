"""Communication advice tells latency-bound from bandwidth-bound collectives, and never promises more than
the communication takes: a real 2-rank DDP job with an 84-byte bucket, and hand-built summaries."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from stepscope.analyze.advisor import AdvisorInput, advise
from stepscope.analyze.advisor.commfacts import LATENCY_BOUND_BYTES, CommFacts, CommOp
from stepscope.analyze.advisor.parallel import ACCUMULATION, CommNotOverlapped
from stepscope.analyze.stats import distribution
from stepscope.analyze.steps import PhaseShare
from stepscope.analyze.summary import RankSummary, RunSummary, summarize_run
from stepscope.cli.runinputs import advisor_input, load_traces
from tests.conftest import PY, SCRIPTS, load
from tests.report.conftest import profiled_store  # noqa: F401  (shared real run)


@pytest.mark.slow
def test_tiny_ddp_model_is_latency_bound_and_led_by_no_sync(cli, store: Path) -> None:  # type: ignore[no-untyped-def]
    """nn.Linear(20, 1): 21 float32 parameters, one 84-byte bucket all-reduced every step over gloo."""
    res = cli("run", "--quiet", "--sample-interval", "0.2", "--", PY, "-m", "torch.distributed.run", "--standalone",
              "--nproc-per-node", "2", str(SCRIPTS / "ddp_tiny.py"), "--steps", "40", timeout=300)
    assert res.rc == 0, res
    data = load(store)
    summary = summarize_run(data)
    inp = advisor_input(summary, load_traces(data))
    assert inp.comm is not None
    fd = CommNotOverlapped().evaluate(inp)
    assert fd is not None, [r.steps.phases[4] for r in summary.ranks]
    assert fd.evidence["bytes_per_call"] == 21 * 4 and fd.evidence["collective"] == "ddp:all_reduce"
    assert fd.evidence["calls_per_step"] == pytest.approx(1.0) and fd.evidence["bound"] == "latency"
    s = fd.suggestion
    assert s.index("no_sync") < s.index("bucket_cap_mb")  # the relevant fix leads; the other is ruled out
    assert "cannot help" in s and "bf16_compress_hook" not in s
    comm = max(summary.ranks, key=lambda r: r.steps.phases[4].share or 0.0).steps.phases[4]
    assert fd.evidence["comm_per_step_s"] == pytest.approx((comm.mean_ns or 0) / 1e9)
    sync = inp.comm.sync_share or 0.0
    expected = (comm.mean_ns or 0) / 1e9 * (1 - 1 / ACCUMULATION) * (1 - sync)
    assert fd.saving_s_per_step == pytest.approx(expected)
    assert fd.saving_s_per_step < fd.evidence["comm_per_step_s"]  # never more than the cause takes
    step_s = summary.ranks[0].steps.step_time.mean / 1e9  # type: ignore[union-attr]
    assert fd.saving_s_per_step < step_s
    ranked = advise(inp).findings
    assert any(f.rule_id == CommNotOverlapped.id and f.saving_s_per_step == fd.saving_s_per_step for f in ranked)
    assert all(f.saving_s_per_step is None or f.saving_s_per_step < step_s for f in ranked)


@pytest.fixture
def real(profiled_store) -> RunSummary:  # type: ignore[no-untyped-def]  # noqa: F811
    return summarize_run(load(profiled_store))


def _with_comm(real: RunSummary, step_ms: float, comm_ms: float, backward_ms: float) -> RunSummary:
    base: RankSummary = real.ranks[0]
    phases = list(base.steps.phases)
    phases[0] = PhaseShare("data_wait", 0.0, 0.0)
    phases[2] = PhaseShare("backward", backward_ms * 1e6, backward_ms / step_ms)
    phases[4] = PhaseShare("comm", comm_ms * 1e6, comm_ms / step_ms)
    steps = replace(base.steps, step_time=distribution([step_ms * 1e6] * 10), phases=tuple(phases))
    return replace(real, ranks=(replace(base, steps=steps),))


def _facts(bucket_bytes: float, sync: float | None = 0.1) -> CommFacts:
    return CommFacts(steps=10, ranks=2, ops=(CommOp("ddp:all_reduce", 2.0, bucket_bytes, 30e6),), sync_share=sync)


def test_bandwidth_bound_buckets_get_overlap_and_compression_advice(real: RunSummary) -> None:
    """25 MiB buckets, 30 ms exposed comm of a 100 ms step, 20 ms backward: hiding comm behind backward can
    save at most the backward's 20 ms, not the 30 ms of communication."""
    fd = CommNotOverlapped().evaluate(AdvisorInput(_with_comm(real, 100, 30, 20), comm=_facts(25 * 2**20)))
    assert fd is not None and fd.evidence["bound"] == "bandwidth"
    assert "bucket_cap_mb" in fd.suggestion and "bf16_compress_hook" in fd.suggestion
    assert fd.saving_s_per_step == pytest.approx(0.020)
    roomy = CommNotOverlapped().evaluate(AdvisorInput(_with_comm(real, 100, 30, 60), comm=_facts(25 * 2**20)))
    assert roomy is not None and roomy.saving_s_per_step == pytest.approx(0.030)  # capped by the comm itself


def test_latency_bound_saving_leaves_out_waiting_for_peers(real: RunSummary) -> None:
    fd = CommNotOverlapped().evaluate(AdvisorInput(_with_comm(real, 2.48, 2.43, 0.02), comm=_facts(84, 0.5)))
    assert fd is not None and fd.evidence["bound"] == "latency" and fd.evidence["peer_wait_share"] == 0.5
    assert fd.saving_s_per_step == pytest.approx(2.43e-3 * (1 - 1 / ACCUMULATION) * 0.5)
    assert fd.saving_s_per_step < 2.43e-3
    assert LATENCY_BOUND_BYTES > 84


def test_no_finding_where_communication_is_small(real: RunSummary) -> None:
    """5 ms of a 100 ms step: below the 15% threshold, overlapping it would not pay."""
    assert CommNotOverlapped().evaluate(AdvisorInput(_with_comm(real, 100, 5, 20), comm=_facts(84))) is None


def test_unknown_payload_keeps_the_generic_advice_with_the_cap(real: RunSummary) -> None:
    fd = CommNotOverlapped().evaluate(AdvisorInput(_with_comm(real, 10, 4, 1)))
    assert fd is not None and "bound" not in fd.evidence
    assert fd.saving_s_per_step == pytest.approx(0.001)
