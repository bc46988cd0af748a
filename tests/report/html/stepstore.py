"""A real store holding one completed run whose step times are given (written through the store's own writers,
as tests/report/dashboard/dashstore.py does): the step times a busy host produced, reproduced exactly."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

T0 = 1_709_294_400_000_000_000  # 2024-03-01T12:00Z


def write_steps_run(root: Path, step_ns: Sequence[int], samples: float, *, name: str = "busy") -> str:
    """One completed run of ``len(step_ns)`` back-to-back steps of ``samples`` samples each, in a new store at
    ``root``; returns its id."""
    from stepscope.analyze.run.summary import index_metrics, summarize_run
    from stepscope.model.run import HostInfo, RankStream, Run, RunStatus, SoftwareInfo
    from stepscope.store import open_store
    from stepscope.store.rundir import RANKS, RecordWriter, rank_file_name, stream_header, write_end, write_manifest

    st = open_store(root, create=True)
    try:
        durations = np.asarray(step_ns, dtype=np.int64)
        ends = T0 + np.cumsum(durations)
        starts = np.concatenate([[T0], ends[:-1]])
        n = len(durations)
        run_id, run_dir = st.new_run_dir()
        stream = RankStream(rank=0, local_rank=0, world_size=1, role=None, pid=1000, host="h", start_ns=T0,
                            end_ns=int(ends[-1]), step_source="api")
        run = Run(id=run_id, name=name, status=RunStatus.RUNNING, start_ns=T0, end_ns=None,
                  command=("python", "train.py"), cwd="/repo", exit_code=None, git=None,
                  host=HostInfo("h", "linux", None, 2, 2, None), software=SoftwareInfo("3.11", "0.1.0"),
                  world_size=1, streams=(stream,), options={"warmup_steps": 0})
        write_manifest(run_dir, run)
        (run_dir / RANKS).mkdir(exist_ok=True)
        w = RecordWriter(run_dir / RANKS / rank_file_name(0))
        w.append([stream_header(stream),
                  {"kind": "steps", "cols": {"index": list(range(n)), "start_ns": starts.tolist(),
                                             "end_ns": ends.tolist(), "samples": [float(samples)] * n}},
                  {"kind": "end", "end_ns": int(ends[-1]), "reason": "exit", "steps": n}])
        w.close()
        write_end(run_dir, status=RunStatus.COMPLETED, end_ns=int(ends[-1]), exit_code=0)
        loaded = st.load(run_id)
        st.index.upsert_run(loaded.run, str(run_dir), index_metrics(summarize_run(loaded)))
        return str(run_id)
    finally:
        st.close()
