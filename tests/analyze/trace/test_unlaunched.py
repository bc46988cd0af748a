"""GPU work without a launch in the trace, as HTA treats it (issue 41, item 6): an item whose correlation id
names a launch the trace does not hold is dropped by HTA; an item with no correlation arg at all is kept.
``launched_only=True`` reproduces that, and the warning says which is which."""

from __future__ import annotations

from pathlib import Path

from stepscope.analyze.trace.analysis import analyze_trace
from stepscope.analyze.trace.gpuview import gpu_view
from stepscope.traces.kineto import read_trace
from tests.traces.tracebuild import ev, kernel, launch, write


def _trace(tmp_path: Path) -> Path:
    no_corr = ev("kernel", "ampere_sgemm_128x64_tn", 200, 10, pid=0, tid=7, stream=7, device=0)
    return write(tmp_path / "rank0.json", [
        launch(95, 3, 1), kernel("ampere_sgemm_128x64_tn", 100, 10, 1),
        kernel("ampere_sgemm_128x64_tn", 150, 20, 99),  # its launch (correlation 99) is not in the trace
        no_corr])


def test_launched_only_keeps_work_without_a_correlation_arg(tmp_path: Path) -> None:
    table = read_trace(_trace(tmp_path))
    kept = gpu_view(table, launched_only=True)
    assert sorted((kept.ts // 1000).tolist()) == [100, 200]  # µs: the launched one and the one without an id
    assert len(gpu_view(table)) == 3
    warnings = analyze_trace(table).warnings
    line = next(w for w in warnings if "launch" in w and "counted" in w)
    assert line.startswith("1 GPU work items name a launching call") and "HTA drops them" in line, warnings
