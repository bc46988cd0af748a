"""`stepscope advise` on a real run (slow dataset, profiled window): every finding says which measurement its
evidence came from, in the terminal, the JSON and the HTML report, and no saving exceeds the run's mean step or
its duration."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

from tests.conftest import Result


def test_every_finding_names_its_measurement(cli: Callable[..., Result], profiled_store: Path,
                                             store: Path) -> None:
    shutil.copytree(profiled_store, store)
    data = cli("advise", "latest", "--json")
    assert data.rc == 0, data
    findings = json.loads(data.out)["findings"]
    assert findings, data.out  # input-bound at least
    for f in findings:
        assert f["measured_from"].startswith("from "), f
    wait = next(f for f in findings if f["rule_id"] == "input-bound")
    assert wait["measured_from"].startswith("from the step timings of the ")
    shown = cli("advise", "latest", "--width", "200")
    assert shown.rc == 0, shown
    assert shown.out.count("evidence (from ") == len(findings), shown.out
    assert "+0 " not in shown.out and "nan" not in shown.out
    page = store.parent / "report.html"
    assert cli("report", "latest", "-o", str(page)).rc == 0
    html = page.read_text(encoding="utf-8")
    wait_html = html[html.index('data-rule="input-bound"'):]
    assert f"<b>evidence</b> ({wait['measured_from']})" in wait_html[:4000]


def test_savings_never_exceed_the_runs_time(cli: Callable[..., Result], profiled_store: Path,
                                            store: Path) -> None:
    shutil.copytree(profiled_store, store)
    summary = json.loads(cli("show", "latest", "--json").out)
    findings = json.loads(cli("advise", "latest", "--json").out)["findings"]
    r0 = summary["ranks"][0]["steps"]
    mean_step_s = r0["wall_ns"] / r0["measured_steps"] / 1e9
    duration_s = (summary["run"]["end_ns"] - summary["run"]["start_ns"]) / 1e9
    for f in findings:
        if f["saving_s_per_step"] is not None:
            assert f["saving_s_per_step"] <= mean_step_s * (1 + 1e-9), f
        if f["saving_s_total"] is not None:
            assert f["saving_s_total"] <= duration_s * (1 + 1e-9), f
