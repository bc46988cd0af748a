"""The HTML base: escaping, safe embedded JSON, plots and tables as HTML (drawing is tested in Chromium)."""

from __future__ import annotations

import json
import math
import re

from stepscope.report.html import Col, Section, esc, json_for_script, json_script, render_page, table, tiles
from stepscope.report.html.charts import Axis, Band, Bars, Series, bar_chart, heat_map, xy_chart

HOSTILE = "<script>alert(1)</script>&\u2028\u2029'\""


def test_esc_escapes_markup_and_quotes() -> None:
    assert esc(HOSTILE).startswith("&lt;script&gt;alert(1)&lt;/script&gt;&amp;")
    assert "&#x27;" in esc("'") and "&quot;" in esc('"')
    assert esc(None) == ""


def test_json_for_script_cannot_close_the_script_and_round_trips() -> None:
    data = {"b": HOSTILE, "a": [1.5, math.nan, math.inf], "c": "<!-- x -->"}
    text = json_for_script(data)
    for bad in ("<", ">", "&", "\u2028", "\u2029"):
        assert bad not in text
    assert text.index('"a"') < text.index('"b"') < text.index('"c"')  # sorted keys
    back = json.loads(text)
    assert back == {"a": [1.5, None, None], "b": HOSTILE, "c": "<!-- x -->"}


def test_page_escapes_title_and_keeps_one_script_pair_per_block() -> None:
    body = xy_chart(HOSTILE, [0, 1], [Series(HOSTILE, [1.0, 2.0])], x_axis=Axis("step"), y_axis=Axis("t", "ns"))
    page = render_page(HOSTILE, [Section("s", HOSTILE, body + tiles([(HOSTILE, HOSTILE, HOSTILE)]), note=HOSTILE)],
                       subtitle=HOSTILE, badge="failed")
    assert "<script>alert(1)" not in page
    # the only script elements: one JSON spec and the inlined renderer
    assert len(re.findall(r"<script\b", page)) == 2 == len(re.findall(r"</script>", page))
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in page
    assert "default-src 'none'" in page


def test_plot_specs_embed_the_data() -> None:
    html = xy_chart("t", [0, 1, 2], [Series("a", [1, None, 3])], x_axis=Axis("step"), y_axis=Axis("time", "ns"),
                    stacked=True, shades=[Band(0, 1, "warm-up")])
    spec = json.loads(re.search(r'class="ss-spec">(.*?)</script>', html).group(1))  # type: ignore[union-attr]
    assert spec["kind"] == "xy" and spec["series"][0]["y"] == [1, None, 3] and spec["stacked"] is True
    assert spec["shades"] == [{"color": None, "label": "warm-up", "x0": 0, "x1": 1}]
    bar = bar_chart("b", ["k"], [Bars("s", [2.0])], axis=Axis("time", "ns"))
    assert '"kind":"bars"' in bar
    hm = heat_map("h", ["0"], ["0"], [[math.nan]], x_title="r", y_title="r")
    assert '"values":[[null]]' in hm


def test_table_sort_values_formatting_and_tree() -> None:
    cols = [Col("name", "name", "text"), Col("t", "time", "ns"), Col("s", "share", "share")]
    rows = [{"name": "a", "t": 2.5e6, "s": 0.5, "_id": "a", "_depth": 0},
            {"name": HOSTILE, "t": None, "s": 0.25, "_id": "a/x", "_depth": 1}]
    html = table(cols, rows, tree=True)
    assert 'data-v="2500000.0"' in html and "2.50 ms" in html and "50.0%" in html
    assert "&lt;script&gt;" in html and "<script>" not in html
    assert html.count('class="ss-toggle" type="button"') == 1  # only the parent has a toggle
    assert 'data-parent="a"' in html
    assert table(cols, rows) == table(cols, rows)  # deterministic ids
    assert "ss-filter" in table(cols, rows * 10)


def test_json_script_element() -> None:
    out = json_script({"x": "</script>"}, element_id="d")
    assert out.startswith('<script type="application/json" id="d">') and out.count("</script>") == 1
