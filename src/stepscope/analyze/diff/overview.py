"""Overview of a diff: the headline numbers side by side, with a verdict where per-step values exist,
and what differs between the two runs' set-ups (command, parameters, code, host, model, data loader)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from stepscope.analyze.diff.sides import StepSample, global_rate_per_step
from stepscope.analyze.diff.significance import Change, DiffSettings, compare_samples
from stepscope.analyze.summary import RunSummary
from stepscope.model.tables import RunData


@dataclass(frozen=True, slots=True)
class OverviewRow:
    """One headline number of both runs.

    ``key``: stable id (JSON); ``label``: what it is; ``unit``: "ns", "bytes", "%", "share" (0-1),
    "samples/s", "tokens/s", "J", "" (a count) or "text" (``baseline``/``experiment`` are strings).
    ``scope``: which ranks the value covers ("rank 0", "all ranks (total)", "mean over ranks",
    "max over ranks", "run"). ``delta`` = experiment - baseline and ``delta_pct`` = 100 * delta / baseline
    for numbers (None when either side is not measured). ``change``: the significance test on the per-step
    values behind the number (None where there is no per-step distribution: memory, utilisation, energy).
    """

    key: str
    label: str
    unit: str
    scope: str
    baseline: float | str | None
    experiment: float | str | None
    delta: float | None
    delta_pct: float | None
    change: Change | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["change"] = self.change.to_dict() if self.change else None
        return d


@dataclass(frozen=True, slots=True)
class ContextItem:
    """A set-up property that differs between the runs (command, a parameter, git commit, GPU model...)."""

    key: str
    baseline: str | None
    experiment: str | None


def row(key: str, label: str, unit: str, scope: str, b: Any, e: Any, change: Change | None = None) -> OverviewRow:
    delta = pct = None
    if isinstance(b, (int, float)) and isinstance(e, (int, float)) and unit != "text":
        delta = float(e) - float(b)
        pct = 100.0 * delta / float(b) if b else None
    return OverviewRow(key, label, unit, scope, b, e, delta, pct, change)


def device_names(names: tuple[str, ...] | list[str]) -> str | None:
    """Device names counted: ``8 x NVIDIA A100``; None for none."""
    names = list(names)
    if not names:
        return None
    distinct = sorted(set(names))
    return ", ".join(f"{names.count(n)} x {n}" if names.count(n) > 1 else n for n in distinct)


def device_of(data: RunData) -> str | None:
    """GPU model(s) of the run's host, else its CPU model."""
    gpus = [g.name for g in data.run.host.gpus] or [g.name for s in data.run.streams for g in s.gpus]
    return device_names(gpus) if gpus else f"CPU: {data.run.host.cpu_model or 'unknown'}"


def device_memory_of(data: RunData | None) -> float | None:
    if data is None:
        return None
    mems = [g.memory_bytes for g in data.run.host.gpus if g.memory_bytes]
    return float(max(mems)) if mems else None


def _mean_rss(data: RunData) -> float | None:
    vals = [float(np.nanmean(c)) for r in data.ranks if (c := r.samples.columns.get("rss_bytes")) is not None
            and np.isfinite(c).any()]
    return float(np.mean(vals)) if vals else None


def _share_per_step(s: StepSample, phase: str) -> np.ndarray:
    col = s.phases.get(phase)
    if col is None or not len(s):
        return np.zeros(0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(s.duration_ns > 0, col / s.duration_ns, np.nan)


def run_overview(base: RunSummary, exp: RunSummary, base_steps: list[StepSample], exp_steps: list[StepSample],
                 base_data: RunData, exp_data: RunData, settings: DiffSettings) -> list[OverviewRow]:
    """Overview rows of two stored runs. Step time and data wait compare rank 0 of each; throughput the
    totals over all ranks (per step: samples summed over ranks / mean step time)."""
    hb, he = base.headline, exp.headline
    rows = [
        row("device", "device", "text", "run", device_of(base_data), device_of(exp_data)),
        row("device_memory_bytes", "device memory", "bytes", "per device", device_memory_of(base_data),
             device_memory_of(exp_data)),
        row("world_size", "world size", "", "run", base_data.run.world_size, exp_data.run.world_size),
        row("measured_steps", "measured steps (rank 0)", "", "rank 0",
             len(base_steps[0]) if base_steps else None, len(exp_steps[0]) if exp_steps else None),
    ]
    if base_steps and exp_steps:
        b0, e0 = base_steps[0], exp_steps[0]
        rows.append(row("step_time_median_ns", "step time (median)", "ns", "rank 0", hb.step_time_median_ns,
                         he.step_time_median_ns, compare_samples(b0.duration_ns, e0.duration_ns, settings=settings)))
        if np.isfinite(b0.device_ns).any() and np.isfinite(e0.device_ns).any():
            rows.append(row("device_step_time_median_ns", "GPU step time (median, CUDA events)", "ns", "rank 0",
                             float(np.nanmedian(b0.device_ns)), float(np.nanmedian(e0.device_ns)),
                             compare_samples(b0.device_ns, e0.device_ns, settings=settings)))
        for col, key, unit, hv, ev in (("samples", "samples_per_s", "samples/s", hb.samples_per_s, he.samples_per_s),
                                       ("tokens", "tokens_per_s", "tokens/s", hb.tokens_per_s, he.tokens_per_s)):
            if hv is None and ev is None:
                continue
            ch = compare_samples(global_rate_per_step(base_steps, col), global_rate_per_step(exp_steps, col),
                                 settings=settings, higher_is_better=True)
            rows.append(row(key, f"throughput ({unit})", unit, "all ranks (total)", hv, ev, ch))
            if base_data.run.world_size != exp_data.run.world_size:
                per = [None if v is None else v / max(d.run.world_size, 1)
                       for v, d in ((hv, base_data), (ev, exp_data))]
                rows.append(row(f"{key}_per_rank", f"throughput per rank ({unit})", unit, "total / world size",
                                 per[0], per[1]))
        ch = compare_samples(_share_per_step(b0, "data_wait"), _share_per_step(e0, "data_wait"), settings=settings,
                             statistic="mean", floor=0.01)
        rows.append(row("data_wait_share", "data wait (share of step)", "share", "mean over ranks",
                         hb.data_wait_share, he.data_wait_share,
                         ch if "data_wait" in b0.phases and "data_wait" in e0.phases else None))
    rows += [
        row("gpu_util_pct", "GPU utilisation (mean)", "%", "mean over ranks", hb.gpu_util_pct, he.gpu_util_pct),
        row("rss_mean_bytes", "process memory (mean RSS)", "bytes", "mean over ranks", _mean_rss(base_data),
             _mean_rss(exp_data)),
        row("rss_peak_bytes", "process memory (peak RSS)", "bytes", "max over ranks", hb.peak_rss_bytes,
             he.peak_rss_bytes),
        row("gpu_mem_peak_bytes", "GPU memory (peak)", "bytes", "max over ranks", hb.peak_gpu_mem_bytes,
             he.peak_gpu_mem_bytes),
        row("energy_per_step_j", "energy per step", "J", "all ranks (total)", hb.energy_per_step_j,
             he.energy_per_step_j),
    ]
    always = {"device", "world_size", "measured_steps", "step_time_median_ns"}
    return [r for r in rows if r.key in always or r.baseline is not None or r.experiment is not None]


def _model_line(summary: RunSummary) -> str | None:
    if not summary.models:
        return None
    m = summary.models[0]
    return f"{m.get('name')} ({m.get('total_params', 0):,} parameters)"


def _loader_line(summary: RunSummary) -> str | None:
    if not summary.ranks or not summary.ranks[0].dataloaders:
        return None
    d = summary.ranks[0].dataloaders[0]
    keys = ("dataset", "batch_size", "num_workers", "pin_memory", "prefetch_factor", "persistent_workers")
    return ", ".join(f"{k}={d.get(k)}" for k in keys if k in d)


def context_diff(base: RunSummary, exp: RunSummary) -> list[ContextItem]:
    """The set-up properties that differ (only those), in the order a reader checks them."""
    rb, re_ = base.run, exp.run

    def soft(r: Any) -> str:
        s = next((st.software for st in r.streams if st.software and st.software.torch), r.software)
        return f"python {s.python}, torch {s.torch}" + (f", CUDA {s.cuda}" if s.cuda else "")

    pairs: list[tuple[str, Any, Any]] = [
        ("command", " ".join(rb.command), " ".join(re_.command)),
        ("model", _model_line(base), _model_line(exp)),
        ("data loader", _loader_line(base), _loader_line(exp)),
        ("git commit", rb.git.commit[:12] if rb.git else None, re_.git.commit[:12] if re_.git else None),
        ("git dirty", rb.git.dirty if rb.git else None, re_.git.dirty if re_.git else None),
        ("host", rb.host.hostname, re_.host.hostname),
        ("CPU", rb.host.cpu_model, re_.host.cpu_model),
        ("software", soft(rb), soft(re_)),
        ("step marking", base.ranks[0].step_source if base.ranks else None,
         exp.ranks[0].step_source if exp.ranks else None),
        ("timing", base.ranks[0].timing if base.ranks else None, exp.ranks[0].timing if exp.ranks else None),
    ]
    for k in sorted(set(rb.params) | set(re_.params)):
        pairs.append((f"param {k}", rb.params.get(k), re_.params.get(k)))
    for k in sorted(set(rb.tags) | set(re_.tags)):
        pairs.append((f"tag {k}", rb.tags.get(k), re_.tags.get(k)))
    return [ContextItem(k, None if b is None else str(b), None if e is None else str(e))
            for k, b, e in pairs if b != e]
