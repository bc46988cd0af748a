"""The HTML run report of real runs: sections, numbers from the summary, escaping, bad input."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from stepscope.app import RunAnalysis
from stepscope.report import format as f
from stepscope.report.html.run_report import render_run_report
from tests.conftest import HOSTILE, load, observe

SECTIONS = ("overview", "speed", "time", "system", "memory", "kernels", "model", "metrics")


def _render(store: Path) -> tuple[str, object]:
    ra = RunAnalysis(load(store))
    return render_run_report(ra), ra.summary


def test_sections_numbers_and_escaping(profiled_store: Path) -> None:
    html, summary = _render(profiled_store)
    for s in SECTIONS:
        assert f'<section class="ss-section" id="{s}">' in html
    assert HOSTILE not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    h = summary.headline  # type: ignore[attr-defined]
    assert f.duration_ns(h.step_time_median_ns) in html  # headline tile
    assert 'data-rule="input-bound"' in html  # the slow dataset's finding, with evidence
    for plot in ("plot-step-time", "plot-phases", "plot-throughput", "plot-metric-step-0", "plot-sys-cpu"):
        assert f'id="{plot}"' in html, plot
    # regions as a tree: forward under model
    assert 'data-id="model/forward" data-parent="model"' in html
    # the embedded step-time series is the run's step durations
    spec = re.search(r'id="plot-step-time"><figcaption>.*?</figcaption><script type="application/json" '
                     r'class="ss-spec">(.*?)</script>', html)
    assert spec is not None
    y = json.loads(spec.group(1))["series"][0]["y"]
    steps = load(profiled_store).ranks[0].steps
    train = steps.take(steps["phase"] == 0)
    assert y == train.duration_ns.astype(float).tolist()
    assert "aten::" in html  # operators of the CPU profiled window


def test_missing_trace_is_named_not_fatal(profiled_store: Path, tmp_path: Path) -> None:
    store = tmp_path / "copy"
    shutil.copytree(profiled_store, store)
    run_dir = next((store / "runs").iterdir())
    for p in (run_dir / "artifacts" / "traces").iterdir():
        p.unlink()
    html, _ = _render(store)
    assert "trace artifact artifacts/traces/rank0.json.gz is missing" in html
    assert 'id="kernels"' in html


def test_failed_run_says_so(tmp_path: Path) -> None:
    store = tmp_path / "store"
    res = observe(store, "--steps", "6", "--fail-at", "3", name="failing", script="tiny_train.py")
    assert res.returncode != 0
    html, _ = _render(store)
    assert "This run failed" in html and 'class="ss-badge failed"' in html
    assert 'id="plot-step-time"' in html  # what there is is still shown


def test_run_without_steps_says_why(tmp_path: Path) -> None:
    store = tmp_path / "store"
    res = observe(store, "--steps", "0", name="nothing", script="tiny_train.py")
    assert res.returncode == 0, res.stderr[-2000:]
    html, _ = _render(store)
    assert "No training step was recorded" in html
    for s in SECTIONS:
        assert f'id="{s}"' in html
