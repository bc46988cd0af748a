"""``DiffView``: two runs compared as ``stepscope diff`` compares them, with its overview inline in Jupyter."""

from __future__ import annotations

from typing import Any

from stepscope.analyze.diff import DiffSettings, DiffSide, RunDiff, diff
from stepscope.app.runanalysis import RunAnalysis
from stepscope.notebook.frames import require_pandas
from stepscope.notebook.html import diff_overview


class DiffView:
    """A RunDiff (``result``; ``to_dict()`` is the JSON of ``stepscope diff --json``), with DataFrames of its
    overview and findings and an inline HTML overview."""

    def __init__(self, result: RunDiff) -> None:
        self.result = result

    def overview_df(self) -> Any:
        """The headline numbers of both sides: key, label, unit, scope, baseline, experiment, delta, delta %,
        verdict."""
        pd = require_pandas()
        rows = [{"key": r.key, "label": r.label, "unit": r.unit, "scope": r.scope, "baseline": r.baseline,
                 "experiment": r.experiment, "delta": r.delta, "delta_pct": r.delta_pct,
                 "verdict": r.change.verdict.value if r.change is not None else None} for r in self.result.overview]
        return pd.DataFrame(rows, columns=["key", "label", "unit", "scope", "baseline", "experiment", "delta",
                                           "delta_pct", "verdict"])

    def findings_df(self) -> Any:
        """What changed, in report order: kind, name, unit, baseline, experiment, delta, delta %, verdict, and
        baseline_text / experiment_text: a set-up difference's values (kind "setup": command, parameter,
        device ...) as text, where the numeric columns are NaN."""
        pd = require_pandas()
        cols = ["kind", "name", "unit", "baseline", "experiment", "delta", "delta_pct", "verdict", "baseline_text",
                "experiment_text"]
        rows = [{c: getattr(f, c) for c in cols} | {"verdict": f.verdict.value if f.verdict else None}
                for f in self.result.findings]
        df = pd.DataFrame(rows, columns=cols)
        for c in ("baseline", "experiment", "delta", "delta_pct"):  # numbers stay float even when all are NaN
            df[c] = df[c].astype("float64")
        return df

    def _repr_html_(self) -> str:
        return diff_repr_html(self.result)


def diff_repr_html(result: RunDiff) -> str:
    """The inline Jupyter view of a RunDiff (bind it as ``RunDiff._repr_html_``): the sides, the headline
    verdict, the overview rows and the first findings."""
    return diff_overview(result)


def side(ra: RunAnalysis) -> DiffSide:
    """A diff side of an analysed run: its lowest rank's profiled window, from the traces already read."""
    from stepscope.analyze.diff.engine import analyze_window

    tables = ra.traces.tables
    window = analyze_window(tables[min(tables)]) if tables else None
    note = None if tables else "; ".join(ra.traces.problems) or None
    r = ra.data.run
    return DiffSide(label=f"{r.id} {r.name}", data=ra.data, traces=window, trace_note=note, warmup=ra.warmup)


def diff_runs(base: RunAnalysis, exp: RunAnalysis, **settings: Any) -> DiffView:
    return DiffView(diff(side(base), side(exp), settings=DiffSettings(**settings)))
