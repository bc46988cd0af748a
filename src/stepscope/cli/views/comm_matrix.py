"""`stepscope show RUN --comm-matrix`: rank x rank communication bytes and time, busiest pairs.

From the run's per-call communication records (CommTables); a run without any, but with profiler traces
(`--profile-steps` or `stepscope import`), gets the matrix of its traces' communication kernels.
"""

from __future__ import annotations

import argparse

from stepscope.analyze.summary import RunSummary
from stepscope.errors import UserError
from stepscope.model.tables import RunData


def show_comm_matrix(data: RunData, summary: RunSummary, args: argparse.Namespace) -> int:
    from stepscope.analyze.commmatrix import CommMatrix, comm_matrix

    m: CommMatrix | None
    has_traces = any(a.startswith("artifacts/traces/") for a in data.artifacts)
    if not any(len(r.comm) for r in data.ranks) and has_traces:
        from stepscope.cli.views.traces import run_trace_files
        from stepscope.executor.traceset import comm_matrix_from_traces

        m = comm_matrix_from_traces([str(p) for p in run_trace_files(data)])
        if len(m.ranks) < 2:
            raise UserError(f"run {data.run.id}: its traces name only rank {m.ranks[0]} and it recorded no "
                            "torch.distributed calls — a communication matrix needs two or more ranks")
    else:
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
