"""docs/cli.md is the parser's own help: regenerate it with `python -m stepscope.cli.reference > docs/cli.md`."""

from __future__ import annotations

from pathlib import Path

from stepscope.cli.reference import markdown

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def test_cli_reference_is_current():
    assert DOC.read_text() == markdown(), "docs/cli.md is stale: python -m stepscope.cli.reference > docs/cli.md"


def test_every_command_has_help_and_a_description():
    text = markdown()
    from stepscope.cli import COMMANDS

    for spec in COMMANDS:
        module = spec.split(":")[0].rsplit(".", 1)[1]
        name = {"databench": "data-bench", "imports": "import"}.get(module, module)
        assert f"## stepscope {name}\n" in text, name
