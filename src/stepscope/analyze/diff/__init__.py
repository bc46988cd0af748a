"""Compare two runs (or trace sets): overview with verdicts, phases and regions, module tree, operators,
kernels, trends, system and logged metrics. Pure functions over loaded inputs; see docs/diff.md.

Entry point: ``diff(DiffSide(label, data=RunData, traces=...), DiffSide(...), settings=DiffSettings())``
returns a :class:`RunDiff` (``to_dict()`` for JSON, schema ``stepscope.diff/1``).
"""

from stepscope.analyze.diff.compare import DIFF_SCHEMA, Finding, RankRow, RunDiff, SideInfo, diff
from stepscope.analyze.diff.sides import DiffSide
from stepscope.analyze.diff.significance import Change, DiffSettings, Verdict, compare_samples

__all__ = [
           "DIFF_SCHEMA",
           "Change",
           "DiffSettings",
           "DiffSide",
           "Finding",
           "RankRow",
           "RunDiff",
           "SideInfo",
           "Verdict",
           "compare_samples",
           "diff",
]
