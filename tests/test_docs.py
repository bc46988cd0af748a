"""The user docs read as documentation, not as a development log, and README's figures are the docs' figures.

Every page under docs/ and README.md: no numbered work pass ("fifth pass"), no development branch, no commit
hash, no deadline, no engineers (measurement history lives in benchmarks/RESULTS.md, changes in CHANGELOG.md).
README's overhead figures (µs) are the values of the current-figures table in docs/metrics.md, "Overhead", and
README quotes no test-suite size or duration of its own (docs/ci.md holds them, and they go stale there only).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]

_ORDINALS = ("first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|thirteenth|"
             "fourteenth|fifteenth|sixteenth|seventeenth|eighteenth|nineteenth|twentieth")
DIARY = {
    "a numbered pass": re.compile(rf"\b(?:{_ORDINALS}|\d+(?:st|nd|rd|th))\s+pass(?:es)?\b", re.IGNORECASE),
    "a branch": re.compile(r"\bbranch(?:es)?\s+[`'\"][\w./-]+[`'\"]", re.IGNORECASE),
    # 7-40 hex digits with at least one digit and one letter, not part of a word or an id like bench-1a2b3c4d
    # (and not a duration such as `--since 99999999d`)
    "a commit hash": re.compile(
        r"(?<![\w-])(?!\d+[dhmsw]\b)(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![\w-])"),
    "a deadline": re.compile(r"\b(?:the|a|our|this) deadline\b|\bdone-when\b", re.IGNORECASE),
    "engineers": re.compile(r"\bengineers?\b", re.IGNORECASE),
    "a date": re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b"),
}
DATED_ELSEWHERE = {"frameworks.md"}
"""Pages whose dated measurement tables another change moves to benchmarks/RESULTS.md; the date check skips
them until then (every other check applies to them)."""


def diary_lines(text: str, *, dates: bool = True) -> list[tuple[int, str, str]]:
    """(line number, what, line) of every line of TEXT that reads as a development log."""
    found = []
    for no, line in enumerate(text.splitlines(), 1):
        for what, pattern in DIARY.items():
            if (dates or what != "a date") and pattern.search(line):
                found.append((no, what, line.strip()[:160]))
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_page_is_not_a_diary(page: Path) -> None:
    found = diary_lines(page.read_text(), dates=page.name not in DATED_ELSEWHERE)
    assert found == [], "\n".join(f"{page.name}:{no}: {what}: {line}" for no, what, line in found)


def test_diary_patterns_catch_what_they_name() -> None:
    """The patterns find the phrases the docs once held, and leave alone the ones a user page needs."""
    log = ("Latest, the **Fifteenth pass** (2026-11-28/29 night)\nbranch `hooksc`, commit 249d1c6\n"
           "before = the tree at `caf53a9`\nthe deadline allowed one pass\nThe done-when target\n"
           "8 other engineers at work\nthe 3rd pass")
    assert {what for _, what, _ in diary_lines(log)} == set(DIARY)
    assert len(diary_lines(log)) == 9  # the first and second lines name two things each
    fine = ("A pass is an iterator that yields a second batch\n`--baseline REF`: a commit, tag, branch or run\n"
            "stepscope diff bench-1a2b3c4d:A bench-1a2b3c4d:B\n1000000 events, absolute deadlines, --since 99999999d\n"
            "records the commit, branch and dirty flag")
    assert diary_lines(fine) == []


def current_figures() -> dict[str, str]:
    """docs/metrics.md's table of current overhead figures: measure -> value cell."""
    text = (ROOT / "docs" / "metrics.md").read_text()
    start = text.index("### Current figures")
    rows = {}
    for line in text[start:].splitlines()[1:]:
        if line.startswith("#"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) >= 2 and not set(cells[1]) <= set("-: "):
            rows[cells[0]] = cells[1]
    return rows


def _numbers(text: str) -> set[str]:
    """The numbers in TEXT as written, a leading + dropped (README's "7.9" is the docs' "+7.9")."""
    return {n.lstrip("+") for n in re.findall(r"[+-]?\d+(?:\.\d+)?", text.replace("−", "-"))}


def test_readme_overhead_figures_are_the_docs_current_figures() -> None:
    figures = current_figures()
    assert len(figures) >= 4, figures  # the hooks, the region (compiled and Python), start-up
    # the figures in µs (a count of calls or a start-up in s is another quantity, whatever its digits)
    docs_numbers = set().union(*(_numbers(v) for v in figures.values() if "µs" in v))
    readme = (ROOT / "README.md").read_text()
    number = r"[+−-]?\d+(?:\.\d+)?"
    quoted = re.findall(rf"((?:{number}\s*(?:to|–)\s*)*{number})\s*(µs|ns)\b", readme)
    assert quoted, "README quotes no overhead figure: expected the hooks' and the region's, from docs/metrics.md"
    for value, unit in quoted:
        for number in _numbers(value):
            assert number in docs_numbers, (
                f"README quotes {value} {unit}, not a current figure of docs/metrics.md: {figures}")


def test_readme_quotes_no_suite_size_or_duration() -> None:
    readme = (ROOT / "README.md").read_text()
    sizes = re.findall(r"\b\d[\d,]*\s+tests\b", readme)
    durations = re.findall(r"\b\d+\s*min\b(?:\s*\d+\s*s\b)?", readme)
    assert sizes == [] and durations == [], (
        f"README quotes {sizes + durations}: the suite's and the set-up's figures belong in docs/ci.md")


def test_cli_description_names_every_framework_observed() -> None:
    from stepscope.cli import DESCRIPTION

    first = DESCRIPTION.splitlines()[0]
    for name in ("PyTorch", "Keras", "TensorFlow", "JAX", "MPI"):
        assert name in first, first
