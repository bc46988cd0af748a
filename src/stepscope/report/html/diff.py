"""The HTML diff page: verdict and biggest changes first, then overview, trends, phases and regions,
components, the module tree (expand / collapse), operators and kernels (sortable, filterable), system
and logged metrics. Built on the HTML base (``stepscope.report.html``): offline, escaped, sortable.

Renderers only render: every number comes computed in the RunDiff.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from stepscope.analyze.diff import Finding, RunDiff, Verdict
from stepscope.analyze.diff.series import TrendPair
from stepscope.analyze.diff.traces import DeltaRow, TraceDiff
from stepscope.report.diff_terminal import HEADLINE_TEXT, VERDICT_TEXT, evidence, pct, signed, value
from stepscope.report.html import Section, esc, json_for_script, kv_table, notice, paragraph, render_page, tiles
from stepscope.report.html.charts import Axis, Series, auto_window, shorten_names, words, xy_chart
from stepscope.report.html.tables import Col, table

BASE_COLOR, EXP_COLOR = "#4c78a8", "#e45756"


def _finding(fd: Finding) -> str:
    name = esc(fd.name)
    kind = "" if fd.kind in ("step_time", "throughput", "setup") else esc(fd.kind) + " "
    if fd.kind == "setup":
        text = f"{esc(fd.baseline_text or '—')} → {esc(fd.experiment_text or '—')}"
    elif fd.baseline is None or fd.experiment is None:
        only = "only in experiment" if fd.baseline is None else "only in baseline"
        text = f"{esc(value(fd.experiment if fd.baseline is None else fd.baseline, fd.unit))} ({only})"
    else:
        text = (f"{esc(value(fd.baseline, fd.unit))} → {esc(value(fd.experiment, fd.unit))} "
                f"({esc(signed(fd.delta, fd.unit))}, {esc(pct(fd.delta_pct))})")
    unit = " per step" if fd.kind in ("phase", "region") else (" per profiled step" if "profiled" in fd.unit else "")
    verdict = f' <span class="ss-verdict {esc(fd.verdict.value)}">{esc(VERDICT_TEXT[fd.verdict])}</span>' \
        if fd.verdict is not None else ""
    return f"<li><b>{kind}{name}</b>: {text}{esc(unit)}{verdict}</li>"


def verdict_section(d: RunDiff) -> Section:
    ch = d.headline
    word = HEADLINE_TEXT[ch.verdict] if ch is not None else "NOTHING TO COMPARE"
    items: list[tuple[str, str, str | None]] = [("experiment vs baseline", word,
                                                  f"step time {evidence(ch)}" if ch is not None else None)]
    for r in d.overview:
        if r.change is not None and r.key in ("step_time_median_ns", "samples_per_s", "data_wait_share"):
            items.append((r.label, f"{pct(r.delta_pct)} · {VERDICT_TEXT[r.change.verdict]}",
                          f"{value(r.baseline, r.unit)} → {value(r.experiment, r.unit)}"))
    body = tiles(items) + "<ul class=\"ss-findings\">" + "".join(_finding(x) for x in d.findings) + "</ul>"
    notes = list(d.messages) + ([f"module / operator / kernel diff: {d.trace_note}"] if d.trace_note else [])
    notes += list(d.traces.notes) if d.traces else []
    quality = "".join(notice(f"run {rid}: {q.headline()}", "warn") for rid, q in d.noisy)
    body = quality + body + "".join(notice(n, "warn") for n in notes)
    return Section("verdict", "What changed", body, note="test: " + d.settings.describe())


def overview_section(d: RunDiff) -> Section:
    cols = [Col("label", "number", "text"), Col("scope", "scope", "text"), Col("baseline", "baseline", "text"),
            Col("experiment", "experiment", "text"), Col("delta", "delta", "text"), Col("pct", "delta %", "%"),
            Col("verdict", "verdict", "text"), Col("p", "p (run-level)", "", "two-sided p-value of the run-level test"),
            Col("ci", "ratio interval", "text", f"{d.settings.confidence:.0%} t interval of exp/base over runs "
                "(none for one run a side)")]
    rows = [{"label": r.label, "scope": r.scope, "baseline": value(r.baseline, r.unit),
             "experiment": value(r.experiment, r.unit), "delta": signed(r.delta, r.unit) if r.unit != "text" else "",
             "pct": r.delta_pct, "verdict": VERDICT_TEXT[r.change.verdict] if r.change else "—",
             "p": r.change.p_value if r.change else None,
             "ci": f"{r.change.ci_low:.3f}–{r.change.ci_high:.3f}" if r.change and r.change.ci_low is not None else "—"}
            for r in d.overview]
    body = table(cols, rows, table_id="overview-table", filter_box=False)
    if d.context:
        body += "<h3>Set-up differences</h3>" + kv_table([(c.key, f"{c.baseline or '—'} → {c.experiment or '—'}")
                                                         for c in d.context])
    if d.ranks:
        body += "<h3>Step time per rank (median)</h3>" + table(
            [Col("rank", "rank", "count"), Col("b", "baseline", "ns"), Col("e", "experiment", "ns"),
             Col("v", "verdict", "text")],
            [{"rank": r.rank, "b": r.baseline_ns, "e": r.experiment_ns,
              "v": VERDICT_TEXT[r.change.verdict] if r.change else "—"} for r in d.ranks], table_id="ranks-table")
    return Section("overview", "Overview", body, note=f"world: {d.world}; warm-up steps excluded")


def _pair_chart(t: TrendPair, yunit: str = "", plot_id: str | None = None) -> str | None:
    """Both runs on one shared x axis, each series on its own x values (so each line is continuous where
    its run has values; only a gap in that run's own data breaks it)."""
    if t.baseline is None and t.experiment is None:
        return None
    sides = [(name, s, color) for name, s, color in (("baseline", t.baseline, BASE_COLOR),
                                                      ("experiment", t.experiment, EXP_COLOR)) if s is not None]
    # both runs smoothed alike (or neither), so the two lines compare like with like
    window = max(auto_window(np.asarray(s.y, dtype=float)) for _, s, _ in sides)
    series = [Series(name, s.y, color=color, x=s.x, smooth=window) for name, s, color in sides]
    system = t.key.startswith("system.")
    title = words(t.title) if system else t.title
    ylabel = _sys_axis(t.key) if system else t.y_label
    return xy_chart(title, [], series, x_axis=Axis(t.x_label), y_axis=Axis(ylabel, yunit), chart_id=plot_id)


def trends_section(d: RunDiff) -> Section | None:
    by_key = {t.key: t for t in d.trends}
    charts = [_pair_chart(by_key[k], plot_id=f"plot-{k.replace('_', '-')}") for k in ("cumulative_time", "step_time")
              if k in by_key]
    charts += [_pair_chart(t) for t in d.trends if t.key.startswith("logged.")]
    charts += [_pair_chart(t, yunit=_sys_unit(t.key), plot_id="plot-" + t.key.replace(".", "-").replace("_", "-"))
               for t in d.trends
               if t.key in ("system.cpu_process_pct", "system.rss_bytes") or t.key.endswith("_util_pct")]
    got = [c for c in charts if c]
    if not got:
        return None
    return Section("trends", "Trends", "".join(got),
                   note="rank 0; every step shown (warm-up and profiled steps included); a divergence of the "
                        "cumulative lines marks where the runs part")


def _sys_axis(key: str) -> str:
    """A short y-axis title for a system metric (the chart's title names it in full, in words)."""
    return ("CPU" if "cpu" in key else "utilisation" if key.endswith("_util_pct") else
            "memory" if key.endswith("_bytes") else words(key.removeprefix("system.")))


def _sys_unit(key: str) -> str:
    return "%" if key.endswith("_pct") else "bytes" if key.endswith("_bytes") else ""


def breakdown_section(d: RunDiff) -> Section | None:
    if not d.breakdown:
        return None
    cols = [Col("name", "phase / region", "text"), Col("kind", "kind", "text"), Col("b", "baseline", "ns"),
            Col("e", "experiment", "ns"), Col("delta", "delta", "ns"), Col("pct", "delta %", "%"),
            Col("sb", "share (b)", "share"), Col("se", "share (e)", "share"), Col("v", "verdict", "text"),
            Col("where", "present", "text")]
    rows = [{"name": r.name, "kind": r.kind, "b": r.baseline_ns, "e": r.experiment_ns, "delta": r.delta_ns,
             "pct": r.delta_pct, "sb": r.share_baseline, "se": r.share_experiment,
             "v": VERDICT_TEXT[r.change.verdict] if r.change else "—", "where": r.presence} for r in d.breakdown]
    return Section("phases", "Phases and regions", table(cols, rows, table_id="breakdown-table"),
                   note="mean time per measured step, rank 0, sorted by absolute delta; click a header to sort")


def _delta_cols(device: bool, ops: bool) -> list[Col]:
    cols = [Col("name", "name", "text"), Col("component", "component", "text")]
    if ops:
        cols.append(Col("module", "module", "text"))
    cols += [Col("cb", "calls (b)"), Col("ce", "calls (e)")]
    if ops or not device:
        cols += [Col("sb", "self CPU (b)", "ns"), Col("se", "self CPU (e)", "ns")]
    if ops:
        cols += [Col("tb", "total CPU (b)", "ns"), Col("te", "total CPU (e)", "ns")]
    if device or ops:
        cols += [Col("db", "device (b)", "ns"), Col("de", "device (e)", "ns")]
    return [*cols, Col("delta", "delta", "ns"), Col("pct", "delta %", "%"), Col("where", "present", "text")]


def _delta_rows(rows: Sequence[DeltaRow]) -> list[dict[str, Any]]:
    short = shorten_names([r.name for r in rows], NAME_WIDTH)
    return [{"name": n, "component": r.component, "module": r.module or "—", "cb": r.calls_baseline,
             "ce": r.calls_experiment, "sb": r.self_baseline, "se": r.self_experiment, "tb": r.total_baseline,
             "te": r.total_experiment, "db": r.device_baseline, "de": r.device_experiment, "delta": r.delta,
             "pct": r.delta_pct, "where": r.presence} for n, r in zip(short, rows, strict=True)]


NAME_WIDTH = 48
"""Characters an operator or kernel name keeps in the tables (the full name is on hover)."""


def _full_names(table_id: str, rows: Sequence[DeltaRow]) -> str:
    """The full names of a table's rows, in row order, for the hover titles (see JS)."""
    return (f'<script type="application/json" class="ss-fullnames" data-table="{esc(table_id)}">'
            f"{json_for_script([r.name for r in rows])}</script>")


def trace_sections(td: TraceDiff) -> list[Section]:
    unit = "per profiled step" if td.per_step else "window totals"
    device = td.time_kind == "gpu"
    out = [Section("components", "Components", table(_delta_cols(device, False), _delta_rows(td.components),
                                                     table_id="components-table"),
                   note=f"{'GPU kernel' if device else 'CPU self'} time {unit}, rank {td.rank_baseline} vs "
                        f"rank {td.rank_experiment}")]
    if td.modules:
        cols = [Col("name", "module", "text"), Col("type", "type", "text"), Col("b", "baseline", "ns"),
                Col("e", "experiment", "ns"), Col("delta", "delta", "ns"), Col("pct", "delta %", "%"),
                Col("where", "present", "text")]
        rows = [{"_id": m.path, "_depth": m.depth, "name": m.name, "type": m.type, "b": m.baseline_ns,
                 "e": m.experiment_ns, "delta": m.delta_ns, "pct": m.delta_pct, "where": m.presence}
                for m in td.modules]
        sim = f"; tree similarity {td.module_overlap:.0%}" if td.module_overlap is not None else ""
        out.append(Section("modules", "Module tree", table(cols, rows, table_id="modules-table", tree=True),
                           note=f"{td.time_kind.upper()} time {unit}, aligned by module path{sim}; ▾ collapses"))
    if td.operators:
        ops_device = td.operators[0].sort_key == "device"
        out.append(Section("operators", "Operators", table(_delta_cols(ops_device, True), _delta_rows(td.operators),
                                                           table_id="operators-table", filter_box=True)
                           + _full_names("operators-table", td.operators),
                           note=f"{unit}; delta of {'device' if ops_device else 'self CPU'} time; type a component "
                                "or module name in the filter box"))
    if td.kernels:
        out.append(Section("kernels", "Kernels", table(_delta_cols(True, False), _delta_rows(td.kernels),
                                                       table_id="kernels-table", filter_box=True)
                           + _full_names("kernels-table", td.kernels),
                           note=f"GPU time {unit}; type a component in the filter box"))
    return out


def metrics_section(d: RunDiff) -> Section | None:
    if not d.system and not d.logged:
        return None
    from stepscope.report import format as f

    rows = [{"name": words(r.name) if r.kind == "system" else r.name, "kind": r.kind,
             "b": f.metric_value(r.name, r.baseline_mean) if r.kind == "system" else f.number(r.baseline_mean),
             "e": f.metric_value(r.name, r.experiment_mean) if r.kind == "system" else f.number(r.experiment_mean),
             "pb": f.metric_value(r.name, r.baseline_peak) if r.kind == "system" else f.number(r.baseline_peak),
             "pe": f.metric_value(r.name, r.experiment_peak) if r.kind == "system" else f.number(r.experiment_peak),
             "pct": r.delta_pct} for r in (*d.logged, *d.system)]
    cols = [Col("name", "metric", "text"), Col("kind", "kind", "text"), Col("b", "mean / last (b)", "text"),
            Col("e", "mean / last (e)", "text"), Col("pb", "peak / min (b)", "text"),
            Col("pe", "peak / min (e)", "text"), Col("pct", "delta %", "%")]
    return Section("metrics", "System and logged metrics", table(cols, rows, table_id="metrics-table"),
                   note="rank 0; system: mean and peak of samples; logged: last and minimum value")


CSS = """.ss-findings{margin:.5em 0 1em 1.2em}.ss-findings li{margin:.2em 0}
.ss-verdict{padding:0 .4em;border-radius:3px;font-size:.85em}.ss-verdict.slower{background:#fdd;color:#900}
.ss-verdict.faster{background:#dfd;color:#060}.ss-verdict.no_significant_change{background:#eee;color:#555}
.ss-verdict.inconclusive{background:#fefcbf;color:#744210}
#operators-table td.text:first-child,#kernels-table td.text:first-child,#components-table td.text:first-child{
min-width:12em;max-width:26em;font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px}
#operators-table,#kernels-table{width:auto;min-width:100%}"""

JS = """(function(){document.querySelectorAll('script.ss-fullnames').forEach(function(s){
var t=document.getElementById(s.getAttribute('data-table'));if(!t)return;var names=JSON.parse(s.textContent);
Array.prototype.forEach.call(t.tBodies[0].rows,function(r,i){var c=r.cells[0];if(c&&names[i]!==undefined){
c.title=names[i];c.setAttribute('data-full',names[i]);}});});})();"""

BADGE = {Verdict.SLOWER: ("slower", "verdict-slower"), Verdict.FASTER: ("faster", "verdict-faster"),
         Verdict.NO_SIGNIFICANT_CHANGE: ("no change", "verdict-no-change"),
         Verdict.INCONCLUSIVE: ("inconclusive", "verdict-inconclusive")}
"""The diff page's header badge: the step-time verdict in its own words and colours (never run states)."""


def render_diff(d: RunDiff) -> str:
    """The whole page as one self-contained HTML string."""
    sections = [verdict_section(d), overview_section(d), trends_section(d), breakdown_section(d)]
    if d.traces is not None:
        sections += trace_sections(d.traces)
    else:
        sections.append(Section("traces", "Modules, operators and kernels",
                                paragraph(d.trace_note or "not profiled")))
    sections.append(metrics_section(d))
    b, e = d.baseline, d.experiment
    title = f"stepscope diff: {b.run_id or b.label} vs {e.run_id or e.label}"
    sub = f"baseline {b.label} ({b.kind}) · experiment {e.label} ({e.kind})"
    head = next((x for x in d.findings if x.kind == "step_time"), None)
    badge, badge_class = (None, None) if head is None or head.verdict is None else BADGE[head.verdict]
    return render_page(title, [s for s in sections if s is not None], subtitle=sub, badge=badge,
                       badge_class=badge_class, footer="stepscope diff — schema stepscope.diff/1", extra_css=CSS,
                       extra_js=JS)
