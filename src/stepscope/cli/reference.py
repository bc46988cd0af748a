"""The CLI reference (docs/cli.md), generated from the parser so it never drifts from `--help`.

    python -m stepscope.cli.reference > docs/cli.md
"""

from __future__ import annotations

import argparse
import os

from stepscope.cli import build_parser, load_commands


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def markdown() -> str:
    os.environ["COLUMNS"] = "100"  # argparse wraps help to the terminal: fix it for a stable file
    parser = build_parser(load_commands())
    parser.prog = "stepscope"
    out = ["# CLI reference", "", "Generated from the parser (`python -m stepscope.cli.reference > docs/cli.md`);",
           "`stepscope --help` and `stepscope COMMAND --help` print the same.", "",
           "```", parser.format_help().rstrip(), "```", ""]
    for name, sub in _subparsers(parser).items():
        out += [f"## stepscope {name}", "", "```", sub.format_help().rstrip(), "```", ""]
        for subname, subsub in _subparsers(sub).items():
            out += [f"### stepscope {name} {subname}", "", "```", subsub.format_help().rstrip(), "```", ""]
    return "\n".join(out)


if __name__ == "__main__":
    print(markdown(), end="")
