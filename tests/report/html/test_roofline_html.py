"""The run report's GPU section shows the roofline table of a rank, with the peaks' data sheet, escaped."""

from __future__ import annotations

from pathlib import Path

from stepscope.analyze.trace.analysis import analyze_trace
from stepscope.report.html.gpu_sections import rank_html
from stepscope.traces.kineto import read_trace
from tests.analyze.trace.test_roofline import A100_40, _roofline_trace


def test_rank_section_has_the_roofline(tmp_path: Path) -> None:
    a = analyze_trace(read_trace(_roofline_trace(tmp_path / "t.json", A100_40)))
    html = rank_html(a)
    assert "Operators on the roofline" in html and 'id="roofline-r0"' in html
    table = html[html.index('id="roofline-r0"'):]
    # aten::mm: 137.44 TFLOP/s, 44.1% of the 312 bf16 peak, compute-bound (derived in test_roofline)
    assert "aten::mm" in table and "137" in table and "44.1%" in table and "compute" in table
    assert "no model: operator not modelled" in table
    assert 'href="https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/' in table


def test_device_name_is_escaped(tmp_path: Path) -> None:
    dev = {"id": 0, "name": "<b>NPU</b>"}
    html = rank_html(analyze_trace(read_trace(_roofline_trace(tmp_path / "t.json", dev))))
    assert "&lt;b&gt;NPU&lt;/b&gt;" in html and "<b>NPU</b>" not in html
    assert "not in the peak table" in html
