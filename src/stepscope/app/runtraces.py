"""The file reading behind a run's analysis (analyze/ stays pure): a run's trace artifacts parsed into
EventTables by rank, and the advisor's input bundle. Problems with traces are named, never fatal."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from stepscope.analyze.advisor import AdvisorInput, CommFacts, TraceFacts, comm_facts, trace_facts
from stepscope.analyze.summary import RunSummary
from stepscope.errors import StepscopeError
from stepscope.model.events import EventTable
from stepscope.model.tables import RunData


@dataclass(frozen=True, slots=True)
class RunTraces:
    """Parsed trace artifacts of a run, by rank, with one line per trace that is missing or unreadable."""

    tables: dict[int, EventTable]
    facts: tuple[TraceFacts, ...]
    problems: tuple[str, ...]
    comm: CommFacts | None = None
    """The run's torch.distributed calls (not a trace, but the advisor reads them with the traces)."""


def expected_traces(data: RunData) -> dict[int, str]:
    """Trace paths (relative to the run directory) that the run recorded or should have, by rank."""
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


def load_traces(data: RunData) -> RunTraces:
    from stepscope.traces.kineto import read_trace

    tables: dict[int, EventTable] = {}
    problems = []
    for rank, rel in sorted(expected_traces(data).items()):
        path = Path(data.path) / rel
        if not path.is_file():
            problems.append(f"rank {rank}: trace artifact {rel} is missing (deleted?) — kernel analyses skipped")
            continue
        try:
            tables[rank] = read_trace(path, rank=rank)
        except StepscopeError as e:
            problems.append(f"rank {rank}: trace artifact {rel} could not be read: {e}")
    facts = tuple(trace_facts(t) for t in tables.values())
    return RunTraces(tables=tables, facts=facts, problems=tuple(problems), comm=comm_facts(data))


def advisor_input(summary: RunSummary, traces: RunTraces | None) -> AdvisorInput:
    if traces is None:
        return AdvisorInput(summary=summary)
    return AdvisorInput(summary=summary, traces=traces.facts, trace_problems=traces.problems, comm=traces.comm)
