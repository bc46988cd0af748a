"""Rich renderables of the roofline per operator and of the collectives across ranks (figures come computed)."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text

from stepscope.analyze.trace.collectives import CollectiveSet
from stepscope.analyze.trace.roofline import Roofline
from stepscope.report.format import DASH, duration_ns, nbytes
from stepscope.report.trace_terminal import Col, NumericTable

ROOFLINE_TOP = 20
"""Rows of the roofline table in ``trace analyze`` (``--all``: every row)."""


def _num(v: float | None, digits: int = 3) -> str:
    return DASH if v is None else f"{v:.{digits}g}"


def _pct(v: float | None) -> str:
    return DASH if v is None else f"{v:.1f}%"


def _peaks_line(r: Roofline) -> str:
    if r.peaks is None:
        return f"device {r.device or 'not recorded'}: not in the peak table, so no share of peak and no bound"
    p = r.peaks
    per = p.devices_per_card
    matrix = ", ".join(f"{k} {v / per:g}" for k, v in p.matrix_tflops.items())
    return (f"peaks of {r.device} ({p.label}): matrix TFLOP/s {matrix}; vector fp32 {p.vector_fp32_tflops / per:g} "
            f"TFLOP/s; memory {r.memory_tbps:g} TB/s ({r.memory_source}); source {p.source}")


def roofline_view(r: Roofline, *, rank: int, top: int | None = ROOFLINE_TOP) -> RenderableType:
    """Operators by unique arguments, largest GPU time first (``top`` None: all)."""
    cols = [Col("operator", numeric=False), Col("input dims", numeric=False, drop=6), Col("dtype", drop=5),
            Col("calls", drop=4), Col("GPU time"), Col("TFLOP/s"), Col("TB/s"), Col("FLOP/B", drop=3),
            Col("% compute"), Col("% memory"), Col("bound", numeric=False), Col("why no model", numeric=False, drop=7)]
    rows = r.ops if top is None else r.ops[:top]
    body: list[list[str | Text]] = [
        [Text(o.name), Text(o.input_dims), o.precision or DASH, f"{o.calls:,}", duration_ns(o.gpu_ns),
         _num(o.tflops), _num(o.tbps), _num(o.intensity), _pct(o.compute_pct), _pct(o.memory_pct),
         o.bound or ("no model" if o.no_model else DASH), Text(o.why or "")] for o in rows]
    share = 100.0 * r.modeled_gpu_ns / r.gpu_ns if r.gpu_ns else None
    title = f"rank {rank}: operators on the roofline ({len(rows)} of {len(r.ops)} by GPU time)"
    notes = [Text(f"modelled: {duration_ns(r.modeled_gpu_ns)} of {duration_ns(r.gpu_ns)} of operators' kernel time "
                  f"({_pct(share)}); bytes are compulsory traffic, so TB/s is a lower bound", style="dim"),
             Text(_peaks_line(r), style="dim")]
    if r.peaks and any(o.precision == "fp32" and o.family in ("gemm", "convolution", "attention")
                       and (o.compute_pct or 0) > 100 for o in r.ops):
        notes.append(Text("fp32 matrix work above 100% of the fp32 peak ran as TF32 on the tensor cores "
                          f"(tf32 peak {r.peaks.matrix_tflops.get('tf32', DASH)} TFLOP/s)", style="dim"))
    return Group(NumericTable(title, cols, body), *notes)


def collectives_view(s: CollectiveSet, *, top: int | None = ROOFLINE_TOP) -> RenderableType:
    """Collectives across ranks: by type and message size, per rank, and the rank arriving last most often."""
    parts: list[RenderableType] = []
    if s.instances:
        cols = [Col("collective", numeric=False), Col("size ≥"), Col("count"), Col("skew (median)"),
                Col("transfer (median)"), Col("algbw GB/s"), Col("busbw GB/s")]
        buckets = s.by_size if top is None else s.by_size[:top]
        body: list[list[str | Text]] = [
            [b.kind, nbytes(b.bytes_lo) if b.bytes_lo else "not recorded", f"{b.count:,}",
             duration_ns(b.skew_median_ns), duration_ns(b.transfer_median_ns), _num(b.algbw_median_gbps),
             _num(b.busbw_median_gbps)] for b in buckets]
        parts.append(NumericTable(f"collectives across ranks {', '.join(map(str, s.ranks))} "
                                  f"({len(s.instances)} instances) by message size", cols, body))
        rcols = [Col("rank"), Col("collectives"), Col("arrived last"), Col("waited (sum)"), Col("waited (median)")]
        ranks = list(s.per_rank)
        title = "arrivals per rank (waited: for the last rank to arrive)"
        if top is not None and len(ranks) > top:  # many ranks: those arriving last most often
            ranks = sorted(ranks, key=lambda r: (-r.last, -(r.wait_ns or 0), r.rank))[:top]
            title = f"arrivals: the {top} of {len(s.per_rank)} ranks arriving last most often"
        rbody: list[list[str | Text]] = [[str(r.rank), f"{r.instances:,}", f"{r.last:,}", duration_ns(r.wait_ns),
                                          duration_ns(r.wait_median_ns)] for r in ranks]
        parts.append(NumericTable(title, rcols, rbody))
    if s.last_rank is not None:
        parts.append(Text(f"rank {s.last_rank} arrived last most often: {s.last_count} of {len(s.instances)} "
                          "collectives"))
    parts += [Text(f"note: {n}", style="yellow") for n in s.notes]
    return Group(*parts)
