"""Communication matrix section of the HTML report: heat maps of bytes and time (analyze/commmatrix.py)
and the busiest pairs. Call ``comm_matrix_section(matrix)``; None when there is no matrix."""

from __future__ import annotations

from stepscope.analyze.commmatrix import CommMatrix
from stepscope.report.html import Section
from stepscope.report.html.plots import heatmap
from stepscope.report.html.tables import Col, table


def comm_matrix_section(m: CommMatrix | None) -> Section | None:
    if m is None:
        return None
    labels = [str(r) for r in m.ranks]
    body = heatmap("Bytes, row sends to column", labels, labels, [list(r) for r in m.bytes], xlabel="to rank",
                   ylabel="from rank", unit="bytes")
    body += heatmap("Time in calls, row's time with column", labels, labels,
                    [[v / 1e9 for v in r] for r in m.time_ns], xlabel="peer rank", ylabel="rank", unit="s")
    rows = [{"pair": f"{p.src} → {p.dst}", "bytes": p.bytes, "p2p": p.p2p_bytes, "coll": p.collective_bytes,
             "time": p.time_ns, "calls": p.calls} for p in m.busiest]
    body += table([Col("pair", "pair", "text"), Col("bytes", "bytes", "bytes"), Col("p2p", "point-to-point", "bytes"),
                   Col("coll", "collective", "bytes"), Col("time", "time", "ns"), Col("calls", "calls", "count")],
                  rows, table_id="comm-busiest", caption="Busiest pairs")
    return Section("comm-matrix", "Communication matrix", body, note=f"Convention: {m.convention}.")
