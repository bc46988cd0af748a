"""Figures that say what they count (issue 18): real runs of tests/scripts/honest_train.py and
lightning_plain.py under `stepscope run`, checked against what the scripts do by construction."""

from __future__ import annotations

import numpy as np
import pytest

from stepscope.analyze.run.summary import summarize_run
from tests.conftest import load

pytestmark = pytest.mark.slow


def _phase_sum(steps) -> np.ndarray:  # type: ignore[no-untyped-def]
    return sum(np.nan_to_num(steps[f"{p}_ns"]) for p in ("data_wait", "forward", "backward", "optimizer", "comm"))


def test_lightning_closure_phases_are_disjoint_and_add_up(observed, store):
    r = observed("lightning_plain.py", opts=("--flops-per-step", "0"))
    assert r.rc == 0, r
    data = load(store)
    steps = data.ranks[0].steps
    assert len(steps) == 16
    # forward and backward run inside optimizer.step(closure): each step's phases never exceed the step
    assert (_phase_sum(steps) <= steps.duration_ns * 1.001 + 1000).all()
    st = summarize_run(data).ranks[0].steps
    shares = {p.phase: p.share for p in (*st.phases, st.other) if p.share is not None}
    assert {"forward", "backward", "optimizer", "other"} <= shares.keys()
    assert sum(shares.values()) == pytest.approx(1.0, abs=0.02)
    assert all(0 <= v <= 1 for v in shares.values())


def test_two_optimizer_gan_watches_and_times_both_models(observed, store):
    r = observed("honest_train.py", "gan", opts=("--flops-per-step", "0"))
    assert r.rc == 0, r
    data = load(store)
    names = sorted(rec["summary"]["name"] for rec in data.ranks[0].extra["model"])
    assert names == ["Sequential", "SlowGenerator"]
    gen = next(rec["summary"] for rec in data.ranks[0].extra["model"] if rec["summary"]["name"] == "SlowGenerator")
    assert gen["total_params"] == 8 * 64 + 64 + 64 * 16 + 16
    # the generator's forward sleeps 20 ms each step: from the step after both optimizers stepped once
    # (step 1), forward holds it (discovery timed step 0 too)
    fwd = data.ranks[0].steps["forward_ns"]
    assert len(fwd) == 12
    assert (fwd >= 20e6).all(), fwd


def test_peeking_at_the_loader_is_not_an_epoch(observed, store):
    r = observed("honest_train.py", "peek")
    assert r.rc == 0, r
    data = load(store)
    epochs = data.ranks[0].steps["epoch"]
    # 3 epochs of 64 samples / batch 8, each preceded by len(next(iter(loader))[0])
    assert list(epochs) == [0] * 8 + [1] * 8 + [2] * 8
    assert list(data.ranks[0].steps["samples"]) == [8.0] * 24  # the peeked batch is not trained on
    assert summarize_run(data).ranks[0].steps.epochs == 3


def test_epochs_counted_with_stepscope_steps(observed, store):
    r = observed("honest_train.py", "api-steps")
    assert r.rc == 0, r
    data = load(store)
    assert list(data.ranks[0].steps["epoch"]) == [0] * 8 + [1] * 8
    assert summarize_run(data).ranks[0].steps.epochs == 2


def test_samples_from_the_forward_input_without_a_dataloader(observed, store):
    r = observed("honest_train.py", "no-loader", opts=("--flops-per-step", "0"))
    assert r.rc == 0, r
    data = load(store)
    steps = data.ranks[0].steps
    assert list(steps["samples"]) == [8.0] * 12
    assert np.isnan(steps["data_wait_ns"]).all()  # no loader: data wait not measured, not zero
    st = summarize_run(data).ranks[0].steps
    assert st.samples_per_s == pytest.approx(8 * st.steps_per_s, rel=1e-6)


def test_a_run_shorter_than_the_sampler_period_has_memory_figures(observed, store):
    r = observed("no_loader.py", opts=("--sample-interval", "30", "--flops-per-step", "0"))
    assert r.rc == 0, r
    data = load(store)
    samples = data.ranks[0].samples
    assert len(samples) == 2  # one when the session opened, one when it closed; none periodic in 30 s
    rss = samples.columns["rss_bytes"]
    assert np.isfinite(rss).all() and (rss > 10e6).all()
    cpu = samples.columns["cpu_process_pct"]  # a rate: none at the first sample, one over the run at the last
    assert np.isnan(cpu[0]) and np.isfinite(cpu[1])
    assert summarize_run(data).headline.peak_rss_bytes == float(rss.max())


def test_show_counts_equal_the_json(observed, cli, store):
    import json
    import re

    r = observed("tiny_train.py", "--steps", "30", opts=("--profile-steps", "2", "--warmup-steps", "3"))
    assert r.rc == 0, r
    doc = json.loads(cli("show", "latest", "--json").out)
    st = doc["ranks"][0]["steps"]
    out = cli("show", "latest").out
    m = re.search(r"steps recorded\s*│\s*(\d+) \((\d+) warm-up, (\d+) instrumented, (\d+) measured\)", out)
    assert m, out
    assert tuple(map(int, m.groups())) == (st["steps"], st["warmup_steps"],
                                           st["steps"] - st["warmup_steps"] - st["measured_steps"],
                                           st["measured_steps"])
    # 30 steps, 3 warm-up; skip 3, wait 1, warm-up 1: traced 4-6, written at 7; FLOPs counted on step 2
    assert (st["steps"], st["warmup_steps"], st["measured_steps"]) == (30, 3, 30 - 3 - 4)


def test_parameters_updated_by_hand_point_to_stepscope_step(observed, cli, store):
    r = observed("honest_train.py", "by-hand", opts=("--sample-interval", "0"))
    assert r.rc == 0, r
    out = cli("show", "latest").out
    flat = " ".join(out.replace("│", " ").split())  # the warnings box wraps its lines
    assert "call stepscope.step() at the end of each training step" in flat  # the process was observed
    assert "Memory" not in out and "Time per step by phase" not in out  # nothing measured: no empty tables
    advice = cli("advise", "latest").out
    assert "--profile-steps" not in out + advice  # a window needs steps


def test_session_arguments_ignored_under_run_are_named(observed, store):
    r = observed("api_train.py")
    assert r.rc == 0, r
    data = load(store)
    assert data.run.name == "api_train" and "lr" not in data.run.params
    assert any("stepscope.session(name=..., params=...) is ignored under `stepscope run`" in n
               for n in data.ranks[0].notes)
