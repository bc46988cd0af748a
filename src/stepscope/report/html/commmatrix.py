"""Communication matrix section of the HTML report: heat maps of bytes and time (analyze/ranks/commmatrix.py)
and the busiest pairs. Call ``comm_matrix_section(matrix)``; None when there is no matrix."""

from __future__ import annotations

from stepscope.analyze.ranks.commmatrix import CommMatrix
from stepscope.report.html import Section
from stepscope.report.html.charts import heat_map
from stepscope.report.html.tables import Col, table


def comm_matrix_section(m: CommMatrix | None) -> Section | None:
    if m is None:
        return None
    labels = [str(r) for r in m.ranks]
    body = heat_map("Bytes, row sends to column", labels, labels, [list(r) for r in m.bytes], x_title="to rank",
                    y_title="from rank", unit="bytes", chart_id="plot-comm-bytes")
    body += heat_map("Time in calls, row's time with column", labels, labels, [list(r) for r in m.time_ns],
                     x_title="peer rank", y_title="rank", unit="ns", chart_id="plot-comm-time")
    rows = [{"pair": f"{p.src} → {p.dst}", "bytes": p.bytes, "p2p": p.p2p_bytes, "coll": p.collective_bytes,
             "time": p.time_ns, "calls": p.calls} for p in m.busiest]
    body += table([Col("pair", "pair", "text"), Col("bytes", "bytes", "bytes"), Col("p2p", "point-to-point", "bytes"),
                   Col("coll", "collective", "bytes"), Col("time", "time", "ns"), Col("calls", "calls", "count")],
                  rows, table_id="comm-busiest", caption="Busiest pairs")
    return Section("comm-matrix", "Communication matrix", body, note=f"Convention: {m.convention}.")
