"""Rules whose remedy is a setting carry it as a Change; the others carry none ("needs a code change")."""

from __future__ import annotations

from dataclasses import replace

from stepscope.analyze.advisor import AdvisorInput, advise
from stepscope.analyze.advisor.host import CpuOversubscription
from stepscope.analyze.advisor.memory import _batch_change
from stepscope.analyze.run.summary import RunSummary
from tests.analyze.advisor.test_host_advice import CORES, _run, real  # noqa: F401 (fixture)


def test_oversubscription_change_is_the_suggested_thread_count(real: RunSummary) -> None:  # noqa: F811
    s = _run(real, procs=1, threads=4 * CORES, workers=0)
    f = CpuOversubscription().evaluate(AdvisorInput(s))
    assert f is not None and f.change is not None
    assert (f.change.kind, f.change.key, f.change.value) == ("threads", "intra", CORES)
    assert f"torch.set_num_threads({CORES})" in f.suggestion


def test_input_bound_change_from_the_recorded_workers(real: RunSummary) -> None:  # noqa: F811
    s = _run(real, procs=1, threads=1, workers=0, data_wait=0.5)
    f = next(x for x in advise(AdvisorInput(s)).findings if x.rule_id == "input-bound")
    assert f.change is not None and (f.change.kind, f.change.key) == ("loader", "num_workers")
    assert f.change.value == max(1, min(4, CORES))
    busy = _run(real, procs=1, threads=1, workers=CORES, data_wait=0.5)  # workers already use every core
    f = next(x for x in advise(AdvisorInput(busy)).findings if x.rule_id == "input-bound")
    assert f.change is None


def test_batch_size_change_only_where_the_run_names_the_parameter(real: RunSummary) -> None:  # noqa: F811
    assert _batch_change(AdvisorInput(real)) is None or "batch_size" in real.run.params
    named = replace(real, run=replace(real.run, params={"batch_size": "32"}))
    c = _batch_change(AdvisorInput(named))
    assert c is not None and (c.kind, c.key, c.value) == ("param", "batch_size", 64)
