"""A plain clone is enough: no test, benchmark or example reads files outside the repository."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import ROOT, TRACES

OUTSIDE = re.compile(r"""["']\.\.["']\s*/\s*["']shared["']|\.\./shared""")


def test_no_source_reaches_outside_the_repository() -> None:
    offenders = []
    for folder in ("tests", "benchmarks", "examples", "src"):
        for path in (ROOT / folder).rglob("*.py"):
            if path == Path(__file__).resolve():
                continue
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if OUTSIDE.search(line):
                    offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert offenders == []


def test_trace_fixtures_live_in_the_repository_with_their_licence() -> None:
    assert TRACES.is_relative_to(ROOT)
    assert (TRACES / "LICENSE-HolisticTraceAnalysis").is_file()
    assert (TRACES / "README.md").is_file()
    traces = sorted(p.relative_to(TRACES).as_posix() for p in TRACES.rglob("*.json.gz")
                    if not p.is_relative_to(TRACES / "xla"))  # xla/: TensorFlow / JAX profiles made here
    assert len(traces) == 10, traces
