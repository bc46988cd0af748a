"""Glue shared by `history`, `check`, `dashboard` and `serve`: index rows -> RunPoints, git look-ups,
baseline and metric names resolved with one-line errors."""

from __future__ import annotations

import difflib
import re
import subprocess
import time
from pathlib import Path
from typing import Any

from stepscope.analyze.runs.history import RunPoint
from stepscope.errors import UserError
from stepscope.store import Store
from stepscope.store.index import RunRow

METRIC_ALIASES = {
    "step_time": "step_time_median_s", "throughput": "samples_per_s", "samples": "samples_per_s",
    "tokens": "tokens_per_s", "data_wait": "data_wait_share", "memory": "peak_rss_bytes",
    "gpu_memory": "peak_gpu_mem_bytes", "energy": "energy_per_step_j", "gpu_util": "gpu_util_pct",
    "comm_share": "trace.comm_share", "idle_share": "trace.idle_share", "memcpy_share": "trace.memory_share",
    "memory_share": "trace.memory_share", "compute_share": "trace.compute_share",
}
FALLBACKS = {"trace.comm_share": "phase.comm_share"}
"""Without a profiled window, the communication share comes from the timed torch.distributed calls."""


def point_from_row(row: RunRow, metrics: dict[str, float | None]) -> RunPoint:
    return RunPoint(run_id=row.id, name=row.name, status=row.status, start_s=row.start_ns / 1e9,
                    commit=row.git_commit, branch=row.git_branch, dirty=bool(row.git_dirty),
                    commit_time_s=row.git_commit_time, subject=row.git_subject, group=row.grp, metrics=metrics)


def load_points(store: Store, *, name: str | None = None, branch: str | None = None,
                since_s: float | None = None) -> list[RunPoint]:
    """Runs of the index as RunPoints, filtered by run name, git branch and start time."""
    where: list[str] = []
    params: list[str | int] = []
    if name:
        where.append("name = ?")
        params.append(name)
    if branch:
        where.append("git_branch = ?")
        params.append(branch)
    if since_s is not None:
        where.append("start_ns >= ?")
        params.append(int(since_s * 1e9))
    rows = store.index.runs(" AND ".join(where), params, order="start_ns")
    metrics = store.index.metrics([r.id for r in rows])
    return [point_from_row(r, metrics.get(r.id, {})) for r in rows]


def default_name(store: Store, name: str | None) -> str | None:
    """The run name history works on: the given one (checked), else the newest run's name."""
    names = [r[0] for r in store.index.query("SELECT DISTINCT name FROM runs")]
    if name is not None:
        if name not in names:
            close = difflib.get_close_matches(name, names, n=3, cutoff=0.4)
            hint = f"closest: {', '.join(close)}" if close else f"names: {', '.join(sorted(names)[:8]) or 'none'}"
            raise UserError(f"no runs named {name!r} in the store — {hint}")
        return name
    latest = store.index.runs(limit=1)
    return latest[0].name if latest else None


def parse_since(text: str | None) -> float | None:
    """'30d', '12h', '2w' or an ISO date into Unix seconds; None for None."""
    if not text:
        return None
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([hdw])", text.strip())
    if m:
        # a span longer than the epoch (99999999d) means every run, not an overflow
        return max(0.0, time.time() - float(m.group(1)) * {"h": 3600, "d": 86400, "w": 7 * 86400}[m.group(2)])
    try:
        from datetime import datetime

        return max(0.0, datetime.fromisoformat(text).timestamp())
    except (ValueError, OverflowError, OSError):
        raise UserError(f"--since {text!r}: expected a duration like 30d, 12h, 2w or a date like 2025-01-31") from None


def resolve_metric(name: str, available: set[str]) -> str:
    """A metric name (or alias like step_time, throughput, comm_share) that runs in the store carry."""
    full = METRIC_ALIASES.get(name, name)
    if full in available:
        return full
    for candidate in (FALLBACKS.get(full, ""), f"region.{name}.p50_s", f"metric.{name}",
                      f"trace.component.{name}_share"):
        if candidate in available:
            return candidate
    # aliases are candidates too (a mistyped "step_time" means the headline figure, not the nearest raw key)
    names = {**{n: n for n in available}, **{a: f"{a} (= {f})" for a, f in METRIC_ALIASES.items() if f in available}}
    close = [names[c] for c in difflib.get_close_matches(name, sorted(names), n=3, cutoff=0.4)]
    hint = f"closest: {', '.join(close)}" if close else f"available: {', '.join(sorted(available)[:10]) or 'none'}"
    raise UserError(f"no run carries the metric {name!r} — {hint}")


def git(cwd: Path, *args: str) -> str | None:
    try:
        p = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return p.stdout.strip() if p.returncode == 0 and p.stdout.strip() else None


def head_commit(cwd: Path) -> str | None:
    return git(cwd, "rev-parse", "--verify", "--quiet", "HEAD")


def resolve_baseline(ref: str, points: list[RunPoint], cwd: Path) -> str:
    """A commit sha for ``ref``: a commit (prefix) with runs, a git ref (tag, branch, sha) in ``cwd``'s
    repository, or a run id / name (its commit). One-line error with the closest names otherwise."""
    commits = {p.commit for p in points if p.commit}
    hits = sorted(c for c in commits if c.startswith(ref.lower()))
    if len(hits) == 1:
        return hits[0]
    sha = git(cwd, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if sha:
        return sha
    for p in reversed(points):
        if (p.run_id == ref or p.name == ref) and p.commit:
            return p.commit
    names = sorted(commits)
    names = [c[:10] for c in names] + (git(cwd, "tag", "--list") or "").split() + \
        (git(cwd, "for-each-ref", "--format=%(refname:short)", "refs/heads") or "").split()
    close = difflib.get_close_matches(ref, names, n=3, cutoff=0.4)
    hint = f"closest: {', '.join(close)}" if close else "give a commit with runs, a tag or a branch"
    why = "ambiguous commit prefix" if len(hits) > 1 else "no such commit, tag, branch or run"
    raise UserError(f"baseline {ref!r}: {why} — {hint}")


def site_from_store(store: Store, *, name: str | None = None, report_ids: set[str] | None = None) -> Any:
    """The dashboard's Site (moved: see :func:`stepscope.cli.dashboarddata.build_site`)."""
    from stepscope.cli.dashboarddata import build_site

    return build_site(store, name=name, report_ids=report_ids)


def step_pairs(histories: Any, limit: int = 20) -> list[tuple[str, str]]:
    """(last good run, first bad run) around each detected step of every history, newest first."""
    pairs: list[tuple[str, str]] = []
    for h in histories:
        for good, bad, _ in h.steps:
            pair = (h.points[good].representative_run, h.points[bad].representative_run)
            if pair not in pairs and None not in pair:
                pairs.append(pair)
    return pairs[-limit:]
