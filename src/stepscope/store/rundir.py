"""Run directory layout, the append-only per-rank record writer, and the reader.

    <store>/runs/<id>/
      manifest.json           Run record at start (format-versioned)
      end.json                status, end time and exit code, written once at the end
      ranks/rank-00000.jsonl  one JSON-lines file per rank stream, appended and flushed as the run goes
      artifacts/              traces/, memory snapshots, report.html, ...

A record line is ``{"kind": K, ...}``. The first line of a rank file is the ``stream`` header; columnar
batches follow (``steps``, ``regions``, ``samples``, ``metrics``, ``comm``: ``{"cols": {name: [...]}}``),
then other kinds (``model``, ``note``, ...) and finally ``end``. A process killed mid-write leaves at most
one partial last line, which the reader ignores.
"""

from __future__ import annotations

import os
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson

from stepscope.errors import StoreFormatError
from stepscope.model.run import RankStream, Run, RunStatus
from stepscope.model.tables import CommTable, MetricTable, RankData, RegionTable, RunData, SampleTable, StepTable
from stepscope.store.formats import RECORDS_VERSION, run_from_dict, run_to_dict, stream_from_dict

MANIFEST = "manifest.json"
END = "end.json"
RANKS = "ranks"
ARTIFACTS = "artifacts"
COLUMNAR_KINDS = ("steps", "regions", "samples", "metrics", "comm")


def rank_file_name(rank: int, pid: int | None = None) -> str:
    return f"rank-{rank:05d}.jsonl" if pid is None else f"rank-{rank:05d}-{pid}.jsonl"


def write_json_atomic(path: Path, doc: dict[str, Any]) -> None:
    """Write to a temporary file and rename it: readers see the old or the new file, never half."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS | orjson.OPT_SERIALIZE_NUMPY))
    os.replace(tmp, path)


def write_manifest(run_dir: Path, run: Run) -> None:
    write_json_atomic(run_dir / MANIFEST, run_to_dict(run))


def write_end(run_dir: Path, *, status: RunStatus, end_ns: int, exit_code: int | None,
              reason: str | None = None) -> None:
    write_json_atomic(
        run_dir / END,
        {"format": "stepscope-end", "version": 1, "status": status.value, "end_ns": end_ns,
         "exit_code": exit_code, "reason": reason},
    )


class RecordWriter:
    """Appends record lines to one rank file. Thread-safe; every ``append`` is one ``write`` call."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._lock = threading.Lock()

    def append(self, records: list[dict[str, Any]]) -> None:
        if not records:
            return
        data = b"".join(orjson.dumps(r, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n" for r in records)
        with self._lock:
            if self._fd < 0:
                return
            os.write(self._fd, data)

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1


def stream_header(stream: RankStream) -> dict[str, Any]:
    from stepscope.store.formats import stream_to_dict

    return {"kind": "stream", "version": RECORDS_VERSION, **stream_to_dict(stream)}


def read_rank_file(path: Path) -> RankData:
    """Parse one rank file into a RankData. A damaged last line (killed mid-write) is dropped."""
    raw = path.read_bytes()
    lines = raw.split(b"\n")
    header: dict[str, Any] | None = None
    batches: dict[str, list[dict[str, Any]]] = defaultdict(list)
    extra: dict[str, list[dict[str, Any]]] = defaultdict(list)
    notes: list[str] = []
    model: dict[str, Any] | None = None
    end: dict[str, Any] | None = None
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rec = orjson.loads(line)
        except orjson.JSONDecodeError:
            if i >= len(lines) - 2:
                break  # partial last line of a killed process
            raise StoreFormatError(f"{path}: line {i + 1} is not JSON — the record file is damaged") from None
        kind = rec.get("kind")
        if kind == "stream":
            if rec.get("version", 0) > RECORDS_VERSION:
                raise StoreFormatError(f"{path}: record format {rec.get('version')} is newer than this stepscope"
                                       " — upgrade stepscope")
            header = rec
        elif kind in COLUMNAR_KINDS:
            batches[kind].append(rec["cols"])
        elif kind == "model":
            model = model or rec.get("summary")
            extra["model"].append(rec)
        elif kind == "note":
            notes.append(str(rec.get("text", "")))
        elif kind == "end":
            end = rec
        elif kind == "stream_update" and header is not None:
            header.update({k: v for k, v in rec.items() if k != "kind"})
        else:
            extra[str(kind)].append(rec)
    if header is None:
        raise StoreFormatError(f"{path}: no stream header — not a stepscope record file")
    h = {k: v for k, v in header.items() if k not in ("kind", "version")}
    if end is not None:
        h["end_ns"] = end.get("end_ns")
        h["exit_reason"] = end.get("reason")
    steps = _merge_step_device(StepTable.from_batches(batches["steps"]), extra.pop("step_device", []))
    return RankData(
        stream=stream_from_dict(h),
        steps=steps,
        regions=RegionTable.from_batches(batches["regions"]),
        samples=SampleTable.from_batches(batches["samples"]),
        metrics=MetricTable.from_batches(batches["metrics"]),
        comm=CommTable.from_batches(batches["comm"]),
        model=model,
        notes=tuple(notes),
        extra=dict(extra),
    )


def _merge_step_device(steps: StepTable, recs: list[dict[str, Any]]) -> StepTable:
    """Fill device-side columns (CUDA event time, memory peaks) that arrive after their step row."""
    if not recs or not len(steps):
        return steps
    import numpy as np

    train = np.flatnonzero(steps["phase"] == 0)
    pos = {int(steps["index"][i]): int(i) for i in train}
    for rec in recs:
        i = pos.get(int(rec.get("index", -1)))
        if i is None:
            continue
        for col in ("device_ns", "mem_allocated_peak_bytes", "mem_reserved_peak_bytes"):
            if rec.get(col) is not None:
                steps.cols[col][i] = rec[col]
    return steps


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def derive_status(run: Run, end: dict[str, Any] | None,
                  streams: list[RankStream]) -> tuple[RunStatus, int | None, int | None]:
    """Status, end time and exit code from the end record and the streams (see RunStatus)."""
    if end is None:
        pid = run.extra.get("launcher_pid")
        same_host = run.extra.get("launcher_host") == os.uname().nodename
        if isinstance(pid, int) and same_host and _pid_alive(pid):
            return RunStatus.RUNNING, None, None
        last = max((s.end_ns or s.start_ns for s in streams), default=None)
        return RunStatus.INCOMPLETE, last, None
    status = RunStatus(end["status"])
    if status == RunStatus.COMPLETED and any(not s.complete for s in streams):
        status = RunStatus.INCOMPLETE
    return status, end.get("end_ns"), end.get("exit_code")


def read_run_manifest(run_dir: Path) -> tuple[Run, dict[str, Any] | None]:
    try:
        doc = orjson.loads((run_dir / MANIFEST).read_bytes())
    except FileNotFoundError:
        raise StoreFormatError(f"{run_dir}: no {MANIFEST} — not a run directory") from None
    except orjson.JSONDecodeError:
        raise StoreFormatError(f"{run_dir / MANIFEST}: not valid JSON"
                               " — the run is damaged; remove it with `stepscope rm`") from None
    run = run_from_dict(doc, what=str(run_dir / MANIFEST))
    try:
        end = orjson.loads((run_dir / END).read_bytes())
    except (FileNotFoundError, orjson.JSONDecodeError):
        end = None
    return run, end


def read_run(run_dir: Path) -> RunData:
    """Load a whole run: manifest, end record, every rank file, the artifact list."""
    run, end = read_run_manifest(run_dir)
    ranks = []
    rank_dir = run_dir / RANKS
    if rank_dir.is_dir():
        for p in sorted(rank_dir.glob("rank-*.jsonl")):
            ranks.append(read_rank_file(p))
    ranks.sort(key=lambda r: (r.stream.rank, r.stream.start_ns))
    streams = [r.stream for r in ranks]
    status, end_ns, exit_code = derive_status(run, end, streams)
    from dataclasses import replace

    run = replace(run, status=status, end_ns=end_ns, exit_code=exit_code, streams=tuple(streams),
                  world_size=max([run.world_size, *(s.world_size for s in streams)]))
    art_dir = run_dir / ARTIFACTS
    artifacts = (tuple(sorted(str(p.relative_to(run_dir)) for p in art_dir.rglob("*") if p.is_file()))
                 if art_dir.is_dir() else ())
    return RunData(run=run, ranks=tuple(ranks), path=str(run_dir), artifacts=artifacts)
