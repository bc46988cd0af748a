"""The run report's roofline table: operators by unique arguments against the device's peaks (renders only)."""

from __future__ import annotations

from stepscope.analyze.trace.roofline import Roofline
from stepscope.report import format as f
from stepscope.report.html.escape import esc
from stepscope.report.html.names import short_names
from stepscope.report.html.tables import Col, table

MAX_ROOFLINE_ROWS = 100


def _peaks(r: Roofline) -> str:
    """The peaks used, as HTML (every value escaped)."""
    if r.peaks is None:
        return (f"The device ({esc(r.device or 'not recorded')}) is not in the peak table: achieved figures are "
                "shown, shares of peak and bounds are not.")
    p, per = r.peaks, r.peaks.devices_per_card
    matrix = ", ".join(f"{esc(k)} {v / per:g}" for k, v in p.matrix_tflops.items())
    return (f"Peaks of {esc(r.device or '')} ({esc(p.label)}): matrix TFLOP/s {matrix}; vector fp32 "
            f"{p.vector_fp32_tflops / per:g} TFLOP/s; memory {r.memory_tbps:g} TB/s ({esc(r.memory_source or '')}); "
            f'<a href="{esc(p.source)}">data sheet</a>.')


def roofline_html(r: Roofline, rank: int) -> str:
    """Largest GPU time first; shapes without a model listed with why."""
    ops = r.ops[:MAX_ROOFLINE_ROWS]
    shorts = short_names([o.name for o in ops])
    cols = [Col("name", "operator", "text", title_key="full"), Col("dims", "input dims", "text"),
            Col("dtype", "dtype", "text"), Col("calls", "calls", "count"), Col("gpu", "GPU time", "ns"),
            Col("tflops", "TFLOP/s"), Col("tbps", "TB/s"), Col("intensity", "FLOP/byte"),
            Col("compute", "% of compute peak", "%"), Col("memory", "% of memory peak", "%"),
            Col("bound", "bound", "text")]
    rows = [{"name": shorts[i], "full": o.name, "dims": o.input_dims, "dtype": o.precision or f.DASH,
             "calls": o.calls, "gpu": o.gpu_ns, "tflops": o.tflops, "tbps": o.tbps, "intensity": o.intensity,
             "compute": o.compute_pct, "memory": o.memory_pct,
             "bound": o.bound or (f"no model: {o.why}" if o.why else f.DASH)} for i, o in enumerate(ops)]
    share = f" ({100.0 * r.modeled_gpu_ns / r.gpu_ns:.1f}%)" if r.gpu_ns else ""
    more = len(r.ops) - len(ops)
    caption = (f"modelled: {f.duration_ns(r.modeled_gpu_ns)} of {f.duration_ns(r.gpu_ns)} of operators' kernel "
               f"time{share}; bytes are compulsory traffic, so TB/s is a lower bound"
               + (f"; {more} smaller groups not listed" if more else ""))
    return table(cols, rows, table_id=f"roofline-r{rank}", caption=caption) + f'<p class="ss-note">{_peaks(r)}</p>'
