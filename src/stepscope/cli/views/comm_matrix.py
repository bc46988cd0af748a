"""`stepscope show RUN --comm-matrix`: rank x rank communication bytes and time, busiest pairs.

From the run's per-call communication records (CommTables); a run without any, but with profiler traces
(`--profile-steps` or `stepscope import`), gets the matrix of its traces' communication kernels.
"""

from __future__ import annotations

from stepscope.app import RunAnalysis
from stepscope.errors import UserError


def show_comm_matrix(ra: RunAnalysis, *, json: bool = False, width: int | None = None) -> int:
    from stepscope.analyze.ranks.commmatrix import CommMatrix, comm_matrix

    data = ra.data
    m: CommMatrix | None
    from stepscope.app.runtraces import trace_artifacts

    if not any(len(r.comm) for r in data.ranks) and trace_artifacts(data):
        from stepscope.executor.traceset import comm_matrix_from_traces

        m = comm_matrix_from_traces([str(p) for p in ra.trace_files])
        if len(m.ranks) < 2:
            raise UserError(f"run {data.run.id}: its traces name only rank {m.ranks[0]} and it recorded no "
                            "torch.distributed calls — a communication matrix needs two or more ranks")
    else:
        m = comm_matrix(data)
    if m is None:
        raise UserError(f"run {data.run.id} has {len(data.ranks)} rank stream(s): a communication matrix needs two "
                        "or more ranks — run the job with torchrun / mpirun")
    if json:
        from stepscope.cli.common import print_json

        print_json(m.to_dict())
        return 0
    from stepscope.report.commmatrix import comm_matrix_view
    from stepscope.report.terminal import console

    console(width=width).print(comm_matrix_view(m))
    return 0
