"""What a rank's timeline embeds (report/html/timeline.py): the levels within the byte budget, the critical
path's drawn events (each inside an embedded item of its row), start times that decode to the events'."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from stepscope.analyze.trace.critical_path import critical_path
from stepscope.analyze.trace.timeline import timeline_rows
from stepscope.report.html.escape import json_for_script
from stepscope.report.html.timeline import MAX_CRITICAL_ITEMS, timeline_html, timeline_spec
from stepscope.traces.kineto import read_trace
from tests.conftest import TRACES


def _decode(lv: dict[str, Any], q: int) -> list[tuple[int, int, int]]:
    """(row, start ns, duration ns) of a level's exact items, deltas undone."""
    out = []
    for r in range(len(lv["xAt"]) - 1):
        acc = 0
        for i in range(lv["xAt"][r], lv["xAt"][r + 1]):
            acc += lv["xs"][i]
            out.append((r, acc * q, lv["xd"][i]))
    return out


@pytest.mark.parametrize("budget", [150_000, 400_000, 10**8])
def test_levels_fit_the_budget_coarsest_first(budget: int) -> None:
    t = read_trace(TRACES / "v100_1rank" / "rank0.json.gz")
    tl = timeline_rows(t)
    spec = timeline_spec(tl, t, budget=budget)
    assert spec is not None
    cols = [lv["cols"] for lv in spec["levels"]]
    assert cols == [2000, 32000, 0][:len(cols)]
    assert len(json_for_script(spec)) <= budget
    if budget == 10**8:
        assert cols == [2000, 32000, 0] and spec["complete"]
        exact = _decode(spec["levels"][-1], spec["q"])
        assert len(exact) == tl.events.ts.size
        # the exact level's starts decode to the events' starts within one unit q
        want = sorted(zip(tl.events.row.tolist(), (tl.events.ts - tl.start_ns).tolist(), strict=True))
        got = sorted((r, s) for r, s, _ in exact)
        assert all(g[0] == w[0] and 0 <= w[1] - g[1] < spec["q"] for g, w in zip(got, want, strict=True))
    else:
        assert not spec["complete"]


def test_a_small_share_gets_a_coarser_overview_or_none() -> None:
    t = read_trace(TRACES / "v100_1rank" / "rank0.json.gz")
    tl = timeline_rows(t)
    full = timeline_spec(tl, t, budget=10**8)
    assert full is not None
    one = len(json_for_script({**full, "levels": full["levels"][:1]}))
    coarse = timeline_spec(tl, t, budget=one - 1)  # the 2,000-column overview does not fit: 1,000 or 500 do
    assert coarse is not None and [lv["cols"] for lv in coarse["levels"]] in ([1000], [500])
    assert len(json_for_script(coarse)) < one
    assert timeline_spec(tl, t, budget=2_000) is None
    assert "Timeline left out" in timeline_html(t, budget=2_000)


def test_critical_path_items_cover_the_path_s_drawn_events() -> None:
    t = read_trace(TRACES / "v100_1rank" / "rank0.json.gz")
    tl = timeline_rows(t)
    cp = critical_path(t)
    assert cp is not None
    rows = cp.event_rows.tolist()
    spec = timeline_spec(tl, t, budget=400_000, critical=rows)
    assert spec is not None
    c = spec["critical"]
    drawn = np.isin(tl.events.event, rows)
    assert c["events"] == int(drawn.sum()) > 0
    assert len(c["row"]) <= MAX_CRITICAL_ITEMS
    q = spec["q"]
    items: dict[int, list[tuple[int, int]]] = {}
    for r, s, d in zip(c["row"], c["s"], c["d"], strict=True):
        items.setdefault(r, []).append((s * q, s * q + d + q))
    for r, s, e in zip(tl.events.row[drawn].tolist(), (tl.events.ts[drawn] - tl.start_ns).tolist(),
                       (tl.events.end[drawn] - tl.start_ns).tolist(), strict=True):
        assert any(a <= s and e <= b for a, b in items[r]), (r, s, e)


def test_figure_embeds_safe_json_with_escaped_names() -> None:
    t = read_trace(TRACES / "a100_alexnet" / "rank0.json.gz")
    html = timeline_html(t, budget=400_000)
    body = html.split('class="ss-tl-data">', 1)[1].split("</script>", 1)[0]
    spec = json.loads(body)
    assert "<" not in body and spec["complete"]
    assert any("sgemm" in n or "gemm" in n.lower() for n in spec["names"])
