"""The `stepscope` command: a registry of subcommands and one error boundary.

Each subcommand is a module with a class carrying ``name``, ``help``, ``add_arguments(parser)`` and
``run(args) -> int``. Adding a subcommand means adding a module and one line to ``COMMANDS``.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from typing import Any, Protocol

from stepscope.errors import StepscopeError, UserError


class Command(Protocol):
    name: str
    help: str

    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


COMMANDS: list[str] = [
    "stepscope.cli.run:RunCommand",
    "stepscope.cli.databench:DataBenchCommand",
    "stepscope.cli.bench:BenchCommand",
    "stepscope.cli.sweep:SweepCommand",
    "stepscope.cli.tune:TuneCommand",
    "stepscope.cli.ls:LsCommand",
    "stepscope.cli.show:ShowCommand",
    "stepscope.cli.report:ReportCommand",
    "stepscope.cli.advise:AdviseCommand",
    "stepscope.cli.export:ExportCommand",
    "stepscope.cli.diff:DiffCommand",
    "stepscope.cli.history:HistoryCommand",
    "stepscope.cli.check:CheckCommand",
    "stepscope.cli.dashboard:DashboardCommand",
    "stepscope.cli.serve:ServeCommand",
    "stepscope.cli.scaling:ScalingCommand",
    "stepscope.cli.trace:TraceCommand",
    "stepscope.cli.imports:ImportCommand",
    "stepscope.cli.rm:RmCommand",
    "stepscope.cli.store:StoreCommand",
    "stepscope.cli.top:TopCommand",
]
"""module:Class of every subcommand, in the order `stepscope --help` lists them."""

DESCRIPTION = """\
stepscope observes PyTorch, Keras / TensorFlow, JAX and MPI training runs, stores them, and explains
where the time goes.

observe      stepscope run -- python train.py           (also torchrun / mpirun; --profile-steps N)
             stepscope data-bench -- python train.py    the input pipeline alone
             stepscope bench --repeat 5 -- ...          repeated runs for history and the CI gate
             stepscope sweep --param k=1,2 -- ... {k}   a grid of settings
             stepscope tune -- python train.py           search threads, loader, --param for the fastest
look         stepscope ls | show RUN | report RUN | advise RUN | export RUN
             stepscope show RUN --ranks | --traces | --host | --comm-matrix
compare      stepscope diff BASE EXP                     runs or trace folders
track        stepscope history | check --baseline main | dashboard build | serve
scale        stepscope scaling --tag study=weak1
traces       stepscope trace analyze|kernels|ops|comm-matrix|rules PATHS;  stepscope import RUN traces/

Runs are stored in ./.stepscope (--store or STEPSCOPE_HOME to change; --db or STEPSCOPE_DB for a
PostgreSQL index). A run is named by its id, a unique id prefix, its name, `latest` or `latest~N`.
`stepscope COMMAND --help` describes each command; docs/cli.md has them all.
"""


NAMES = {"databench": "data-bench", "imports": "import"}
"""Subcommands whose name is not their module's (every other one is named after its module)."""


def command_name(spec: str) -> str:
    """The name a subcommand is called by, from its ``module:Class`` alone (its module is not imported)."""
    module = spec.split(":")[0].rsplit(".", 1)[1]
    return NAMES.get(module, module)


def load_command(spec: str) -> Command:
    module, cls = spec.split(":")
    command: Command = getattr(importlib.import_module(module), cls)()
    return command


def load_commands(argv: list[str] | None = None) -> list[Command]:
    """Every subcommand; with ``argv`` naming one, only that one: each module imports what its command
    needs (analysis, rich, the web server), and `stepscope run` should not pay for `serve`'s imports."""
    if argv:
        named = [spec for spec in COMMANDS if command_name(spec) == argv[0]]
        if named:
            return [load_command(named[0])]
    return [load_command(spec) for spec in COMMANDS]


def build_parser(commands: list[Command]) -> argparse.ArgumentParser:
    from stepscope import __version__

    parser = argparse.ArgumentParser(prog="stepscope", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"stepscope {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    for cmd in commands:
        p = sub.add_parser(cmd.name, help=cmd.help, description=(cmd.__doc__ or cmd.help).strip(),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        cmd.add_arguments(p)
        p.set_defaults(_command=cmd)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse, call, and map errors to one line on stderr and an exit code."""
    logging.getLogger("stepscope").addHandler(logging.NullHandler())
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        commands = load_commands(argv)
        parser = build_parser(commands)
        args = parser.parse_args(argv)
        cmd: Any = getattr(args, "_command", None)
        if cmd is None:
            parser.print_help()
            return 2
        if getattr(args, "wide", False):  # every table of the command shows names whole (report/tables.py)
            from stepscope.report.tables import set_wide

            set_wide(True)
        return int(cmd.run(args))
    except UserError as e:
        print(f"stepscope: error: {e}", file=sys.stderr)
        return e.exit_code
    except StepscopeError as e:
        print(f"stepscope: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("stepscope: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


def entry() -> None:
    """Console-script entry point."""
    sys.exit(main())
