"""What `serve` sends a running run's open report page so it can redraw its charts (live.js): the rank-0
training steps after a cursor (with their phase times, for the stacked phases chart) and the logged metric rows
after another, read from the records so far, and the throughput chart's rolling-median window for the run as it
is now (the window a report rendered now would use: run_report.rolling_window of the training steps so far).

The cursors come from the page: ``after`` is the last step index its charts hold (-1 for none), ``metrics``
the number of metric rows they hold. The values match the report's charts (report/html/run_report.py
speed_section, run_sections.py metrics_section): a step's time is its end since rank 0's first step start,
in seconds; a metric's time is since rank 0's stream start."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from stepscope.analyze.run.steps import PHASES
from stepscope.model.tables import RunData
from stepscope.report.html.run_report import rolling_window

MAX_ROWS = 10_000
"""Steps (and metric rows) per answer; the page asks again for the rest on its next poll."""


class CursorError(ValueError):
    """A cursor that is not a whole number in range (the server answers 400 with its one line)."""


@dataclass(frozen=True, slots=True)
class Cursor:
    after: int = -1
    """The last step index the page holds (-1: none)."""
    metrics: int = 0
    """Metric rows the page holds."""


def parse_cursor(query: Mapping[str, list[str]]) -> Cursor:
    """The cursor of a query string's ``after`` and ``metrics`` (each at most once, whole numbers)."""
    values: dict[str, int] = {}
    for key, low in (("after", -1), ("metrics", 0)):
        got = query.get(key, [])
        if len(got) > 1:
            raise CursorError(f"bad cursor: {key} given {len(got)} times — give it once")
        if not got:
            continue
        text = got[0]
        if not text.lstrip("-").isdigit() or len(text) > 18 or int(text) < low:
            raise CursorError(f"bad cursor: {key}={text[:40]!r} — give a whole number from {low}")
        values[key] = int(text)
    return Cursor(**values)


def records_after(data: RunData, cursor: Cursor) -> dict[str, Any]:
    """The run's status, its rank-0 training steps with an index above ``cursor.after`` and its rank-0
    metric rows from ``cursor.metrics`` on (each at most MAX_ROWS: ``more`` says some are left), with the
    cursors for the next ask. ``steps.phases`` holds each phase's time per step (None: not measured), as the
    stacked phases chart draws them; ``steps.window`` the throughput's rolling-median window for all the
    training steps so far (0: none)."""
    out: dict[str, Any] = {"id": data.run.id, "status": data.run.status.value, "more": False,
                           "steps": {"index": [], "t_s": [], "duration_ns": [], "samples": [],
                                     "phases": {p: [] for p in PHASES}, "window": 0, "next": cursor.after},
                           "metrics": {"name": [], "step": [], "t_s": [], "value": [], "next": cursor.metrics}}
    if not data.ranks:
        return out
    r0 = data.ranks[0]
    steps = r0.steps
    if len(steps):
        is_train = steps["phase"] == 0
        train = steps.take(is_train & (steps["index"] > cursor.after))
        out["more"] = len(train) > MAX_ROWS
        train = train.take(np.arange(min(len(train), MAX_ROWS)))
        first = int(steps["start_ns"][0])
        out["steps"] = {"index": train["index"].astype(np.int64).tolist(),
                        "t_s": ((train["end_ns"] - first) / 1e9).tolist(),
                        "duration_ns": train.duration_ns.astype(np.float64).tolist(),
                        "samples": train["samples"].astype(np.float64).tolist(),
                        "phases": {p: train[f"{p}_ns"].astype(np.float64).tolist() for p in PHASES},
                        "window": rolling_window(int(np.count_nonzero(is_train))),
                        "next": int(train["index"][-1]) if len(train) else cursor.after}
    mt = r0.metrics
    if len(mt) > cursor.metrics:
        rows = np.arange(cursor.metrics, min(len(mt), cursor.metrics + MAX_ROWS))
        out["more"] = out["more"] or len(mt) > int(rows[-1]) + 1
        t0 = int(r0.stream.start_ns)
        out["metrics"] = {"name": [mt.names[int(c)] for c in mt["name_code"][rows]],
                          "step": mt["step"][rows].astype(np.int64).tolist(),
                          "t_s": ((mt["t_ns"][rows] - t0) / 1e9).tolist(),
                          "value": mt["value"][rows].astype(np.float64).tolist(),
                          "next": int(rows[-1]) + 1}
    return out
