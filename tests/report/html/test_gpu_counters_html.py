"""The run report's launch-queue and memory charts, bandwidth, kernel-sequence and annotation tables per rank:
present where the trace allows them, their figures the analysis' own, step functions drawn as steps."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from stepscope.analyze.trace.analysis import analyze_trace
from stepscope.report.format import duration_ns
from stepscope.report.html.gpu_sections import rank_html
from stepscope.traces.kineto import read_trace
from tests.analyze.trace.test_counters_handbuilt import memory_trace
from tests.conftest import PY, SCRIPTS, Result
from tests.traces.tracebuild import PROFILER_SPAN, fixture_files, write


def _spec(html: str, chart_id: str) -> dict[str, Any]:
    m = re.search(rf'id="{re.escape(chart_id)}"><figcaption>[^<]*</figcaption><script type="application/json" '
                  r'class="ss-spec">(.*?)</script>', html)
    assert m, chart_id
    spec: dict[str, Any] = json.loads(m.group(1))
    return spec


def test_v100_queue_bandwidth_sequences_annotations() -> None:
    path = next(p for p in fixture_files() if p.parent.name == "v100_1rank")
    a = analyze_trace(read_trace(path))
    html = rank_html(a)
    assert a.queues is not None and a.bandwidth is not None and a.annotations is not None
    for title in ("Launch queue length", "Copy bandwidth over time", "Frequent kernel sequences", "Time by annotation"):
        assert f"<h3>{title}</h3>" in html
    assert "<h3>Memory over time</h3>" not in html  # recorded without profile_memory
    (s7,) = a.queues.streams
    series = _spec(html, "queue-r0")["series"][0]
    assert max(series["y"]) == s7.max == 1022  # the peak survives decimation
    x, y = series["x"], series["y"]
    # drawn as steps: before each change the old value holds until just before it
    assert all(x[i] < x[i + 1] for i in range(len(x) - 1))
    assert all(y[i + 1] == y[i] and x[i + 2] - x[i + 1] < 0.01 for i in range(0, len(x) - 2, 2))
    bw = _spec(html, "bandwidth-r0")["series"]
    assert sorted(s["label"] for s in bw) == sorted(k.kind for k in a.bandwidth.kinds)
    top = a.annotations.rows[0]
    assert 'id="annotations-r0"' in html and top.name == "DistributedDataParallel.forward"
    assert f'<td data-v="{float(top.total_ns)}">{duration_ns(top.total_ns)}</td>' in html


def test_full_queue_notice(tmp_path: Path) -> None:
    """1,030 launches at 0..1.029 µs·1000 whose kernels start from 2,000 µs on: the queue holds 1,024 or more from
    the 1,024th launch (1,023 µs) until the 7th kernel starts (2,006 µs): 983 µs full, said in a notice."""
    from tests.traces.tracebuild import kernel, launch

    events = [PROFILER_SPAN]
    for i in range(1030):
        events += [launch(float(i), 0.5, i + 1), kernel("k", 2000.0 + i, 1, i + 1)]
    a = analyze_trace(read_trace(write(tmp_path / "rank0.json", events)))
    assert a.queues is not None and a.queues.streams[0].full_ns == 983_000
    assert "launch queue was full (≥ 1024 pending) for 983.0 µs: the host waited" in rank_html(a)


def test_memory_chart_and_peak_sentence(tmp_path: Path) -> None:
    a = analyze_trace(read_trace(write(tmp_path / "rank0.json", [PROFILER_SPAN, *memory_trace()])))
    html = rank_html(a)
    spec = _spec(html, "memory-r0-cpu")
    assert max(spec["series"][0]["y"]) == 7596
    assert ("cpu: peak 7,596 B allocated (0 B reserved), in aten::relu (annotation ## fwd ##); 4,096 B were "
            "allocated before the trace began.") in html
    assert 'id="memory-live-r0-cpu"' in html
    assert "<h3>Launch queue length</h3>" not in html  # no GPU work: no queue section


def test_profiled_run_with_memory_records_reports_memory(cli: Callable[..., Result], tmp_path: Path) -> None:
    """`stepscope run --profile-steps 3 --profile-memory` of a real CPU training script: the window's trace holds
    allocation records, and the run report draws memory over time with the peak's owner; the annotation table
    has no GPU column (no GPU work: not measurable, not zero)."""
    res = cli("run", "--quiet", "--profile-steps", "3", "--profile-memory", "--", PY,
              str(SCRIPTS / "tiny_train.py"), "--steps", "20")
    assert res.rc == 0, res
    res = cli("report", "latest", "-o", str(tmp_path / "r.html"))
    assert res.rc == 0, res
    html = (tmp_path / "r.html").read_text()
    spec = _spec(html, "memory-r0-cpu")
    peak = max(spec["series"][0]["y"])
    m = re.search(r"cpu: peak ([\d,]+) B allocated \(0 B reserved\), in (aten::\w+)", html)
    assert m and int(m.group(1).replace(",", "")) == peak > 0
    ann = html[html.index('id="annotations-r0"'):]
    ann = ann[:ann.index("</table>")]
    assert "ProfilerStep#" in ann and "GPU work" not in ann
    assert "host ranges (the trace has no launched GPU work)" in html
