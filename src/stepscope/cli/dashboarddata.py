"""The dashboard's Site from the store (used by `dashboard build` and `serve`): every run, and for every run
name its tracked metrics' histories with their detected steps checked; the full report and diff pages of
indexed runs."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from stepscope.analyze.run.lost import partial_label
from stepscope.analyze.runs.history import RunPoint, metric_history, tracked_metrics
from stepscope.analyze.runs.historysteps import THRESHOLD, StepKind, history_steps
from stepscope.cli.historydata import default_name, point_from_row
from stepscope.report.dashboard.site import DashRun, NameView, Site

if TYPE_CHECKING:
    from stepscope.app import RunAnalysis
    from stepscope.store import Store


def name_view(name: str, points: list[RunPoint], *, threshold: float) -> NameView:
    """One run name's histories (oldest run first in ``points``) and their checked steps."""
    histories = tuple(metric_history(points, m) for m in tracked_metrics(points))
    steps = tuple(s for h in histories for s in history_steps(h, threshold=threshold))
    return NameView(name=name, runs=len(points), histories=histories, steps=steps)


def build_site(store: Store, *, name: str | None = None, report_ids: set[str] | None = None,
               threshold: float = THRESHOLD, live: bool = False) -> Site:
    """Every run (newest first) and a view per run name; ``name`` (checked; default: the newest run's) comes
    first and is what the pages show by default. ``report_ids``: runs that will have a full report page.
    ``live``: a row the index still calls running is checked against its run directory (Store.rows)."""
    rows = store.rows() if live else store.index.runs()
    metrics = store.index.metrics()
    reported = report_ids or set()
    runs = tuple(DashRun(id=r.id, name=r.name,
                         status=partial_label(r.status, metrics.get(r.id, {}).get("records_lost")),  # lost records
                         start_s=r.start_ns / 1e9, commit=r.git_commit,
                         branch=r.git_branch, dirty=bool(r.git_dirty), subject=r.git_subject, group=r.grp,
                         host=r.host, params=r.params, tags=r.tags, metrics=metrics.get(r.id, {}),
                         has_report=r.id in reported) for r in rows)
    first = default_name(store, name)
    by_name: dict[str, list[RunPoint]] = {}
    for r in reversed(rows):
        by_name.setdefault(r.name, []).append(point_from_row(r, metrics.get(r.id, {})))
    order = sorted(by_name, key=lambda n: (n != first, n))
    views = tuple(name_view(n, by_name[n], threshold=threshold) for n in order)
    counts = Counter(r.name for r in rows)
    note = (f"{len(runs)} runs · {len(counts)} run name(s) · showing {first!r} first" if first else "no runs yet")
    return Site(runs=runs, names=views, note=note, threshold=threshold)


def diff_pairs(site: Site, limit: int = 50) -> list[tuple[str, str]]:
    """(last good run, first changed run) around each confirmed step (regressions and improvements), newest
    first, at most ``limit``: the diff pages a static build renders."""
    steps = sorted((s for v in site.names for s in v.steps if s.kind is not StepKind.NOT_CONFIRMED),
                   key=lambda s: -s.time_s)
    pairs = dict.fromkeys((s.last_good_run, s.first_bad_run) for s in steps)
    return list(pairs)[:limit]


# ------------------------------------------------------------------------------------ report and diff pages


def indexed_analysis(store: Store, run_id: str) -> RunAnalysis:
    """The analysis of an indexed run by its exact id: its run directory read directly (Store.load would
    first resolve the id against every indexed row, 0.3 s at 10,000 runs), the manifest's id checked."""
    from stepscope.app import RunAnalysis
    from stepscope.errors import StoreFormatError
    from stepscope.store.rundir import read_run

    run_dir = store.run_path(run_id)
    data = read_run(run_dir)
    if data.run.id != run_id:
        raise StoreFormatError(f"{run_dir / 'manifest.json'}: the manifest names another run — the file is damaged")
    return RunAnalysis(data)


def render_report(store: Store, run_id: str) -> str | None:
    """A run's full HTML report (the `stepscope report` renderer), or None when it cannot be rendered."""
    try:
        from stepscope.cli.verify import stored_outcomes
        from stepscope.report.html.run_report import render_run_report

        return render_run_report(indexed_analysis(store, run_id), stored_outcomes(store, run_id))
    except Exception:  # a damaged or synthetic run dir: the dashboard links to its index page instead
        return None


def render_diff_page(store: Store, base: str, exp: str, *, threshold: float = THRESHOLD) -> str | None:
    """The `stepscope diff BASE EXP --confidence 0.98 --threshold PCT --html` page of two sides (a run id, or a
    commit's runs joined by commas): the regressions page's level and ``threshold``, so that a step's row and the
    diff it links decide through one rule at one setting (``cli.diff.pair_diff``, the CLI's sides and noise
    floor); None when a run cannot be loaded."""
    from stepscope.cli.diff import pair_diff
    from stepscope.report.html.diff import render_diff

    try:
        return render_diff(pair_diff(store, base.split(","), exp.split(","), settings=gate_settings(threshold),
                                     load=lambda i: indexed_analysis(store, i)))
    except Exception:  # a damaged or synthetic run dir: the compare page keeps the metrics and the command
        return None


def gate_settings(threshold: float) -> Any:
    """`diff` settings at the gate's level (98%) and ``threshold``: the regressions page's and `check`'s."""
    from stepscope.analyze.diff import DiffSettings
    from stepscope.analyze.runs.regression import GATE_CONFIDENCE

    return DiffSettings(confidence=GATE_CONFIDENCE, threshold=threshold)
