"""Terminal rendering of FLOPs per step, achieved FLOP/s and MFU (numbers from analyze/run/flops.py)."""

from __future__ import annotations

from rich.console import RenderableType

from stepscope.analyze.run.flops import FlopsSummary
from stepscope.report import format as f
from stepscope.report.tables import FitTable


def flops_value(v: float | None, unit: str = "FLOP") -> str:
    """1.23 TFLOP, 456 GFLOP/s, ... (SI prefixes, 3 significant digits)."""
    if v is None:
        return "—"
    for scale, prefix in ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= scale:
            return f"{v / scale:.3g} {prefix}{unit}"
    return f"{v:.3g} {unit}"


def flops_table(fl: FlopsSummary | None) -> RenderableType | None:
    if fl is None:
        return None
    t = FitTable(title="FLOPs", title_justify="left", title_style="bold", show_edge=False, pad_edge=False)
    t.add_column("")
    t.add_column("value", justify="right")
    how = "given (--flops-per-step)" if fl.source == "given" else f"counted on step {fl.measured_step}"
    partial = ""
    if fl.uncounted:
        kinds = ", ".join(sorted(set(fl.uncounted)))
        partial = f"partial: {len(fl.uncounted)} layers not counted ({kinds})"
        how += f"; {partial}"
    t.add_row("FLOPs per step", f"{flops_value(fl.flops_per_step)} ({how})")
    if fl.rnn_flops:
        t.add_row("of which recurrent layers", f"{flops_value(fl.rnn_flops)} (by formula: PyTorch counts none)")
    if fl.precision:
        t.add_row("precision of the matmuls", fl.precision)
    ranks = f" ({fl.ranks} ranks)" if fl.ranks > 1 else ""
    low = f" — at least ({partial})" if partial else ""
    t.add_row("achieved" + ranks, flops_value(fl.achieved_flops, "FLOP/s") + low)
    if fl.mfu is not None:
        t.add_row("MFU", f"{f.share(fl.mfu)} of {flops_value(fl.peak_flops, 'FLOP/s')} ({fl.peak_source}){low}")
    else:
        t.add_row("MFU", "— (no known peak: give --peak-flops)")
    if fl.measure_cost_ns is not None:
        t.caption = f"counting cost: +{f.duration_ns(fl.measure_cost_ns)} once, on step {fl.measured_step} " \
                    "(left out of the step statistics)"
    elif fl.source == "measured" and fl.measured_step is not None:
        t.caption = f"counting cost: not resolved (step {fl.measured_step}, counted, was no slower than the " \
                    "slowest measured step; left out of the step statistics)"
    return t
