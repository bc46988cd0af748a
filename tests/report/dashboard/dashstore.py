"""Real stores for the dashboard's tests, written through the store's own writers (no training, no timing).

A run's step is a region "work" of ``work_ms`` plus 1 ms; each step wobbles by a fixed ±0.5% and the run as
a whole by a lognormal factor of ``RUN_NOISE`` (the between-run noise a real machine shows). So a history's
steps are the ones written into it, as decisive on a loaded machine as on a quiet one."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np

STEPS = 10
RUN_NOISE = 0.02
T0 = 1_709_294_400_000_000_000  # 2024-03-01T12:00Z
DAY_NS = 86_400 * 10**9


def sha(name: str, i: int) -> str:
    return hashlib.sha1(f"{name} commit {i}".encode()).hexdigest()


def write_run(st: Any, *, name: str, sha: str, subject: str, start_ns: int, work_ms: float, seed: int) -> str:
    """One completed run in the open store ``st``; returns its id."""
    from stepscope.analyze.run.summary import index_metrics, summarize_run
    from stepscope.model.run import GitInfo, HostInfo, RankStream, Run, RunStatus, SoftwareInfo
    from stepscope.store.rundir import RANKS, RecordWriter, rank_file_name, stream_header, write_end, write_manifest

    rng = np.random.default_rng(seed)
    factor = float(np.exp(rng.normal(0, RUN_NOISE)))
    work_ns = (work_ms * factor * 1e6 * (1 + rng.uniform(-0.005, 0.005, STEPS))).astype(np.int64)
    step_ns = work_ns + 1_000_000
    ends = start_ns + np.cumsum(step_ns)
    starts = np.concatenate([[start_ns], ends[:-1]])
    run_id, run_dir = st.new_run_dir()
    stream = RankStream(rank=0, local_rank=0, world_size=1, role=None, pid=1000, host="h", start_ns=start_ns,
                        end_ns=int(ends[-1]), step_source="api")
    run = Run(id=run_id, name=name, status=RunStatus.RUNNING, start_ns=start_ns, end_ns=None,
              command=("python", "train.py"), cwd="/repo", exit_code=None,
              git=GitInfo(sha, "main", False, start_ns / 1e9, subject),
              host=HostInfo("h", "linux", None, 2, 2, None), software=SoftwareInfo("3.11", "0.1.0"), world_size=1,
              streams=(stream,), options={"warmup_steps": 0})
    write_manifest(run_dir, run)
    (run_dir / RANKS).mkdir(exist_ok=True)
    w = RecordWriter(run_dir / RANKS / rank_file_name(0))
    w.append([stream_header(stream),
              {"kind": "steps", "cols": {"index": list(range(STEPS)), "start_ns": starts.tolist(),
                                         "end_ns": ends.tolist(), "samples": [1.0] * STEPS}},
              {"kind": "regions", "cols": {"path": ["work"] * STEPS, "step": list(range(STEPS)),
                                           "start_ns": (starts + 500_000).tolist(), "duration_ns": work_ns.tolist(),
                                           "depth": [0] * STEPS}},
              {"kind": "end", "end_ns": int(ends[-1]), "reason": "exit", "steps": STEPS}])
    w.close()
    write_end(run_dir, status=RunStatus.COMPLETED, end_ns=int(ends[-1]), exit_code=0)
    loaded = st.load(run_id)
    st.index.upsert_run(loaded.run, str(run_dir), index_metrics(summarize_run(loaded)))
    return str(run_id)


def write_history(root: Path, name: str, *, commits: int, repeats: int, work_ms: float = 25.0,
                  factor_from: int | None = None, factor: float = 1.0, seed: int = 0) -> list[str]:
    """``commits`` commits of runs named ``name``, one a day from 2024-03-01, ``repeats`` runs each; from commit
    ``factor_from`` on the work takes ``factor`` times longer. Returns the commits' shas."""
    from stepscope.store import open_store

    st = open_store(root, create=True)
    shas = [sha(name, i) for i in range(commits)]
    try:
        for i, s in enumerate(shas):
            slow = factor_from is not None and i >= factor_from
            subject = f"make work {factor - 1:.0%} slower" if factor_from == i else f"tidy {i}"
            for r in range(repeats):
                write_run(st, name=name, sha=s, subject=subject, start_ns=T0 + i * DAY_NS + r * 60 * 10**9,
                          work_ms=work_ms * (factor if slow else 1.0), seed=seed * 100_000 + i * 100 + r)
    finally:
        st.close()
    return shas


def bulk_index(root: Path, n: int, *, step_s: Any) -> list[str]:
    """A store whose index holds ``n`` completed runs named "bulk" (no run directories: the runs list needs
    only the index), run i started i hours after 2024-03-01 with step time ``step_s(i)``; written in one
    transaction (upsert_run's one transaction a run would take 40 s at 10,000 runs). Returns the ids, oldest
    first."""
    from stepscope.store import open_store
    from stepscope.store.index import RUN_COLUMNS

    st = open_store(root, create=True)
    ids = [f"b{i:05d}" for i in range(n)]
    values = {"status": "completed", "end_ns": None, "exit_code": 0, "world_size": 1, "command": "python train.py",
              "cwd": "/repo", "host": "h", "git_commit": None, "git_branch": None, "git_dirty": None,
              "git_commit_time": None, "git_subject": None, "grp": None, "path": "/nonexistent", "params": "{}",
              "tags": "{}", "git_shallow": None, "store": None, "name": "bulk"}
    rows = [tuple({**values, "id": run_id, "start_ns": T0 + i * 3600 * 10**9}[c] for c in RUN_COLUMNS)
            for i, run_id in enumerate(ids)]
    marks = ", ".join("?" * len(RUN_COLUMNS))
    try:
        with st.index.transaction() as cur:
            cur.executemany(f"INSERT INTO runs ({', '.join(RUN_COLUMNS)}) VALUES ({marks})", rows)
            cur.executemany("INSERT INTO run_metrics (run_id, name, value) VALUES (?, ?, ?)",
                            [(run_id, "step_time_median_s", float(step_s(i))) for i, run_id in enumerate(ids)])
    finally:
        st.close()
    return ids
