"""HTML sections of issue 9: the flame graph (widths = sample shares, names escaped) and the comm matrix."""

from __future__ import annotations

import json
import re

from stepscope.analyze.ranks.commmatrix import comm_matrix_from_tables
from stepscope.model.tables import CommTable
from stepscope.report.html import render_page
from stepscope.report.html.commmatrix import comm_matrix_section
from stepscope.report.html.flamegraph import flamegraph_html


def test_flame_widths_are_sample_shares_and_names_are_escaped() -> None:
    html = flamegraph_html({"main;<script>alert(1)</script>": 3, "main;b": 1, "main;tiny": 0})
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    widths = {m.group(2): float(m.group(1)) for m in re.finditer(r'width:([\d.]+)%[^>]*>([^<]*)</div>', html)}
    assert widths["main"] == 100.0 and widths["b"] == 25.0 and widths["&lt;script&gt;alert(1)&lt;/script&gt;"] == 75.0
    assert "tiny" not in widths  # below the minimum share


def test_comm_matrix_section_embeds_the_matrix() -> None:
    cols = {"op": ["send"], "step": [0], "start_ns": [0], "duration_ns": [5], "bytes": [1024.0], "peer": [1],
            "group_size": [2], "seq": [0]}
    empty = {k: [] for k in cols}
    m = comm_matrix_from_tables({0: CommTable.from_batches([cols]), 1: CommTable.from_batches([empty])})
    section = comm_matrix_section(m)
    assert section is not None
    page = render_page("t", [section])
    spec = next(json.loads(s) for s in re.findall(r'<script type="application/json"[^>]*>(.*?)</script>', page, re.S)
                if '"heatmap"' in s)
    assert spec["values"] == [[0.0, 1024.0], [0.0, 0.0]]
    assert "0 → 1" in page
