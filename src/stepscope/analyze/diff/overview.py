"""Overview of a diff: the headline numbers side by side, with a verdict where per-step values exist,
and what differs between the two runs' set-ups (command, parameters, code, host, model, data loader)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from stepscope.analyze.diff.metric import CPU_METRICS, METRICS
from stepscope.analyze.diff.runlevel import RunValues
from stepscope.analyze.diff.significance import Change, DiffSettings, compare_runs
from stepscope.analyze.run.summary import RunSummary
from stepscope.analyze.stats import NoiseFloor
from stepscope.model.tables import RunData

MEAN_METRIC = METRICS["step_time_mean"]
"""Shown only when the verdict is decided on it: beside the median it would be one more row to read on every diff."""


@dataclass(frozen=True, slots=True)
class OverviewRow:
    """One headline number of both runs.

    ``key``: stable id (JSON); ``label``: what it is; ``unit``: "ns", "bytes", "%", "share" (0-1),
    "samples/s", "tokens/s", "J", "" (a count) or "text" (``baseline``/``experiment`` are strings).
    ``scope``: which ranks the value covers ("rank 0", "all ranks (total)", "mean over ranks",
    "max over ranks", "run"). ``delta`` = experiment - baseline and ``delta_pct`` = 100 * delta / baseline
    for numbers (None when either side is not measured). ``change``: the run-level test of the number (one value
    per run; None where no verdict is given: memory, utilisation, energy); when present, ``baseline`` and
    ``experiment`` are exactly its tested values.
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


def _vals(runs: list[RunValues], attr: str) -> list[float | None]:
    return [getattr(r, attr) for r in runs]


def _tested(key: str, label: str, unit: str, scope: str, ch: Change) -> OverviewRow:
    """A row whose printed numbers are the tested ones (geometric means of the per-run values)."""
    return row(key, label, unit, scope, ch.baseline, ch.experiment, ch)


def run_overview(base_runs: list[RunValues], exp_runs: list[RunValues], base_data: RunData, exp_data: RunData,
                 settings: DiffSettings, floor: NoiseFloor | None, widen_log: float = 0.0) -> list[OverviewRow]:
    """Overview rows of two sides of stored runs (``base_data``/``exp_data``: each side's first run).

    Step time, GPU step time, throughput and data-wait share are tested run-level (one value per run: rank 0's
    median step time, the run's throughput, ...); the printed values are what was tested (geometric means over
    a side's runs; the run's own value for one run). Memory, utilisation and energy are the first runs' figures,
    without a verdict."""
    hb, he = base_runs[0].summary.headline, exp_runs[0].summary.headline
    bs, es = base_runs[0].samples, exp_runs[0].samples
    rows = [
        row("device", "device", "text", "run", device_of(base_data), device_of(exp_data)),
        row("device_memory_bytes", "device memory", "bytes", "per device", device_memory_of(base_data),
             device_memory_of(exp_data)),
        row("world_size", "world size", "", "run", base_data.run.world_size, exp_data.run.world_size),
        row("runs", "runs compared", "", "side", len(base_runs), len(exp_runs)),
        row("measured_steps", "measured steps (rank 0, first run)", "", "rank 0",
             len(bs[0]) if bs else None, len(es[0]) if es else None),
    ]
    if bs and es and len(bs[0]) and len(es[0]):
        rows.append(_tested("step_time_median_ns", "step time (median)", "ns", "rank 0",
                            compare_runs(_vals(base_runs, "step_ns"), _vals(exp_runs, "step_ns"), settings=settings,
                                         floor=floor, widen_log=widen_log)))
        if settings.metric == MEAN_METRIC.name:  # asked for: a wall clock too, so widened for drift like the median
            rows.append(_tested(MEAN_METRIC.row_key, MEAN_METRIC.label, "ns", "rank 0",
                                compare_runs(_vals(base_runs, MEAN_METRIC.attr), _vals(exp_runs, MEAN_METRIC.attr),
                                             settings=settings, floor=floor, widen_log=widen_log)))
        rows += cpu_rows(base_runs, exp_runs, settings, floor)
        if any(v is not None for v in _vals(base_runs, "device_ns")) and \
                any(v is not None for v in _vals(exp_runs, "device_ns")):
            rows.append(_tested("device_step_time_median_ns", "GPU step time (median, CUDA events)", "ns", "rank 0",
                                compare_runs(_vals(base_runs, "device_ns"), _vals(exp_runs, "device_ns"),
                                             settings=settings, floor=floor)))
        for attr, unit, hv, ev in (("samples_per_s", "samples/s", hb.samples_per_s, he.samples_per_s),
                                   ("tokens_per_s", "tokens/s", hb.tokens_per_s, he.tokens_per_s)):
            if hv is None and ev is None:
                continue
            ch = compare_runs(_vals(base_runs, attr), _vals(exp_runs, attr), settings=settings,
                              higher_is_better=True, floor=floor)
            rows.append(_tested(attr, f"throughput ({unit})", unit, "all ranks (total)", ch))
            if base_data.run.world_size != exp_data.run.world_size:
                per = [None if v is None else v / max(d.run.world_size, 1)
                       for v, d in ((ch.baseline, base_data), (ch.experiment, exp_data))]
                rows.append(row(f"{attr}_per_rank", f"throughput per rank ({unit})", unit, "total / world size",
                                 per[0], per[1]))
        if "data_wait" in bs[0].phases and "data_wait" in es[0].phases:
            ch = compare_runs(_vals(base_runs, "data_wait_share"), _vals(exp_runs, "data_wait_share"),
                              settings=settings, floor=floor, abs_floor=0.01, unit_scale=1.0)
            rows.append(_tested("data_wait_share", "data wait (share of step)", "share", "mean over ranks", ch))
        else:
            rows.append(row("data_wait_share", "data wait (share of step)", "share", "mean over ranks",
                             hb.data_wait_share, he.data_wait_share))
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
    always = {"device", "world_size", "runs", "measured_steps", "step_time_median_ns"}
    return [r for r in rows if r.key in always or r.baseline is not None or r.experiment is not None]


def cpu_rows(base_runs: list[RunValues], exp_runs: list[RunValues], settings: DiffSettings,
             floor: NoiseFloor | None) -> list[OverviewRow]:
    """The CPU clocks beside step time (metric.py), each tested run-level like it; a row whose clock only one side
    measured (a run recorded before the CPU clocks) has no verdict. Not widened for load drift: drift.py predicts
    the wall-clock cost of waiting for a core, which CPU time does not contain. One run a side uses the step-time
    floor (a CPU clock spreads less between runs, so that floor is on the safe side)."""
    rows = []
    for m in (METRICS[name] for name in CPU_METRICS):
        b, e = _vals(base_runs, m.attr), _vals(exp_runs, m.attr)
        has_b, has_e = any(v is not None for v in b), any(v is not None for v in e)
        if has_b and has_e:
            rows.append(_tested(m.row_key, m.label, "ns", "rank 0", compare_runs(b, e, settings=settings, floor=floor)))
        elif has_b or has_e:
            rows.append(row(m.row_key, m.label, "ns", "rank 0", b[0] if has_b else None, e[0] if has_e else None))
    return rows


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


def code_item(base: RunSummary, exp: RunSummary, base_code: dict[str, str] | None,
              exp_code: dict[str, str] | None) -> ContextItem | None:
    """Whether the two runs ran the same code, verified: a clean git tree at the same commit, or equal content
    hashes of the script and the Python files it imported. None when verified the same; else "code changed
    (file X)" or "unknown" with why."""
    gb, ge = base.run.git, exp.run.git
    if base_code is not None and exp_code is not None:
        changed = sorted(k for k in set(base_code) | set(exp_code) if base_code.get(k) != exp_code.get(k))
        if not changed:
            return None
        names = ", ".join(changed[:4]) + (f" and {len(changed) - 4} more" if len(changed) > 4 else "")
        return ContextItem("code", f"{len(base_code)} file(s) hashed", f"code changed (file {names})")
    if gb is not None and ge is not None and gb.commit == ge.commit and not gb.dirty and not ge.dirty:
        return None
    if gb is not None and ge is not None and gb.commit != ge.commit:
        return None  # the git commit row says it
    why = "a dirty git tree" if (gb and gb.dirty) or (ge and ge.dirty) else "no git and no recorded file hashes"
    return ContextItem("code", "unknown", f"unknown ({why}: cannot verify the code is the same)")


def context_diff(base: RunSummary, exp: RunSummary, *, base_code: dict[str, str] | None = None,
                 exp_code: dict[str, str] | None = None) -> list[ContextItem]:
    """The set-up properties that differ (only those), in the order a reader checks them; "code" is listed
    unless the same code is verified (see ``code_item``)."""
    rb, re_ = base.run, exp.run

    def soft(r: Any) -> str:
        s = next((st.software for st in r.streams if st.software and st.software.torch), None)
        torch = f", torch {s.torch}" + (f", CUDA {s.cuda}" if s.cuda else "") if s else ""  # only where imported
        return f"python {r.software.python}{torch}"

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
    items = [ContextItem(k, None if b is None else str(b), None if e is None else str(e))
             for k, b, e in pairs if b != e]
    code = code_item(base, exp, base_code, exp_code)
    return ([code] if code else []) + items
