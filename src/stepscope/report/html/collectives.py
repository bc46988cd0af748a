"""The run report's collectives across ranks (analyze/trace/collectives.py's ``CollectiveSet``): per collective
type and message-size bucket the arrival skew, transfer time, algorithm and bus bandwidth; per rank how often it
arrived last and how long its kernels waited for the last arrival. Renders only: the set comes computed once
per report (RunAnalysis.trace_set), never per rank while rendering."""

from __future__ import annotations

from stepscope.analyze.trace.collectives import CollectiveSet
from stepscope.report import format as f
from stepscope.report.html.page import notice, paragraph
from stepscope.report.html.tables import Col, table

NO_SKEW = "clocks not aligned: no skew"
"""What the section says (with collectives.py's note) when the ranks' clocks disagree."""


def size_label(lo: int) -> str:
    """A message-size bucket [lo, 2 lo) in the report's byte units ("not recorded" for lo 0)."""
    return "not recorded" if lo <= 0 else f"{f.nbytes(lo)} – {f.nbytes(2 * lo)}"


def last_line(cs: CollectiveSet) -> str:
    """Which rank arrived last most often, in words (or why none is named)."""
    if cs.clocks_aligned is False:
        return NO_SKEW
    if cs.last_rank is None:
        return "no rank arrived last by more than the clock tolerance: the ranks reach their collectives together"
    return (f"rank {cs.last_rank} arrived last most often: {cs.last_count:,} of {len(cs.instances):,} "
            "collectives (the others waited for it)")


def collectives_html(cs: CollectiveSet) -> str:
    """The section's body: the last-arriving rank, notes, the type x size table and the per-rank table."""
    parts = [notice(NO_SKEW + " — " + cs.notes[0], "warn") if cs.clocks_aligned is False else ""]
    parts.append(paragraph(f"{len(cs.instances):,} collectives matched across ranks "
                           f"{', '.join(map(str, cs.ranks))}; {last_line(cs)}.", ""))
    parts += [paragraph("note: " + n) for n in cs.notes if cs.clocks_aligned is not False or n != cs.notes[0]]
    if not cs.instances:
        return "".join(parts)
    size_cols = [Col("kind", "collective", "text"), Col("size", "message size", "text"), Col("count", "count", "count"),
                 Col("skew", "skew (median)", "ns", hint="last arrival − first arrival"),
                 Col("transfer", "transfer (median)", "ns", hint="the last-arriving rank's kernel"),
                 Col("algbw", "algbw (median)", "GB/s", hint="message size / transfer"),
                 Col("busbw", "busbw (median)", "GB/s", hint="algbw × NCCL's bus factor of the type")]
    size_rows = [{"kind": b.kind, "size": size_label(b.bytes_lo), "count": b.count, "skew": b.skew_median_ns,
                  "transfer": b.transfer_median_ns, "algbw": b.algbw_median_gbps, "busbw": b.busbw_median_gbps}
                 for b in cs.by_size]
    parts.append(table(size_cols, size_rows, table_id="collectives-sizes",
                       caption="per collective type and message size (NCCL-tests' convention; buckets of a factor "
                               "2); medians over the instances"))
    rank_cols = [Col("rank", "rank"), Col("instances", "collectives", "count"),
                 Col("last", "arrived last", "count", hint="skew above the clock tolerance"),
                 Col("wait", "waited for the last (sum)", "ns"), Col("median", "waited (median)", "ns")]
    rank_rows = [{"rank": r.rank, "instances": r.instances, "last": r.last, "wait": r.wait_ns,
                  "median": r.wait_median_ns} for r in cs.per_rank]
    parts.append(table(rank_cols, rank_rows, table_id="collectives-ranks",
                       caption="each rank's kernels start at its arrival and wait there for the last rank"))
    return "".join(parts)
