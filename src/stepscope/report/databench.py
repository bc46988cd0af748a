"""Terminal rendering of data-pipeline benchmarks (analyze/run/databench.py results)."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text

from stepscope.analyze.run.databench import DataBenchResult, InputVerdict, LoaderBench, PhaseThroughput, WorkerSweep
from stepscope.report import format as f
from stepscope.report.tables import FitTable


def _table(title: str, *cols: str) -> FitTable:
    t = FitTable(title=title, title_justify="left", title_style="bold", show_edge=False, pad_edge=False)
    for i, c in enumerate(cols):
        t.add_column(c, justify="left" if i == 0 else "right", no_wrap=i != 0)
    return t


def _eff(v: float | None) -> str:
    return f.share(v)


def _config(lb: LoaderBench) -> str:
    c = lb.config
    parts = [f"workers {c.get('num_workers')}" + (" (override)" if lb.workers_override else ""),
             f"batch size {c.get('batch_size')}", f"pin memory {c.get('pin_memory')}",
             f"prefetch factor {c.get('prefetch_factor')}", f"persistent workers {c.get('persistent_workers')}",
             f"dataset {c.get('dataset')}" + (f" ({c['dataset_len']:,} samples)" if c.get("dataset_len") else "")]
    return ", ".join(parts)


def _phase_rows(t: FitTable, p: PhaseThroughput | None, label: str) -> None:
    if p is None:
        return
    t.add_row(f"{label} ({p.epochs} epoch{'s' if p.epochs != 1 else ''})", f.rate(p.local_samples_per_s, "samples"),
              f.rate(p.local_ideal, "samples"), _eff(p.local_efficiency), f.rate(p.total_samples_per_s, "samples"),
              f.rate(p.total_ideal, "samples"), _eff(p.total_efficiency), f.rate(p.total_batches_per_s, "batches"))


def loader_view(lb: LoaderBench, ranks: int) -> RenderableType:
    head = Text(f"DataLoader {lb.loader_index}" + (" (iterated first)" if lb.loader_index == 0 else ""), style="bold")
    head.append(f"\n{_config(lb)}", style="dim")
    t = _table("Throughput (local = per rank; total = all ranks over the global epoch time)", "",
               "local", "local ideal", "local eff.", "total", "total ideal", "total eff.", "batches")
    _phase_rows(t, lb.first, "first epoch")
    _phase_rows(t, lb.later, "later epochs")
    e = _table("Per epoch", "epoch", "samples", "batches", "time", "first batch", "local", "total", "batch p50",
               "stopped")
    for ep in lb.epochs:
        per = [r for r in lb.per_rank if r.epoch == ep.epoch]
        p50 = max((r.batch_p50_ns for r in per if r.batch_p50_ns is not None), default=None)
        stops = ", ".join(sorted({r.stopped for r in per}))
        e.add_row(str(ep.epoch), f.number(ep.samples), f"{ep.batches:,}", f.duration_ns(ep.global_time_ns),
                  f.duration_ns(ep.first_batch_ns), f.rate(ep.local_samples_per_s, "samples"),
                  f.rate(ep.total_samples_per_s, "samples"), f.duration_ns(p50), stops)
    parts: list[RenderableType] = [head, t, e]
    if ranks > 1:
        r = _table("Per rank", "rank", "epoch", "samples/s", "batches/s", "first batch", "time")
        for x in lb.per_rank:
            r.add_row(str(x.rank), str(x.epoch), f.rate(x.samples_per_s, "samples"), f.rate(x.batches_per_s, "batches"),
                      f.duration_ns(x.first_batch_ns), f.duration_ns(x.time_ns))
        parts.append(r)
    return Group(*parts)


def bench_view(result: DataBenchResult) -> RenderableType:
    parts: list[RenderableType] = [Text(f"data-bench run {result.run_id}: {result.world_size} rank(s)", style="bold")]
    for lb in result.loaders:
        parts += [Text(""), loader_view(lb, result.world_size)]
    if result.loaders and result.loaders[0].first.local_ideal is None and result.world_size > 1:
        parts.append(Text("ideal and efficiency need a single-rank benchmark of the same script: "
                          "run `stepscope data-bench` with one process first", style="dim"))
    c = result.comparison
    if c is not None:
        bound = "input-bound" if c.verdict == InputVerdict.INPUT_BOUND else "not input-bound"
        parts.append(Text(f"\nthe pipeline can deliver {f.rate(c.pipeline_samples_per_s, 'samples')}; training "
                          f"(run {c.training_run}) used {f.rate(c.training_samples_per_s, 'samples')} "
                          f"({f.share(c.share)}): {bound}", style="bold"))
    for n in result.notes:
        parts.append(Text(f"note: {n}", style="yellow"))
    return Group(*parts)


def sweep_view(sweep: WorkerSweep) -> RenderableType:
    t = _table("Worker sweep (total samples/s of the first loader; later epochs where measured)", "workers",
               "samples/s", "run")
    for w, v, rid in zip(sweep.workers, sweep.samples_per_s, sweep.run_ids, strict=True):
        mark = "  ← best" if w == sweep.best_workers else ""
        t.add_row(str(w), f.rate(v, "samples") + mark, rid)
    lines: list[RenderableType] = [t]
    if sweep.best_workers is not None:
        msg = f"best: {sweep.best_workers} workers"
        if sweep.economical_workers is not None and sweep.economical_workers != sweep.best_workers:
            msg += f"; {sweep.economical_workers} workers deliver 95% of that or more"
        lines.append(Text(msg, style="bold"))
    return Group(*lines)
