"""The dashboard: a static site over the store, the same pages for `dashboard build` and `serve`.

Pages (relative links only, data embedded in each page as safe JSON, no network, open from file://):

    index.html                 runs list: sortable, filterable by text, branch, status, tag, parameter
    history/<metric>.html      one metric across commits: real-date or commit-order x axis, hover shows
                               commit / subject / value / interval, click opens the run, steps marked
    compare.html#A,B           two runs' index metrics side by side, a link to their full diff page where
                               one exists (every pair under `serve`; the runs around each detected step in
                               a static build), else the `stepscope diff` command
    diffs/<a>--<b>.html        the full `stepscope diff` HTML page of two runs
    run.html#ID                a run's index record (for runs without a full report)
    runs/<id>.html             a run's full HTML report (written by the caller when it could render one)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from stepscope.analyze.history import MetricHistory
from stepscope.report.html import Section, esc, json_script, render_page


@dataclass(frozen=True, slots=True)
class DashRun:
    """One run as the dashboard lists it (index fields; times in Unix seconds)."""

    id: str
    name: str
    status: str
    start_s: float
    commit: str | None
    branch: str | None
    dirty: bool
    subject: str | None
    group: str | None
    host: str
    params: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float | None] = field(default_factory=dict)
    has_report: bool = False
    """A full report page exists at runs/<id>.html."""


@dataclass(frozen=True, slots=True)
class Site:
    runs: tuple[DashRun, ...]
    """Newest first."""
    histories: tuple[MetricHistory, ...]
    title: str = "stepscope dashboard"
    note: str = ""
    diff_pairs: frozenset[tuple[str, str]] = frozenset()
    """(baseline, experiment) run ids with a full diff page at diffs/<a>--<b>.html."""
    live_diffs: bool = False
    """True under `serve`: every pair's diff page is rendered on request."""


@cache
def _asset(name: str) -> str:
    return (Path(__file__).resolve().parent / "assets" / name).read_text(encoding="utf-8")


CSS = """#ss-tip{position:absolute;display:none;background:#1f2a3c;color:#fff;padding:6px 9px;border-radius:4px;
font-size:12px;pointer-events:none;max-width:420px;z-index:10}.ss-links a{margin-right:14px}
.ss-filters input,.ss-filters select{margin:0 10px 6px 0;padding:4px 6px}.ss-btn{margin-right:6px}"""


_SLUG_MAX = 100


def slug(metric: str) -> str:
    """A file name for a metric's history page: safe characters, and at most 111 of them (a 300-character
    region or metric name would pass the file system's 255-byte limit), a hash keeping long ones apart."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", metric)
    if len(safe) <= _SLUG_MAX:
        return safe
    import hashlib

    return f"{safe[:_SLUG_MAX]}-{hashlib.sha1(metric.encode()).hexdigest()[:10]}"


def run_href(run_id: str, has_report: bool, prefix: str = "") -> str:
    return f"{prefix}runs/{run_id}.html" if has_report else f"{prefix}run.html#{run_id}"


def unit(metric: str) -> str:
    """The stepscope.js format unit for a metric name."""
    if metric.endswith("_bytes"):
        return "bytes"
    if metric.endswith("_share"):
        return "share"
    if metric.endswith("_pct"):
        return "%"
    if metric.endswith("_s") and not metric.endswith("per_s"):
        return "s"
    return ""


def _links(site: Site, prefix: str) -> str:
    items = [f'<a href="{prefix}index.html">Runs</a>', f'<a href="{prefix}compare.html">Compare</a>']
    items += [f'<a href="{prefix}history/{esc(slug(h.metric))}.html">{esc(h.metric)}</a>' for h in site.histories]
    return f'<p class="ss-links">{" ".join(items)}</p>'


def _page(site: Site, title: str, sections: list[Section], prefix: str) -> str:
    first = sections[0]
    sections[0] = Section(first.id, first.title, _links(site, prefix) + first.body, note=first.note)
    return render_page(title, sections, subtitle=site.note, footer="stepscope dashboard · static, no network access",
                       extra_css=CSS, extra_js=_asset("dashboard.js"))


def _runs_json(site: Site, prefix: str, *, metrics: bool) -> list[dict[str, Any]]:
    out = []
    for r in site.runs:
        d: dict[str, Any] = {
            "id": r.id, "name": r.name, "status": r.status, "start": r.start_s, "commit": r.commit,
            "short": r.commit[:10] if r.commit else None, "branch": r.branch, "dirty": r.dirty, "subject": r.subject,
            "group": r.group, "host": r.host, "params": r.params, "tags": r.tags,
            "step": r.metrics.get("step_time_median_s"), "thr": r.metrics.get("samples_per_s"),
            "href": run_href(r.id, r.has_report, prefix)}
        if metrics:
            d["metrics"] = r.metrics
        out.append(d)
    return out


def index_page(site: Site) -> str:
    branches = sorted({r.branch for r in site.runs if r.branch})
    statuses = sorted({r.status for r in site.runs})

    def opts(vals: list[str]) -> str:
        return '<option value="">all</option>' + "".join(f'<option value="{esc(v)}">{esc(v)}</option>' for v in vals)

    filters = (f'<div class="ss-filters"><input id="f-text" placeholder="name, id, commit, subject">'
               f'branch <select id="f-branch">{opts(branches)}</select>'
               f'status <select id="f-status">{opts(statuses)}</select>'
               '<input id="f-tag" placeholder="tag key=value"><input id="f-param" placeholder="param key=value"></div>')
    body = filters + '<div id="ss-runlist"></div>' + json_script(_runs_json(site, "", metrics=False),
                                                                element_id="ss-runs")
    return _page(site, site.title, [Section("runs", "Runs", body, note="Click a header to sort.")], "")


def history_page(site: Site, h: MetricHistory) -> str:
    reported = {r.id for r in site.runs if r.has_report}
    pts = [{"i": i, "t": p.time_s, "v": p.median, "lo": p.ci_low, "hi": p.ci_high, "rv": p.relative,
            "rlo": p.rel_low, "rhi": p.rel_high, "rel": p.relative, "commit": p.commit, "short": p.short,
            "subject": p.subject, "dirty": p.dirty, "n": len(p.values), "run": p.representative_run,
            "href": run_href(p.representative_run, p.representative_run in reported, "../")}
           for i, p in enumerate(h.points)]
    doc = {"metric": h.metric, "unit": unit(h.metric), "baseline": h.baseline, "points": pts,
           "steps": [{"last_good": a, "first_bad": b, "rel": r} for a, b, r in h.steps]}
    buttons = ('<p><button class="ss-btn" id="x-date">x: commit date</button><button class="ss-btn" id="x-commit">'
               'x: commit order</button><button class="ss-btn" id="y-rel">relative to baseline</button>'
               '<button class="ss-btn" id="y-abs">absolute</button></p>')
    direction = "lower is better" if h.lower_is_better else "higher is better"
    note = (f"{direction}; baseline {h.baseline[:10] if h.baseline else '—'} = 1.0; median of each commit's runs with "
            "its 95% interval; dashed red lines mark detected steps; open circles are dirty trees")
    extra = ""
    if h.no_commit is not None:
        extra = (f'<p class="ss-note">{len(h.no_commit.values)} run(s) outside a git work tree are not on this '
                 'axis.</p>')
    body = (buttons + '<div id="ss-chart"></div><div id="ss-tip"></div>' + extra
            + json_script(doc, element_id="ss-history"))
    return _page(site, f"{h.metric} — history", [Section("history", h.metric, body, note=note)], "../")


def compare_page(site: Site) -> str:
    diffs = {"live": site.live_diffs, "pairs": sorted(f"{a}--{b}" for a, b in site.diff_pairs)}
    body = ('<p>A <select id="cmp-a"></select> B <select id="cmp-b"></select></p><div id="ss-compare"></div>'
            + json_script(_runs_json(site, "", metrics=True), element_id="ss-runs")
            + json_script(diffs, element_id="ss-diffs"))
    return _page(site, "compare runs", [Section("compare", "Compare two runs", body)], "")


def run_page(site: Site) -> str:
    body = '<div id="ss-run"></div>' + json_script(_runs_json(site, "", metrics=True), element_id="ss-runs")
    return _page(site, "run", [Section("run", "Run", body)], "")


def pages(site: Site) -> dict[str, Callable[[], str]]:
    """Relative path -> function rendering that page (lazily: `serve` renders only what is asked)."""
    out: dict[str, Callable[[], str]] = {"index.html": lambda: index_page(site),
                                         "compare.html": lambda: compare_page(site),
                                         "run.html": lambda: run_page(site)}
    for h in site.histories:
        out[f"history/{slug(h.metric)}.html"] = (lambda h=h: history_page(site, h))  # type: ignore[misc]
    return out


def write_site(site: Site, out: Path, reports: Mapping[str, str] | None = None,
               diffs: Mapping[tuple[str, str], str] | None = None) -> list[Path]:
    """Write every page, the given run reports (run id -> HTML) and diff pages ((a, b) -> HTML) under
    ``out``; return the paths."""
    written = []
    for (a, b), html in (diffs or {}).items():
        path = out / "diffs" / f"{a}--{b}.html"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(html, encoding="utf-8")
        written.append(path)
    for rel, render in pages(site).items():
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render(), encoding="utf-8")
        written.append(path)
    for run_id, html in (reports or {}).items():
        path = out / "runs" / f"{run_id}.html"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(html, encoding="utf-8")
        written.append(path)
    return written
