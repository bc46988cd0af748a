"""The file reading behind a run's analysis (analyze/ stays pure): the one place that finds a run's trace
artifacts, and their parsing into EventTables by rank. Problems with traces are named, never fatal."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from stepscope.errors import StepscopeError, UserError
from stepscope.model.events import EventTable
from stepscope.model.tables import RunData


@dataclass(frozen=True, slots=True)
class RunTraces:
    """Parsed trace artifacts of a run, by rank, with one line per trace that is missing or unreadable."""

    tables: dict[int, EventTable]
    problems: tuple[str, ...]


def trace_artifacts(data: RunData) -> dict[int, str]:
    """The run's trace artifacts by rank, as paths relative to the run directory: those its profiled window
    recorded (or should have: the file may be gone) and those attached with `stepscope import`. The only
    function that finds a run's traces; every consumer goes through it (via RunAnalysis)."""
    out: dict[int, str] = {}
    for r in data.ranks:
        for rec in r.extra.get("profile_window", []):
            if rec.get("trace"):
                out[r.stream.rank] = str(rec["trace"])
    for rel in data.artifacts:
        p = Path(rel)
        if p.parent.name == "traces" and p.name.endswith((".json", ".json.gz")):
            rank = "".join(ch for ch in p.name.split(".")[0] if ch.isdigit())
            out.setdefault(int(rank) if rank else 0, rel)
    return out


def trace_files(data: RunData) -> list[Path]:
    """The run's trace artifacts that exist, in rank order; a one-line error when there are none."""
    expected = trace_artifacts(data)
    files = [Path(data.path) / rel for _, rel in sorted(expected.items()) if (Path(data.path) / rel).is_file()]
    if files:
        return files
    if expected:
        raise UserError(f"run {data.run.id}: its profiled window's trace files are missing "
                        f"({', '.join(sorted(expected.values()))}) — they were deleted; re-record with "
                        "--profile-steps or attach traces with stepscope import")
    raise UserError(f"run {data.run.id} was not profiled — record a window with "
                    "`stepscope run --profile-steps 5 -- ...` or attach traces with `stepscope import RUN traces/`")


def missing_trace(rank: int, rel: str) -> str:
    return f"rank {rank}: trace artifact {rel} is missing (deleted?) — kernel analyses skipped"


def unreadable_trace(rank: int, rel: str, why: object) -> str:
    return f"rank {rank}: trace artifact {rel} could not be read: {why} — that rank's kernel analyses skipped"


MISFIT_LINES = 3
"""Past this many imported ranks that do not fit the run, their notes are said in one line."""


def load_traces(data: RunData) -> RunTraces:
    """Every trace artifact of the run, parsed; a missing or unreadable one is a line in ``problems``."""
    tables: dict[int, EventTable] = {}
    problems = []
    misfits: list[tuple[int, str]] = []
    for rank, rel in sorted(trace_artifacts(data).items()):
        path = Path(data.path) / rel
        if not path.is_file():
            problems.append(missing_trace(rank, rel))
            continue
        from stepscope.traces.kineto import read_trace  # (here: a run without traces never loads the reader)

        try:
            tables[rank] = read_trace(path, rank=rank)
        except (StepscopeError, OSError, ValueError) as e:
            problems.append(unreadable_trace(rank, rel, e))
        misfit = path.with_name(path.name.split(".")[0] + ".misfit.txt")  # app/importfit.py's note_path
        if misfit.is_file():  # `stepscope import --accept-misfit` attached a trace that does not fit the run
            misfits.append((rank, misfit.read_text(encoding="utf-8", errors="replace").strip()))
    if len(misfits) > MISFIT_LINES:  # a whole imported job: one line, not one per rank
        ranks = [r for r, _ in misfits]
        problems.append(f"{len(misfits)} imported ranks ({min(ranks)} to {max(ranks)}) do not fit the run; the "
                        f"first: {misfits[0][1]}")
    else:
        problems.extend(note for _, note in misfits)
    return RunTraces(tables=tables, problems=tuple(problems))
