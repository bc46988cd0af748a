"""The roofline chart: the built A100 trace of tests/analyze/trace/test_roofline.py (figures derived by hand there)
read back off the SVG through its own tick labels — each point where its TFLOP/s and FLOP/byte put it on the
log-log axes, under the bf16 matrix and FP32 vector roofs — and one line why where the device's peaks are unknown."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from stepscope.analyze.trace.analysis import analyze_trace
from stepscope.report.html.gpu_sections import rank_html
from stepscope.traces.kineto import read_trace
from tests.analyze.trace.test_roofline import A100_40, _roofline_trace


def _svg(html: str, rank: int = 0) -> str:
    start = html.index(f'<svg id="roofline-chart-r{rank}"')
    return html[start:html.index("</svg>", start)]


def _scale(svg: str, axis: str) -> tuple[float, float]:
    """(a, b) with position = a + b * log10(value), fitted through the axis's first and last tick labels."""
    pos = 1 if axis == "x" else 2  # x: the label's x; y: its baseline (4 below the gridline)
    ticks = [(float(m.group(3)), float(m.group(pos)) - (4 if axis == "y" else 0))
             for m in re.finditer(rf'class="tick-{axis}" x="([\d.]+)" y="([\d.]+)"[^>]*>([^<]+)<', svg)]
    assert len(ticks) >= 2
    (v0, p0), (v1, p1) = ticks[0], ticks[-1]
    b = (p1 - p0) / (math.log10(v1) - math.log10(v0))
    return p0 - b * math.log10(v0), b


def test_points_sit_at_their_figures_under_the_roofs(tmp_path: Path) -> None:
    html = rank_html(analyze_trace(read_trace(_roofline_trace(tmp_path / "t.json", A100_40))))
    svg = _svg(html)
    (ax, bx), (ay, by) = _scale(svg, "x"), _scale(svg, "y")
    points = {m.group(5).split(" ")[0]: (float(m.group(2)), float(m.group(3)), float(m.group(4)))
              for m in re.finditer(r'<circle class="(\w*)" cx="([\d.]+)" cy="([\d.]+)" r="([\d.]+)"><title>'
                                   r"([^<]+?) [\d.]+ TFLOP/s", svg.replace("\n", " "))}
    # aten::cumsum has no model: no point; mm and add as derived in test_roofline
    assert set(points) == {"aten::mm", "aten::add"}
    for name, (tflops, intensity) in {"aten::mm": (137.438953472, 4096 / 3),
                                      "aten::add": (0.1048576, 1 / 12)}.items():
        cx, cy, _ = points[name]
        assert 10 ** ((cx - ax) / bx) == pytest.approx(intensity, rel=0.01)
        assert 10 ** ((cy - ay) / by) == pytest.approx(tflops, rel=0.01)
    # hover: operator, its input dims and dtype
    assert "aten::mm [[4096,4096],[4096,4096]] bf16" in svg.replace(", ", ",")
    # roofs: A100 40GB bf16 matrix 312 and FP32 vector 19.5 TFLOP/s; the memory slope 1.555 TB/s to the ridges
    assert "bf16 matrix 312 TFLOP/s" in svg and "fp32 vector 19.5 TFLOP/s" in svg
    assert "ridge 201 FLOP/byte" in svg and "ridge 12.5 FLOP/byte" in svg
    # the larger GPU time (mm: 1 ms against add's 10 µs) gets the larger point
    assert points["aten::mm"][2] > points["aten::add"][2]
    assert 'class="compute"' in svg and 'class="memory"' in svg


def test_unknown_device_gets_one_line_why(tmp_path: Path) -> None:
    html = rank_html(analyze_trace(read_trace(_roofline_trace(tmp_path / "t.json", {"id": 0, "name": "<b>NPU</b>"}))))
    assert "roofline-chart-r0" not in html
    assert "No roofline chart: the device (&lt;b&gt;NPU&lt;/b&gt;) has no known peaks" in html
