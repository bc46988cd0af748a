"""Rules whose trigger cannot be produced on this CPU-only machine (GPU memory capacity, several ranks
with uneven work), on hand-built summaries; each also stays silent on a real run without the problem."""

from __future__ import annotations

from dataclasses import replace

import pytest

from stepscope.analyze.advisor import AdvisorInput
from stepscope.analyze.advisor.memory import MemoryHeadroom
from stepscope.analyze.advisor.parallel import RankImbalance
from stepscope.analyze.run.steps import PhaseShare
from stepscope.analyze.run.summary import RankSummary, RunSummary
from stepscope.analyze.stats import distribution
from stepscope.model.run import GpuInfo


@pytest.fixture
def real(profiled_store) -> RunSummary:  # type: ignore[no-untyped-def]
    from stepscope.analyze.run.summary import summarize_run
    from tests.conftest import load

    return summarize_run(load(profiled_store))


def _rank(base: RankSummary, rank: int, step_ms: float, comm_ms: float) -> RankSummary:
    st = base.steps
    phases = list(st.phases)
    phases[4] = PhaseShare("comm", comm_ms * 1e6, comm_ms / step_ms)
    phases[0] = PhaseShare("data_wait", 0.0, 0.0)
    steps = replace(st, step_time=distribution([step_ms * 1e6] * 10), phases=tuple(phases))
    return replace(base, rank=rank, local_rank=rank, steps=steps)


def test_memory_headroom(real: RunSummary) -> None:
    assert MemoryHeadroom().evaluate(AdvisorInput(real)) is None  # no GPU: nothing to say
    gpu = GpuInfo(index=0, name="H100", memory_bytes=80 * 2**30)
    host = replace(real.run.host, gpus=(gpu,))
    r0 = replace(real.ranks[0], peak_gpu_mem_bytes={"cuda:0": 20 * 2**30})
    s = replace(real, run=replace(real.run, host=host), ranks=(r0,))
    fd = MemoryHeadroom().evaluate(AdvisorInput(s))
    assert fd is not None and fd.evidence["used_share"] == pytest.approx(0.25)
    full = replace(s, ranks=(replace(r0, peak_gpu_mem_bytes={"cuda:0": 70 * 2**30}),))
    assert MemoryHeadroom().evaluate(AdvisorInput(full)) is None


def test_rank_imbalance(real: RunSummary) -> None:
    assert RankImbalance().evaluate(AdvisorInput(real)) is None  # one rank
    base = real.ranks[0]
    # both ranks step together (100 ms); rank 0 waits 40 ms in all-reduce for rank 1
    uneven = replace(real, ranks=(_rank(base, 0, 100, 40), _rank(base, 1, 100, 2)))
    fd = RankImbalance().evaluate(AdvisorInput(uneven))
    assert fd is not None
    assert fd.evidence["load_balance"] == pytest.approx(((60 + 98) / 2) / 98)
    assert fd.evidence["slowest_rank"] == 1 and fd.saving_s_per_step == pytest.approx((98 - 79) / 1e3)
    even = replace(real, ranks=(_rank(base, 0, 100, 5), _rank(base, 1, 100, 3)))
    assert RankImbalance().evaluate(AdvisorInput(even)) is None
