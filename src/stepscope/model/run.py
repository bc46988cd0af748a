"""Run-level records: what ran, where, and one stream per process (rank)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class RunStatus(str, Enum):  # noqa: UP042 — StrEnum would change str()/format() of members, which callers see
    """Lifecycle of a run.

    RUNNING: the launcher (or session) is alive. COMPLETED: exit code 0 and every rank stream ended.
    FAILED: non-zero exit code or an exception in the script. INCOMPLETE: killed (a signal, or a rank
    stream without its end record), so the data stops at the last flush.
    """

    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    INCOMPLETE = "incomplete"


@dataclass(frozen=True, slots=True)
class GitInfo:
    """The git state of the working tree the run started in (None where not in a work tree)."""

    commit: str
    branch: str | None
    dirty: bool
    commit_time_s: float | None
    """Committer time of HEAD, Unix seconds."""
    subject: str | None
    shallow: bool = False
    describe: str | None = None


@dataclass(frozen=True, slots=True)
class GpuInfo:
    index: int
    name: str
    memory_bytes: int | None
    driver: str | None = None
    uuid: str | None = None
    compute_capability: str | None = None


@dataclass(frozen=True, slots=True)
class HostInfo:
    hostname: str
    os: str
    cpu_model: str | None
    cpu_cores_physical: int | None
    cpu_cores_logical: int | None
    memory_bytes: int | None
    gpus: tuple[GpuInfo, ...] = ()


@dataclass(frozen=True, slots=True)
class SoftwareInfo:
    python: str
    stepscope: str
    torch: str | None = None
    cuda: str | None = None
    cudnn: str | None = None
    nccl: str | None = None
    platform: str | None = None


@dataclass(frozen=True, slots=True)
class RankStream:
    """One observed process of a run (a rank under torchrun / mpirun, or the only process)."""

    rank: int
    local_rank: int
    world_size: int
    role: str | None
    pid: int
    host: str
    start_ns: int
    """Wall clock (Unix epoch, ns) at which the stream was opened."""
    end_ns: int | None
    """Wall clock of the stream's end record; None when the process died without one."""
    exit_reason: str | None = None
    """'exit' (normal interpreter exit), 'exception' (uncaught), 'signal:SIGTERM', ... or None."""
    software: SoftwareInfo | None = None
    gpus: tuple[GpuInfo, ...] = ()
    step_source: str | None = None
    """What marked the steps: 'optimizer' (zero-code hook), 'api' (stepscope.steps/step), 'lightning', ..."""
    timing: str = "cpu_wall"
    """How step phases were timed: 'cpu_wall' or 'cuda_events'."""

    @property
    def complete(self) -> bool:
        return self.end_ns is not None


@dataclass(frozen=True, slots=True)
class Run:
    """A stored run: the manifest written at start, completed by the end record."""

    id: str
    name: str
    status: RunStatus
    start_ns: int
    end_ns: int | None
    command: tuple[str, ...]
    cwd: str
    exit_code: int | None
    git: GitInfo | None
    host: HostInfo
    software: SoftwareInfo
    world_size: int
    params: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    streams: tuple[RankStream, ...] = ()
    options: dict[str, Any] = field(default_factory=dict)
    """Collection options in force (sample interval, profile window, warm-up steps...)."""
    group: str | None = None
    """Benchmark / sweep group id this run belongs to, if any."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Links to other systems (mlflow_run_id, ...)."""

    @property
    def duration_ns(self) -> int | None:
        return None if self.end_ns is None else self.end_ns - self.start_ns
