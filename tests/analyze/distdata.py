"""Hand-built multi-rank runs for the distributed analyses: exact per-step timings, in memory or written
into a real store (manifest, rank record files, end record, SQL index) through the store's own writers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from stepscope.model.run import HostInfo, RankStream, Run, RunStatus, SoftwareInfo
from stepscope.model.tables import CommTable, MetricTable, RankData, RegionTable, RunData, SampleTable, StepTable

MS = 1_000_000
T0 = 1_700_000_000_000_000_000


def rank_data(rank: int, world: int, step_ms: list[float], *, comm_ms: list[float] | None = None,
              wait_ms: list[float] | None = None, samples: float = 8.0, epoch_len: int | None = None,
              complete: bool = True, role: str | None = None, comm_rows: dict[str, list[Any]] | None = None,
              metrics: list[tuple[float, float]] | None = None, start_ns: int = T0,
              cpu_wait_pct: float | None = None) -> RankData:
    """One rank: consecutive steps of the given durations (ms) from ``start_ns``; comm / data wait per step.
    metrics: (seconds after start, loss value) pairs logged as ``loss``. cpu_wait_pct: system samples at the
    start and end of the steps whose interval's main thread waited that share for a CPU."""
    dur = np.asarray(step_ms) * MS
    ends = start_ns + np.cumsum(dur).astype(np.int64)
    starts = np.concatenate([[start_ns], ends[:-1]]).astype(np.int64)
    n = len(step_ms)
    nan = [float("nan")] * n
    steps = StepTable.from_batches([{
        "index": list(range(n)), "start_ns": starts.tolist(), "end_ns": ends.tolist(), "samples": [samples] * n,
        "data_wait_ns": [w * MS for w in wait_ms] if wait_ms else nan,
        "comm_ns": [c * MS for c in comm_ms] if comm_ms else nan,
        "epoch": [i // epoch_len for i in range(n)] if epoch_len else [-1] * n,
    }])
    comm = CommTable.from_batches([comm_rows]) if comm_rows else CommTable.empty()
    mt = MetricTable.empty()
    if metrics:
        mt = MetricTable.from_batches([{"name": ["loss"] * len(metrics), "step": list(range(len(metrics))),
                                        "t_ns": [start_ns + int(t * 1e9) for t, _ in metrics],
                                        "value": [v for _, v in metrics]}])
    stream = RankStream(rank=rank, local_rank=rank, world_size=world, role=role, pid=1000 + rank, host="h",
                        start_ns=start_ns, end_ns=int(ends[-1]) if complete else None)
    samples = SampleTable(np.empty(0, "int64"))
    if cpu_wait_pct is not None:
        samples = SampleTable(np.asarray([start_ns, ends[-1]], dtype="int64"),
                              {"run_queue_wait_pct": np.asarray([np.nan, cpu_wait_pct]),
                               "main_thread_slices": np.asarray([np.nan, 100.0])})
    return RankData(stream=stream, steps=steps, regions=RegionTable.empty(), samples=samples, metrics=mt, comm=comm)


def run_data(ranks: list[RankData], *, run_id: str = "r1", command: tuple[str, ...] = ("python", "train.py"),
             status: RunStatus = RunStatus.COMPLETED, tags: dict[str, str] | None = None,
             options: dict[str, Any] | None = None) -> RunData:
    run = Run(id=run_id, name=run_id, status=status, start_ns=T0, end_ns=T0 + 10**10, command=command, cwd="/",
              exit_code=0 if status == RunStatus.COMPLETED else 1, git=None,
              host=HostInfo("h", "linux", None, 2, 2, None), software=SoftwareInfo("3.11", "0"),
              world_size=len(ranks), tags=dict(tags or {}), streams=tuple(r.stream for r in ranks),
              options=dict(options or {"comm_timing": True, "warmup_steps": 0}))
    return RunData(run=run, ranks=tuple(ranks), path="/nonexistent")


def write_run(store_root: Path, data: RunData) -> str:
    """Write ``data`` into a real store (created if needed) with the store's writers; returns the run id."""
    from stepscope.analyze.run.summary import index_metrics, summarize_run
    from stepscope.store import open_store
    from stepscope.store.rundir import RANKS, RecordWriter, rank_file_name, stream_header, write_end, write_manifest

    store = open_store(store_root, create=True)
    run_id, run_dir = store.new_run_dir()
    from dataclasses import replace

    run = replace(data.run, id=run_id, name=data.run.name)
    write_manifest(run_dir, replace(run, status=RunStatus.RUNNING, end_ns=None))
    (run_dir / RANKS).mkdir(exist_ok=True)
    for r in data.ranks:
        w = RecordWriter(run_dir / RANKS / rank_file_name(r.stream.rank))
        recs: list[dict[str, Any]] = [stream_header(r.stream)]
        cols = {k: v.tolist() for k, v in r.steps.cols.items()}
        recs.append({"kind": "steps", "cols": cols})
        if len(r.metrics):
            m = r.metrics
            recs.append({"kind": "metrics", "cols": {"name": m.column_strings(), "step": m["step"].tolist(),
                                                     "t_ns": m["t_ns"].tolist(), "value": m["value"].tolist()}})
        if len(r.samples.t_ns):
            recs.append({"kind": "samples", "cols": {"t_ns": r.samples.t_ns.tolist(), **{
                k: [None if v != v else v for v in c.tolist()] for k, c in r.samples.columns.items()}}})
        if r.stream.complete:
            recs.append({"kind": "end", "end_ns": r.stream.end_ns, "reason": "exit", "steps": len(r.steps)})
        w.append(recs)
        w.close()
    write_end(run_dir, status=run.status, end_ns=run.end_ns or T0, exit_code=run.exit_code)
    loaded = store.load(run_id)
    store.index.upsert_run(loaded.run, str(run_dir), index_metrics(summarize_run(loaded)))
    store.close()
    return run_id
