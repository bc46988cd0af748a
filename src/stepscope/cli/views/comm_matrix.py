"""`stepscope show RUN --comm-matrix`: rank x rank communication bytes and time, busiest pairs."""

from __future__ import annotations

import argparse

from stepscope.analyze.summary import RunSummary
from stepscope.errors import UserError
from stepscope.model.tables import RunData


def show_comm_matrix(data: RunData, summary: RunSummary, args: argparse.Namespace) -> int:
    from stepscope.analyze.commmatrix import comm_matrix

    m = comm_matrix(data)
    if m is None:
        raise UserError(f"run {data.run.id} has {len(data.ranks)} rank stream(s): a communication matrix needs two "
                        "or more ranks — run the job with torchrun / mpirun")
    if getattr(args, "json", False):
        from stepscope.cli.common import print_json

        print_json(m.to_dict())
        return 0
    from stepscope.report.commmatrix import comm_matrix_view
    from stepscope.report.terminal import console

    console(width=getattr(args, "width", None)).print(comm_matrix_view(m))
    return 0
