"""The dashboard: a static site over the store, the same pages for `dashboard build` and `serve`.

Pages (relative links only, data embedded in each page as safe JSON in compact columns, no network, open
from file://). Every page carries a run-name selector: one dashboard for every run name in the store.

    index.html                  runs list: sortable, filterable by run name, text, branch, status, tag,
                                parameter; paginated (only the visible rows are drawn)
    regressions.html            every detected step of every run name's tracked metrics, confirmed by the
                                run-level check (size, interval, direction, link to the diff around it)
    history/<metric>@<name>.html  one metric of one run name across commits (date or commit-order axis)
    compare.html#A,B            opens the HTML diff of A and B (diffs/A--B.html) where the site has it
    diffs/<a>--<b>.html         the full `stepscope diff --html` page of two runs
    run.html#ID                 a run's index record (for runs without a full report)
    runs/<id>.html              a run's full HTML report (written by the caller when it could render one)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from stepscope.analyze.runs.history import MetricHistory
from stepscope.analyze.runs.historysteps import HistoryStep, StepKind
from stepscope.report.dashboard.columns import finite, table
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
class NameView:
    """The dashboard of one run name: its tracked metrics' histories and their detected steps (oldest first)."""

    name: str
    runs: int
    histories: tuple[MetricHistory, ...]
    steps: tuple[HistoryStep, ...] = ()


@dataclass(frozen=True, slots=True)
class Site:
    runs: tuple[DashRun, ...]
    """Newest first."""
    names: tuple[NameView, ...]
    """Every run name; the first is the one shown by default (the newest run's, or the one asked for)."""
    title: str = "stepscope dashboard"
    note: str = ""
    threshold: float = 0.05
    """Smallest change the regressions page lists (see stepscope.analyze.runs.historysteps)."""
    diff_pairs: frozenset[tuple[str, str]] = frozenset()
    """(baseline, experiment) run ids with a full diff page at diffs/<a>--<b>.html."""
    live_diffs: bool = False
    """True under `serve`: every pair's diff page is rendered on request."""

    @property
    def histories(self) -> tuple[MetricHistory, ...]:
        """The default name's histories."""
        return self.names[0].histories if self.names else ()


@cache
def _asset(name: str) -> str:
    return (Path(__file__).resolve().parent / "assets" / name).read_text(encoding="utf-8")


CSS = """#ss-tip{position:absolute;display:none;background:#1f2a3c;color:#fff;padding:6px 9px;border-radius:4px;
font-size:12px;pointer-events:none;max-width:420px;z-index:10}.ss-links{display:flex;flex-wrap:wrap;gap:6px 14px;
align-items:center}.ss-links select,.ss-filters select{padding:3px 6px;max-width:18em}
.ss-filters input,.ss-filters select{margin:0 10px 6px 0;padding:4px 6px}
.ss-btn{margin:0 6px 6px 0;padding:4px 10px;border:1px solid #a0aec0;background:#fff;border-radius:4px;cursor:pointer}
.ss-btn[aria-pressed=true]{background:#2b6cb0;border-color:#2b6cb0;color:#fff;font-weight:600}
.ss-toggles span{margin-right:6px;color:#4a5568}.ss-pager button{margin-right:6px}
.ss-up{color:#c53030;font-weight:600}.ss-down{color:#2f855a;font-weight:600}
.ss-table-wrap{overflow-x:auto}
table.ss-table.ss-steps td.mono,table.ss-table.ss-steps td.ss-nowrap{white-space:nowrap;word-break:normal}"""


_SLUG_MAX = 100


def slug(text: str) -> str:
    """A file-name part: safe characters, and at most 111 of them (a 300-character region or metric name
    would pass the file system's 255-byte limit), a hash keeping long ones apart."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", text)
    if len(safe) <= _SLUG_MAX:
        return safe
    import hashlib

    return f"{safe[:_SLUG_MAX]}-{hashlib.sha1(text.encode()).hexdigest()[:10]}"


def history_file(name: str, metric: str) -> str:
    """The history page of ``metric`` for runs named ``name``, relative to the site root."""
    return f"history/{slug(metric)}@{slug(name)}.html"


def diff_file(a: str, b: str) -> str:
    return f"diffs/{a}--{b}.html"


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


LABELS = {"step_time_median_s": "step time (median)", "samples_per_s": "throughput", "tokens_per_s": "tokens/s",
          "data_wait_share": "data wait share", "gpu_util_pct": "GPU utilisation", "peak_rss_bytes": "peak RSS",
          "peak_gpu_mem_bytes": "peak GPU memory", "energy_per_step_j": "energy per step"}
UNIT_WORDS = {"s": "s", "bytes": "bytes", "share": "share of step", "%": "%", "": ""}


def label(metric: str) -> str:
    """A metric in words: 'step time (median)', "region 'work' (median)", 'trace: comm share'."""
    if metric in LABELS:
        return LABELS[metric]
    if metric.startswith("region.") and metric.endswith(".p50_s"):
        return f"region '{metric[len('region.'):-len('.p50_s')]}' (median)"
    if metric.startswith("trace."):
        return "trace: " + metric[len("trace."):].replace("_", " ")
    if metric.startswith("metric."):
        return "logged: " + metric[len("metric."):]
    return metric


def axis_title(metric: str) -> str:
    """A metric in words with its unit, for page titles and links: 'step time (median) [s]'."""
    base = label(metric)
    u = {"samples_per_s": "samples/s", "tokens_per_s": "tokens/s", "energy_per_step_j": "J"}.get(metric) \
        or UNIT_WORDS.get(unit(metric), "")
    return f"{base} [{u}]" if u else base


# ------------------------------------------------------------------------------------------ navigation


def _nav_data(site: Site) -> dict[str, Any]:
    return {"names": [{"name": v.name, "runs": v.runs,
                       "metrics": [[h.metric, history_file(v.name, h.metric), label(h.metric)]
                                   for h in v.histories]}
                      for v in site.names]}


def _links(site: Site, prefix: str, name: str | None, active: str) -> str:
    def link(href: str, text: str, key: str) -> str:
        cur = ' aria-current="page"' if key == active else ""
        return f'<a href="{prefix}{href}"{cur}>{esc(text)}</a>'

    regress = sum(1 for v in site.names for s in v.steps if s.kind is StepKind.REGRESSION)
    items = [link("index.html", "Runs", "runs"), link("regressions.html", f"Regressions ({regress})", "regressions"),
             link("compare.html", "Compare", "compare")]
    names = "".join(f'<option value="{esc(v.name)}"{" selected" if v.name == name else ""}>{esc(v.name)} '
                    f'({v.runs} runs)</option>' for v in site.names)
    if names:
        items.append(f'<label>run name <select id="ss-name">{names}</select></label>')
    view = next((v for v in site.names if v.name == name), None)
    metrics = "" if view is None else "".join(
        f'<a href="{prefix}{esc(history_file(view.name, h.metric))}" data-metric="{esc(h.metric)}"'
        + (' aria-current="page"' if active == "history:" + h.metric else "")
        + f'>{esc(label(h.metric))}</a>' for h in view.histories)
    return (f'<nav class="ss-links" id="ss-dash-nav" data-prefix="{esc(prefix)}">{" ".join(items)}</nav>'
            f'<p class="ss-links" id="ss-metric-links">history: {metrics or "(no tracked metric)"}</p>')


def _page(site: Site, title: str, sections: list[Section], *, prefix: str, name: str | None, active: str,
          js: tuple[str, ...]) -> str:
    first = sections[0]
    head = _links(site, prefix, name, active) + json_script(_nav_data(site), element_id="ss-nav")
    sections[0] = Section(first.id, first.title, head + first.body, note=first.note)
    script = "\n".join(_asset(n) for n in ("common.js", *js))
    return render_page(title, sections, subtitle=site.note, footer="stepscope dashboard · static, no network access",
                       extra_css=CSS, extra_js=script)


def _default_name(site: Site) -> str | None:
    return site.names[0].name if site.names else None


# ------------------------------------------------------------------------------------------------ pages


LIST_DIGITS = 6
"""Significant digits of the runs list's numbers (shown with 3; sorting needs a few more)."""


LIST_COLUMNS = ("id", "name", "status", "start", "branch", "commit", "dirty", "subject", "params", "tags", "report",
                "step", "thr")
"""The runs list's columns (the run page's table has these, group, host and every metric)."""


def list_table(full: dict[str, Any]) -> dict[str, Any]:
    """The runs list's columns of the run page's table (:func:`runs_table` with metrics)."""
    return {"n": full["n"], "cols": {k: full["cols"][k] for k in LIST_COLUMNS},
            "dict": {k: v for k, v in full["dict"].items() if k in LIST_COLUMNS}}


def runs_table(site: Site, *, metrics: bool) -> dict[str, Any]:
    """The runs as one column table (see :mod:`columns`); with ``metrics``, a column per metric name too."""
    rs = site.runs
    cols: dict[str, list[Any]] = {
        "id": [r.id for r in rs], "name": [r.name for r in rs], "status": [r.status for r in rs],
        "start": [round(r.start_s) for r in rs], "branch": [r.branch for r in rs], "commit": [r.commit for r in rs],
        "dirty": [int(r.dirty) for r in rs], "subject": [r.subject for r in rs], "params": [r.params for r in rs],
        "tags": [r.tags for r in rs], "report": [int(r.has_report) for r in rs],
        "step": finite([r.metrics.get("step_time_median_s") for r in rs], digits=LIST_DIGITS),
        "thr": finite([r.metrics.get("samples_per_s") for r in rs], digits=LIST_DIGITS)}
    encoded = ["name", "status", "branch", "commit", "subject", "params", "tags"]
    if metrics:
        cols |= {"group": [r.group for r in rs], "host": [r.host for r in rs]}
        encoded += ["group", "host"]
    out = table(cols, encoded=encoded)
    if metrics:
        names = sorted({k for r in rs for k in r.metrics})
        out["metrics"] = {m: finite([r.metrics.get(m) for r in rs]) for m in names}
        out["units"] = {m: unit(m) for m in names}
    return out


def index_page(site: Site, table: dict[str, Any] | None = None) -> str:
    """The runs list; ``table``: the runs table with metrics when the caller has it (run.html embeds it)."""
    branches = sorted({r.branch for r in site.runs if r.branch})
    statuses = sorted({r.status for r in site.runs})

    def opts(vals: list[str]) -> str:
        return '<option value="">all</option>' + "".join(f'<option value="{esc(v)}">{esc(v)}</option>' for v in vals)

    filters = (f'<div class="ss-filters"><label>run name <select id="f-name">{opts([v.name for v in site.names])}'
               '</select></label> <input id="f-text" placeholder="name, id, commit, subject">'
               f'branch <select id="f-branch">{opts(branches)}</select>'
               f'status <select id="f-status">{opts(statuses)}</select>'
               '<input id="f-tag" placeholder="tag key=value"><input id="f-param" placeholder="param key=value"></div>')
    body = (filters + '<div id="ss-runlist"></div><div class="ss-pager" id="ss-pager"></div>'
            + json_script(list_table(table) if table else runs_table(site, metrics=False), element_id="ss-runs"))
    return _page(site, site.title, [Section("runs", "Runs", body, note="Click a header to sort; 100 rows a page.")],
                 prefix="", name=_default_name(site), active="runs", js=("runs.js",))


def history_doc(site: Site, name: str, h: MetricHistory, steps: tuple[HistoryStep, ...]) -> dict[str, Any]:
    """The history page's data: points as columns, steps with their check."""
    reported = {r.id for r in site.runs if r.has_report}
    pts = h.points
    def col(values: list[float | None]) -> list[float | None]:
        return finite(values, digits=LIST_DIGITS)

    cols: dict[str, list[Any]] = {"t": [p.time_s for p in pts], "v": col([p.median for p in pts]),
            "lo": col([p.ci_low for p in pts]), "hi": col([p.ci_high for p in pts]),
            "rel": col([p.relative for p in pts]), "rlo": col([p.rel_low for p in pts]),
            "rhi": col([p.rel_high for p in pts]), "commit": [p.commit for p in pts],
            "subject": [p.subject for p in pts], "dirty": [int(p.dirty) for p in pts],
            "n": [len(p.values) for p in pts], "run": [p.representative_run for p in pts],
            "report": [int(p.representative_run in reported) for p in pts], "interval": [p.interval for p in pts]}
    mine = [s for s in steps if s.metric == h.metric]
    return {"metric": h.metric, "name": name, "unit": unit(h.metric), "title": axis_title(h.metric),
            "baseline": h.baseline, "lower_is_better": h.lower_is_better,
            "points": table(cols, encoded=["subject", "interval"]),
            "steps": [{"last_good": s.last_good, "first_bad": s.first_bad, "rel": s.fitted_change,
                       "kind": s.kind.value, "change": list(s.change) if s.change else None} for s in mine]}


CHART_UNITS = {"samples_per_s": "samples/s", "tokens_per_s": "tokens/s", "energy_per_step_j": "J"}


def _values(h: MetricHistory, *, relative: bool) -> list[tuple[float | None, ...]]:
    """(median, interval low, high) of each point, relative to the baseline or absolute, to 6 significant
    digits (a 2,000-commit page stays small); the same for both x axes."""
    pts = h.points
    cols = list(zip(*[(p.relative, p.rel_low, p.rel_high) if relative else (p.median, p.ci_low, p.ci_high)
                      for p in pts], strict=True))
    short = [finite(list(c), digits=LIST_DIGITS) for c in cols] if cols else [[], [], []]
    return list(zip(*short, strict=True))


def _chart(h: MetricHistory, steps: tuple[HistoryStep, ...], *, by_date: bool, relative: bool,
           vals: list[tuple[float | None, ...]] | None = None) -> str:
    """One view of the history, drawn by the chart module: x = commit dates or commits in order, y = absolute
    (the metric's unit) or relative to the baseline; the interval as two faint lines, steps as rules.
    ``vals``: :func:`_values` of the same ``relative``, when the caller has them."""
    from stepscope.report.html.charts import Axis, Mark, xy_chart
    from stepscope.report.html.charts import Series as ChartSeries

    pts = h.points
    x = [p.time_s for p in pts] if by_date else list(range(len(pts)))
    vals = vals if vals is not None else _values(h, relative=relative)
    clean = [None if p.dirty else v[0] for p, v in zip(pts, vals, strict=True)]
    series = [ChartSeries("median of the commit's runs", clean, smooth=0, points=len(pts) <= 200),
              ChartSeries("95% interval, low", [v[1] for v in vals], color="#90cdf4", dash=True, smooth=0),
              ChartSeries("95% interval, high", [v[2] for v in vals], color="#90cdf4", dash=True, smooth=0)]
    if any(p.dirty for p in pts):
        series.append(ChartSeries("dirty tree (not the commit's code)", [v[0] if p.dirty else None
                                                                          for p, v in zip(pts, vals, strict=True)],
                                  color="#dd6b20", smooth=0, points=True))
    rules = []
    for st in steps:
        mid = (x[st.last_good] + x[st.first_bad]) / 2
        ch = st.change
        size = f"{ch[0] * 100:+.1f}% " if ch else ""
        color = "#a0aec0" if st.kind is StepKind.NOT_CONFIRMED else "#c53030"
        rules.append(Mark(mid, f"{size}{st.kind.value.replace('_', ' ')}", color=color))
    x_axis = Axis("commit date (UTC)", unit="date") if by_date else \
        Axis("commit, oldest first", labels=[p.short for p in pts])
    all_y = [v for t in vals for v in t if v is not None]
    pad = (max(all_y) - min(all_y)) * 0.08 if all_y else 0.0
    y_min = (min(all_y) - pad) if all_y else None
    y_axis = Axis("relative to the baseline commit", unit="×", min=y_min) if relative else \
        Axis(label(h.metric), unit=CHART_UNITS.get(h.metric, unit(h.metric)), min=y_min)
    ident = f"ss-h-{'date' if by_date else 'order'}-{'rel' if relative else 'abs'}"
    return xy_chart(f"{axis_title(h.metric)}", x, series, x_axis=x_axis, y_axis=y_axis, rules=rules, height=340,
                    chart_id=ident)


def history_page(site: Site, view: NameView, h: MetricHistory) -> str:
    toggles = ('<div class="ss-toggles"><span>x axis:</span><button class="ss-btn" id="x-date" aria-pressed="true">'
               'commit date</button><button class="ss-btn" id="x-commit" aria-pressed="false">commit order</button>'
               '<span>y axis:</span><button class="ss-btn" id="y-rel" aria-pressed="false">relative to baseline'
               '</button><button class="ss-btn" id="y-abs" aria-pressed="false">absolute</button></div>')
    direction = "lower is better" if h.lower_is_better else "higher is better"
    note = (f"{direction}; baseline {h.baseline[:10] if h.baseline else '—'} = 1.0; median of each commit's runs "
            "with its 95% interval; dashed rules mark detected steps (red: confirmed regression or improvement, grey: "
            "not confirmed); drag to zoom, double-click to reset; click a point to open its run")
    extra = ""
    if h.no_commit is not None:
        extra = (f'<p class="ss-note">{len(h.no_commit.values)} run(s) outside a git work tree are not on this '
                 'axis.</p>')
    mine = tuple(s for s in view.steps if s.metric == h.metric)
    vals = {r: _values(h, relative=r) for r in (True, False)}
    views = "".join(f'<template data-view="{"date" if d else "commit"}-{"rel" if r else "abs"}">'
                    f'{_chart(h, mine, by_date=d, relative=r, vals=vals[r])}</template>'
                    for d in (True, False) for r in (True, False) if h.points and (not r or h.baseline))
    listed = "".join(
        f'<li class="ss-step" data-kind="{esc(st.kind.value)}" data-commit="{esc(st.commit or "")}">'
        f'{esc(_pct(st.change[0]) if st.change else "")} at <span class="mono">{esc(st.short)}</span> '
        f'{esc(st.subject or "")} — {esc(st.kind.value.replace("_", " "))}</li>' for st in mine)
    body = (toggles + '<div id="ss-chart"></div><p class="ss-note" id="ss-point-info">&nbsp;</p>' + views
            + (f'<p>Detected steps:</p><ul id="ss-steps">{listed}</ul>' if listed else "") + extra
            + json_script(history_doc(site, view.name, h, view.steps), element_id="ss-history"))
    return _page(site, f"{axis_title(h.metric)} — {view.name} — history",
                 [Section("history", f"{axis_title(h.metric)} · runs named {view.name}", body, note=note)],
                 prefix="../", name=view.name, active="history:" + h.metric, js=("history.js",))


def _pct(x: float) -> str:
    return f"{x * 100:+.1f}%"


def _step_row(site: Site, name: str, s: HistoryStep) -> str:
    from datetime import UTC, datetime

    c = s.check
    ch = s.change
    size = (f"{_pct(ch[0])} [{_pct(ch[1])}, {_pct(ch[2])}]" if ch else "—")
    worse = s.kind is StepKind.REGRESSION or (s.kind is StepKind.NOT_CONFIRMED and (c.worse or 1) > 1)
    arrow = ("▲ " if ch and ch[0] > 0 else "▼ ") if ch else ""
    word = {StepKind.REGRESSION: "regression", StepKind.IMPROVEMENT: "improvement"}.get(
        s.kind, c.reason or c.verdict.value.replace("_", " "))
    pair = (s.last_good_run, s.first_bad_run)
    if site.live_diffs or pair in site.diff_pairs:
        diff = f'<a class="ss-diff" href="{esc(diff_file(*pair))}">diff of the runs around it</a>'
    else:
        diff = (f'<code>stepscope diff {esc(pair[0])} {esc(pair[1])} --confidence 0.98 '
                f'--threshold {site.threshold * 100:g} --html</code>')
    when = datetime.fromtimestamp(s.time_s, tz=UTC).strftime("%Y-%m-%d %H:%M")
    return (f'<tr data-name="{esc(name)}" data-metric="{esc(s.metric)}" data-commit="{esc(s.commit or "")}" '
            f'data-kind="{esc(s.kind.value)}">'
            f'<td class="text">{esc(when)}</td><td class="text">{esc(name)}</td>'
            f'<td class="text"><a href="{esc(history_file(name, s.metric))}">{esc(axis_title(s.metric))}</a></td>'
            f'<td class="text mono">{esc(s.short)}</td><td class="text">{esc(s.subject or "")}</td>'
            f'<td class="ss-nowrap {"ss-up" if worse else "ss-down"}">{esc(arrow + size)}</td>'
            f'<td class="text ss-nowrap">{esc(word)}</td>'
            f'<td>{c.baseline_n} → {c.candidate_n}</td><td class="text">{diff}</td></tr>')


STEP_HEAD = ("<tr><th class='text'>first changed commit's date (UTC)</th><th class='text'>run name</th>"
             "<th class='text'>metric</th><th class='text'>commit</th><th class='text'>subject</th>"
             "<th>change [98% interval]</th><th class='text'>verdict</th><th>runs before → after</th>"
             "<th class='text'>diff</th></tr>")


def _steps_table(site: Site, rows: list[tuple[str, HistoryStep]], table_id: str, empty: str) -> str:
    if not rows:
        return f'<p class="ss-note" id="{table_id}-empty">{esc(empty)}</p>'
    body = "".join(_step_row(site, n, s) for n, s in sorted(rows, key=lambda t: -t[1].time_s))
    return (f'<div class="ss-table-wrap"><table class="ss-table ss-steps" id="{table_id}"><thead>{STEP_HEAD}</thead>'
            f'<tbody>{body}</tbody></table></div>')


def regressions_page(site: Site) -> str:
    every = [(v.name, s) for v in site.names for s in v.steps]
    by = {k: [(n, s) for n, s in every if s.kind is k] for k in StepKind}
    t = f"{site.threshold:.0%}"
    note = (f"Each step the history's step fit places is checked as `stepscope check` does: one value per run, the "
            f"runs of up to 3 commits before it against up to 3 from it on (Welch t on logs, 98%). Listed when "
            f"the interval excludes no change and the change exceeds {t}; the change is the ratio of the runs' "
            "geometric means, in the metric's own direction (▲ grew, ▼ shrank).")
    sections = [Section("regressions", "Regressions", _steps_table(site, by[StepKind.REGRESSION], "ss-regressions",
                                                                    "No regression detected."), note=note),
                Section("improvements", "Improvements", _steps_table(site, by[StepKind.IMPROVEMENT],
                                                                      "ss-improvements", "No improvement detected.")),
                Section("unconfirmed", "Steps not confirmed", _steps_table(
                    site, by[StepKind.NOT_CONFIRMED], "ss-unconfirmed", "None."),
                    note=f"placed by the step fit, but the runs around them show no change beyond {t} at 98%, or "
                         "too few runs a side to tell")]
    return _page(site, "regressions", sections, prefix="", name=_default_name(site), active="regressions",
                 js=("regressions.js",))


def compare_page(site: Site) -> str:
    rs = site.runs
    data = table({"id": [r.id for r in rs], "name": [r.name for r in rs], "start": [r.start_s for r in rs],
                  "commit": [r.commit for r in rs]}, encoded=["name", "commit"])
    diffs = {"live": site.live_diffs, "pairs": sorted(f"{a}--{b}" for a, b in site.diff_pairs)}
    listing = "".join(f'<li><a href="{esc(diff_file(a, b))}">{esc(a)} → {esc(b)}</a></li>'
                      for a, b in sorted(site.diff_pairs))
    body = ('<p>A (baseline) <select id="cmp-a"></select> B (experiment) <select id="cmp-b"></select> '
            '<button class="ss-btn" id="cmp-go">open the diff</button></p><div id="ss-compare"></div>'
            + (f'<h3>Diff pages in this site</h3><ul id="cmp-list">{listing}</ul>' if listing else "")
            + json_script(data, element_id="ss-runs") + json_script(diffs, element_id="ss-diffs"))
    return _page(site, "compare runs", [Section("compare", "Compare two runs", body,
                                                note="the comparison is the `stepscope diff` HTML page")],
                 prefix="", name=_default_name(site), active="compare", js=("compare.js",))


def run_page(site: Site, table: dict[str, Any] | None = None) -> str:
    body = '<div id="ss-run"></div>' + json_script(table or runs_table(site, metrics=True), element_id="ss-runs")
    return _page(site, "run", [Section("run", "Run", body)], prefix="", name=_default_name(site), active="run",
                 js=("run.js",))


def pages(site: Site) -> dict[str, Callable[[], str]]:
    """Relative path -> function rendering that page (lazily: `serve` renders only what is asked)."""
    table = cache(lambda: runs_table(site, metrics=True))  # computed once, for whichever page asks first
    out: dict[str, Callable[[], str]] = {"index.html": lambda: index_page(site, table()),
                                         "regressions.html": lambda: regressions_page(site),
                                         "compare.html": lambda: compare_page(site),
                                         "run.html": lambda: run_page(site, table())}
    for v in site.names:
        for h in v.histories:
            out[history_file(v.name, h.metric)] = (lambda v=v, h=h: history_page(site, v, h))  # type: ignore[misc]
    return out


def write_files(out: Path, files: Mapping[str, str]) -> list[Path]:
    """Write each page (relative path -> HTML) under ``out``; return the paths."""
    written = []
    for rel, html in files.items():
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(html, encoding="utf-8")
        written.append(path)
    return written


def write_site(site: Site, out: Path, reports: Mapping[str, str] | None = None,
               diffs: Mapping[tuple[str, str], str] | None = None) -> list[Path]:
    """Write every page, the given run reports (run id -> HTML) and diff pages ((a, b) -> HTML) under
    ``out``; return the paths."""
    written = write_files(out, {diff_file(a, b): html for (a, b), html in (diffs or {}).items()})
    written += write_files(out, {rel: render() for rel, render in pages(site).items()})
    return written + write_files(out, {f"runs/{run_id}.html": html for run_id, html in (reports or {}).items()})
