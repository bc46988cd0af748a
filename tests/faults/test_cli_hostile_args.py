"""Issue 19, items 10 and 13 (first half): hostile names and arguments end in a result or one line. A run with a
300-character region and metric name builds its dashboard; `history --since 99999999d` means every run;
`diff --width 0` is refused; `import` refuses ranks outside 0..999,999, given or read from the trace."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from tests.conftest import TRACES
from tests.faults.store_kit import cli, make_runs, one_line_error

LONG = "r" * 300
SCRIPT = f"""
import time
import stepscope

for i in stepscope.steps(range(6)):
    with stepscope.region({LONG!r}):
        time.sleep(0.01)
    stepscope.log(**{{{("m" * 300)!r}: float(i)}})
"""


@pytest.mark.slow
def test_dashboard_with_300_character_region_and_metric_names(tmp_path: Path) -> None:
    store = tmp_path / "store"
    script = tmp_path / "long_names.py"
    script.write_text(SCRIPT)
    for _ in range(2):
        p = cli("run", "--quiet", "--store", str(store), "--", sys.executable, str(script), cwd=tmp_path)
        assert p.returncode == 0, p
    metrics = json.loads(cli("ls", "--json", store=store).stdout)[0]["metrics"]
    long_names = [m for m in metrics if LONG in m or "m" * 300 in m]
    assert len(long_names) >= 2, sorted(metrics)
    site = tmp_path / "site"
    p = cli("dashboard", "build", "-o", str(site), store=store)
    assert p.returncode == 0, p
    pages = [f.name for f in (site / "history").iterdir()]
    assert all(len(n.encode()) <= 255 for n in pages)
    index = (site / "index.html").read_text()
    linked = set(re.findall(r'href="history/([^"]+)"', index))
    assert linked and all((site / "history" / name).is_file() for name in linked)
    assert any(name.startswith("region.rrrr") or name.startswith("metric.mmmm") for name in linked), linked
    p = cli("history", "--since", "99999999d", "--metric", long_names[0], store=store)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p


def test_history_since_beyond_the_epoch_means_every_run(tmp_path: Path) -> None:
    store = tmp_path / "store"
    make_runs(store, ["a", "a"], metrics={"step_time_median_s": 0.01})
    for since in ("99999999d", "9999999999999w"):
        p = cli("history", "--name", "a", "--since", since, "--metric", "step_time_median_s", store=store)
        assert "Traceback" not in p.stderr, p
        assert p.returncode == 0, p
    assert "--since" in one_line_error(cli("history", "--since", "99999-01-01", store=store))


def test_width_outside_twenty_to_ten_thousand_is_refused(tmp_path: Path) -> None:
    store = tmp_path / "store"
    make_runs(store, ["a", "a"])
    cases = ((["diff", "latest~1", "latest"], "0"), (["show", "latest"], "-3"), (["advise", "latest"], "100000"))
    for cmd, value in cases:
        p = cli(*cmd, "--width", value, store=store)
        assert p.returncode == 2 and "Traceback" not in p.stderr and "--width" in p.stderr, p
        assert p.stdout == ""


def _trace_with_rank(tmp_path: Path, rank: object, name: str = "t.json") -> Path:
    doc = json.loads(gzip.decompress((TRACES / "cpu_only" / "rank34.json.gz").read_bytes()))
    doc["distributedInfo"] = {"rank": rank, "world_size": 2}
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def test_import_refuses_ranks_outside_the_job(tmp_path: Path) -> None:
    store = tmp_path / "store"
    (run_id,) = make_runs(store, ["imp"])
    plain = tmp_path / "plain.json.gz"
    shutil.copy(TRACES / "cpu_only" / "rank34.json.gz", plain)
    for bad in ("-5", "1000000000000"):
        line = one_line_error(cli("import", run_id, str(plain), "--rank", bad, store=store))
        assert "--rank" in line and bad in line, line
    for bad_rank in (-5, 10**12):
        line = one_line_error(cli("import", run_id, str(_trace_with_rank(tmp_path, bad_rank)), store=store))
        assert f"rank {bad_rank}" in line and "--rank" in line, line
    traces = store / "runs" / run_id / "artifacts" / "traces"
    assert not traces.exists() or not os.listdir(traces)
    p = cli("import", run_id, str(_trace_with_rank(tmp_path, -5)), "--rank", "3", "--accept-misfit", store=store)
    assert p.returncode == 0, p
    assert sorted(os.listdir(traces)) == ["rank3.json.gz", "rank3.misfit.txt"]  # rank 3 of a 1-rank run: noted
    two = [str(plain), str(_trace_with_rank(tmp_path, 1, "u.json"))]
    assert "one trace" in one_line_error(cli("import", run_id, *two, "--rank", "4", store=store))
