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

import errno
import os
import threading
from collections import defaultdict
from collections.abc import Callable
from dataclasses import replace
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
    try:
        tmp.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS
                                     | orjson.OPT_SERIALIZE_NUMPY))
        os.replace(tmp, path)
    except BaseException:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise


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
    """Appends record lines to one rank file; thread-safe.

    Each ``append`` is all-or-nothing: its lines are written with as many ``write`` calls as a short
    write needs, and when the disk is full (or the file-size limit reached) the file is cut back to where
    the batch started, so a line is never left half-written nor glued to the next. The batch stays
    pending and goes first at the next ``append`` (up to :attr:`MAX_PENDING` bytes; beyond, the oldest
    pending lines are dropped and counted in :attr:`lost_lines`). ``append`` raises the OSError after
    keeping the batch; the caller warns."""

    MAX_PENDING = 32 << 20

    def __init__(self, path: Path, *, exclusive: bool = False) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | (os.O_EXCL if exclusive else 0)
        self._fd = os.open(path, flags, 0o644)
        self._lock = threading.Lock()
        self._pending = b""
        self._newline_first = False
        self.lost_lines = 0

    @classmethod
    def create_rank_file(cls, ranks_dir: Path, rank: int, pid: int) -> RecordWriter:
        """A new rank file: ``rank-R.jsonl``, or ``rank-R-PID.jsonl`` when another process has that
        rank's name already (created exclusively: two processes never share a file)."""
        names = [rank_file_name(rank), rank_file_name(rank, pid)] + [f"rank-{rank:05d}-{pid}-{i}.jsonl"
                                                                   for i in range(1, 100)]
        for name in names:
            try:
                return cls(ranks_dir / name, exclusive=True)
            except FileExistsError:
                continue
        raise FileExistsError(f"{ranks_dir}: no free record file name for rank {rank}")

    @staticmethod
    def encode(records: list[dict[str, Any]]) -> bytes:
        try:
            return b"".join(orjson.dumps(r, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n" for r in records)
        except TypeError:  # one record holds something JSON cannot say: keep the others
            out = []
            for r in records:
                try:
                    out.append(orjson.dumps(r, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")
                except TypeError:
                    continue
            return b"".join(out)

    def append(self, records: list[dict[str, Any]]) -> None:
        data = self.encode(records) if records else b""
        with self._lock:
            if self._fd < 0:
                return
            payload = self._pending + data
            if not payload:
                return
            buf = b"\n" + payload if self._newline_first else payload
            self._pending = b""
            start = os.fstat(self._fd).st_size
            try:
                self._write_all(buf)
            except OSError:
                self._undo(start)
                self._keep(payload)
                raise
            self._newline_first = False

    def _write_all(self, buf: bytes) -> None:
        view = memoryview(buf)
        while view:
            n = os.write(self._fd, view)
            if n <= 0:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            view = view[n:]

    def _undo(self, start: int) -> None:
        """Cut the file back to ``start``; if that fails, the next batch starts on a line of its own
        (the fragment is one damaged line, which the reader skips and reports)."""
        try:
            if os.fstat(self._fd).st_size > start:
                os.ftruncate(self._fd, start)
        except OSError:
            self._newline_first = True

    def _keep(self, buf: bytes) -> None:
        if len(buf) > self.MAX_PENDING:
            cut = buf.find(b"\n", len(buf) - self.MAX_PENDING)
            dropped, buf = (buf, b"") if cut < 0 else (buf[:cut + 1], buf[cut + 1:])
            self.lost_lines += dropped.count(b"\n")
        self._pending = buf

    @property
    def pending_bytes(self) -> int:
        return len(self._pending)

    def size(self) -> int:
        """Bytes in the file now (-1 once closed)."""
        with self._lock:
            return os.fstat(self._fd).st_size if self._fd >= 0 else -1

    def drop_pending(self) -> None:
        """Give up the lines that could not be written (counted in :attr:`lost_lines`)."""
        with self._lock:
            self.lost_lines += self._pending.count(b"\n")
            self._pending = b""

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                self.lost_lines += self._pending.count(b"\n")
                self._pending = b""
                try:
                    os.close(self._fd)
                except OSError:
                    pass
                self._fd = -1


def stream_header(stream: RankStream) -> dict[str, Any]:
    from stepscope.store.formats import stream_to_dict

    return {"kind": "stream", "version": RECORDS_VERSION, **stream_to_dict(stream)}


_INT64 = (-(1 << 63), (1 << 63) - 1)
_BAD = (ValueError, TypeError, KeyError, AttributeError, OverflowError, IndexError)
"""What a structurally wrong record raises while it is checked: it is skipped and reported, never raised."""


class DamagedRecord(ValueError):
    """A record line that is valid JSON but not a valid record of its kind."""


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and _INT64[0] <= v <= _INT64[1]


def _opt(v: Any, check: Any) -> bool:
    return v is None or check(v)


def _is_str(v: Any) -> bool:
    return isinstance(v, str)


_STREAM_FIELDS: dict[str, Callable[[Any], bool]] = {
    "rank": _is_int, "local_rank": _is_int, "world_size": _is_int, "pid": _is_int, "host": _is_str,
    "start_ns": _is_int, "end_ns": lambda v: _opt(v, _is_int), "role": lambda v: _opt(v, _is_str),
    "exit_reason": lambda v: _opt(v, _is_str), "step_source": lambda v: _opt(v, _is_str), "timing": _is_str,
}
_SOFTWARE_FIELDS = {"python", "stepscope", "torch", "cuda", "cudnn", "nccl", "platform"}
_GPU_FIELDS: dict[str, Callable[[Any], bool]] = {
    "index": _is_int, "name": _is_str, "memory_bytes": lambda v: _opt(v, _is_int),
    "driver": lambda v: _opt(v, _is_str), "uuid": lambda v: _opt(v, _is_str),
    "compute_capability": lambda v: _opt(v, _is_str)}


def _stream(h: dict[str, Any]) -> RankStream:
    """The RankStream of a header (plus updates), every field of the right type, or DamagedRecord."""
    for name, ok in _STREAM_FIELDS.items():
        if name in h and not ok(h[name]):
            raise DamagedRecord(f"stream field {name!r} has a wrong value ({str(h[name])[:40]!r})")
    for name in ("rank", "local_rank", "world_size", "pid", "host", "start_ns"):
        if name not in h:
            raise DamagedRecord(f"stream header without {name!r}")
    if h["world_size"] < 1 or h["rank"] < 0:
        raise DamagedRecord(f"stream header with rank {h['rank']} of world size {h['world_size']}")
    sw = h.get("software")
    if sw is not None and not (isinstance(sw, dict) and set(sw) <= _SOFTWARE_FIELDS
                               and all(_opt(v, _is_str) for v in sw.values()) and _is_str(sw.get("python"))
                               and _is_str(sw.get("stepscope"))):
        raise DamagedRecord("stream header with a damaged software field")
    gpus = h.get("gpus", [])
    if not isinstance(gpus, list) or not all(
            isinstance(g, dict) and set(g) <= set(_GPU_FIELDS) and {"index", "name", "memory_bytes"} <= set(g)
            and all(_GPU_FIELDS[k](v) for k, v in g.items()) for g in gpus):
        raise DamagedRecord("stream header with a damaged gpus field")
    return stream_from_dict(h)


def _check_batch(kind: str, cols: Any) -> Any:
    """The table of one columnar batch whose columns have equal lengths and values that fit their
    declared types (else DamagedRecord, ValueError, TypeError or OverflowError)."""
    if not isinstance(cols, dict) or not cols:
        raise DamagedRecord("no columns")
    n = None
    for name, vals in cols.items():
        if not isinstance(vals, list):
            raise DamagedRecord(f"column {name!r} is not a list")
        if n is None:
            n = len(vals)
        elif len(vals) != n:
            raise DamagedRecord(f"column {name!r} has {len(vals)} values, not {n}")
    if kind == "samples":
        if "t_ns" not in cols:
            raise DamagedRecord("samples without t_ns")
        return SampleTable.from_batches([cols])
    table = _TABLES[kind]
    key = getattr(table, "KEY", None)
    if key is not None:
        if not all(isinstance(v, str) for v in cols.get(key, ())):
            raise DamagedRecord(f"column {key!r} holds a value that is not a string")
        if key not in cols:
            raise DamagedRecord(f"no {key!r} column")
    return table.from_batches([cols])  # raises on a value that does not fit its column's type


def _concat(kind: str, tables: list[Any]) -> Any:
    """One table of a kind from the checked tables of its batches (each batch converted once)."""
    import numpy as np

    if kind == "samples":
        names: list[str] = []
        for t in tables:
            names.extend(k for k in t.columns if k not in names)
        if not tables:
            return SampleTable.from_batches([])
        cols = {n: np.concatenate([t.columns[n] if n in t.columns else np.full(len(t), np.nan) for t in tables])
                for n in names}
        return SampleTable(np.concatenate([t.t_ns for t in tables]), cols)
    cls = _TABLES[kind]
    if not tables:
        return cls.from_batches([])
    key = getattr(cls, "KEY", None)
    if key is None:
        return cls({n: np.concatenate([t.cols[n] for t in tables]) for n in cls.SCHEMA})
    codes: dict[str, int] = {}
    parts = []
    for t in tables:
        recode = np.asarray([codes.setdefault(name, len(codes)) for name in t.names] or [0], dtype="int32")
        parts.append(recode[t.cols[f"{key}_code"]])
    cols = {n: np.concatenate([t.cols[n] for t in tables]) for n in cls.SCHEMA if n != f"{key}_code"}
    cols[f"{key}_code"] = np.concatenate(parts)
    return cls(cols, list(codes))


_TABLES: dict[str, Any] = {"steps": StepTable, "regions": RegionTable, "metrics": MetricTable, "comm": CommTable}


def read_rank_file(path: Path) -> RankData:
    """Parse one rank file into a RankData.

    A damaged line (not JSON, or valid JSON that is not a valid record of its kind) is skipped and
    reported in the rank's notes; only a partial last line (a process killed mid-write) is dropped
    silently. A file without a readable stream header (empty: the process could not write it) raises
    StoreFormatError; :func:`read_run` skips such a file and reports it."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise StoreFormatError(f"{path.name}: unreadable ({e.strerror or e})") from None
    if not raw.strip():
        raise StoreFormatError(f"{path.name}: empty — the process could not write its records (disk full?)")
    parser = RankFileParser(path)
    parser.feed(raw.split(b"\n"), partial_last=True)
    return parser.rank_data()


class RankFileParser:
    """The records of one rank file, parsed line by line as they come (whole file or appended chunks: see
    store/tail.py); :meth:`rank_data` gives the RankData of the lines fed so far."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lines_fed = 0
        self._header: dict[str, Any] | None = None
        self._stream: RankStream | None = None
        self._batches: dict[str, list[Any]] = defaultdict(list)
        self._extra: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self._notes: list[str] = []
        self._damaged: list[str] = []
        self._model: dict[str, Any] | None = None
        self._end: dict[str, Any] | None = None

    @property
    def has_header(self) -> bool:
        return self._stream is not None

    def feed(self, lines: list[bytes], *, partial_last: bool = False) -> None:
        """Parse the next ``lines`` (without their newlines). ``partial_last``: the last one is the text
        after the file's last newline, a partial line of a killed process, dropped silently if not JSON."""
        last = len(lines) - 1
        for j, line in enumerate(lines):
            self.lines_fed += 1
            self._line(self.lines_fed, line, partial=partial_last and j == last)

    def _line(self, number: int, line: bytes, *, partial: bool) -> None:
        if not line.strip():
            return
        try:
            rec = orjson.loads(line)
        except orjson.JSONDecodeError:
            if not partial:
                self._damaged.append(f"line {number}: not JSON")
            return
        try:
            self._record(rec)
        except StoreFormatError:
            raise
        except _BAD as e:
            self._damaged.append(f"line {number}: {e}"[:200])

    def _record(self, rec: Any) -> None:
        if not isinstance(rec, dict) or not isinstance(rec.get("kind"), str):
            raise DamagedRecord("not a record (no kind)")
        kind = rec["kind"]
        header = self._header
        if kind == "stream":
            if header is not None:
                raise DamagedRecord("a second stream header")
            version = rec.get("version", 0)
            if not _is_int(version):
                raise DamagedRecord("stream header with a damaged version")
            if version > RECORDS_VERSION:
                raise StoreFormatError(f"{self.path}: record format {version} is newer than this stepscope"
                                       " — upgrade stepscope")
            h = {k: v for k, v in rec.items() if k not in ("kind", "version")}
            self._stream = _stream(h)
            self._header = h
        elif header is None:
            raise DamagedRecord(f"a {kind!r} record before the stream header")
        elif kind in COLUMNAR_KINDS:
            self._batches[kind].append(_check_batch(kind, rec.get("cols")))
        elif kind == "model":
            if not isinstance(rec.get("summary"), (dict, type(None))):
                raise DamagedRecord("model record without a summary")
            self._model = self._model or rec.get("summary")
            self._extra["model"].append(rec)
        elif kind == "note":
            self._notes.append(str(rec.get("text", ""))[:2000])
        elif kind == "end":
            if not _opt(rec.get("end_ns"), _is_int) or not _opt(rec.get("reason"), _is_str):
                raise DamagedRecord("end record with a damaged field")
            self._end = rec
        elif kind == "stream_update":
            updated = {**header, **{k: v for k, v in rec.items() if k != "kind"}}
            self._stream = _stream(updated)
            self._header = updated
        elif kind == "step_device":
            if not _is_int(rec.get("index")) or not all(
                    _opt(rec.get(c), lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
                         and abs(v) < 1e30)
                    for c in _DEVICE_COLS):
                raise DamagedRecord("step_device record with a damaged field")
            self._extra["step_device"].append(rec)
        else:
            self._extra[kind].append(rec)

    def rank_data(self) -> RankData:
        """The RankData of the lines fed so far (StoreFormatError while no stream header was read)."""
        stream = self._stream
        if self._header is None or stream is None:
            why = f" ({self._damaged[0]})" if self._damaged else ""
            raise StoreFormatError(f"{self.path.name}: no readable stream header{why} — not a stepscope record"
                                   " file, or damaged")
        end = self._end
        if end is not None:
            stream = replace(stream, end_ns=end.get("end_ns"), exit_reason=end.get("reason"))
        notes = list(self._notes)
        damaged = self._damaged
        if damaged:
            shown = "; ".join(damaged[:3]) + (f"; and {len(damaged) - 3} more" if len(damaged) > 3 else "")
            notes.append(f"{self.path.name}: {len(damaged)} damaged record line(s) skipped — {shown}")
        extra = {k: list(v) for k, v in self._extra.items() if k != "step_device"}
        steps = _merge_step_device(_concat("steps", self._batches["steps"]), self._extra.get("step_device", []))
        return RankData(
            stream=stream,
            steps=steps,
            regions=_concat("regions", self._batches["regions"]),
            samples=_concat("samples", self._batches["samples"]),
            metrics=_concat("metrics", self._batches["metrics"]),
            comm=_concat("comm", self._batches["comm"]),
            model=self._model,
            notes=tuple(notes),
            extra=extra,
        )


_DEVICE_COLS = ("device_ns", "mem_allocated_peak_bytes", "mem_reserved_peak_bytes", "data_wait_ns")
"""Step columns a ``step_device`` record fills after its row (data_wait_ns: Keras fit's deferred reads)."""


def _merge_step_device(steps: StepTable, recs: list[dict[str, Any]]) -> StepTable:
    """Fill device-side columns (CUDA event time, memory peaks) that arrive after their step row."""
    if not recs or not len(steps):
        return steps
    import numpy as np

    train = np.flatnonzero(steps["phase"] == 0)
    pos = {int(steps["index"][i]): int(i) for i in train}
    for rec in recs:
        i = pos.get(rec["index"])
        if i is None:
            continue
        for col in _DEVICE_COLS:
            if rec.get(col) is not None:
                steps.cols[col][i] = rec[col]
    return steps


def process_start_ticks(pid: int | None = None) -> int | None:
    """When a process started (clock ticks since boot, Linux), to tell a live launcher from a reused pid."""
    try:
        stat = Path(f"/proc/{pid or os.getpid()}/stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (OverflowError, ValueError, OSError):
        return False
    return True


def launcher_alive(run: Run) -> bool:
    """The process that writes the run's end record still runs (same host, same pid, same start time)."""
    pid = run.extra.get("launcher_pid")
    if not isinstance(pid, int) or not _is_int(pid) or pid <= 0:
        return False
    if run.extra.get("launcher_host") != os.uname().nodename:
        return False
    if not _pid_alive(pid):
        return False
    started = run.extra.get("launcher_start")
    return not _is_int(started) or process_start_ticks(pid) in (None, started)


def _valid_end(end: Any) -> dict[str, Any] | None:
    if not isinstance(end, dict) or end.get("status") not in {s.value for s in RunStatus}:
        return None
    if not _opt(end.get("end_ns"), _is_int) or not _opt(end.get("exit_code"), _is_int):
        return None
    return end


def derive_status(run: Run, end: dict[str, Any] | None,
                  streams: list[RankStream]) -> tuple[RunStatus, int | None, int | None]:
    """Status, end time and exit code from the end record and the streams (see RunStatus). Without an
    end record the run is ``running`` only while its launcher lives: a killed launcher leaves it
    ``incomplete``, whatever the index says."""
    end = _valid_end(end)
    if end is None:
        if launcher_alive(run):
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


def live_status(run_dir: Path) -> tuple[RunStatus, int | None, int | None] | None:
    """Status, end time and exit code of a run the index still calls ``running``, from its run directory
    (manifest and end record; the rank files are not read): ``running`` only while its launcher lives.
    None when the run directory cannot be read."""
    try:
        run, end = read_run_manifest(run_dir)
    except (StoreFormatError, OSError):
        return None
    return derive_status(run, end, [])


def read_run(run_dir: Path) -> RunData:
    """Load a whole run: manifest, end record, every rank file, the artifact list."""
    run, end = read_run_manifest(run_dir)
    ranks = []
    problems: list[str] = []
    rank_dir = run_dir / RANKS
    if rank_dir.is_dir():
        for p in sorted(rank_dir.glob("rank-*.jsonl")):
            try:
                ranks.append(read_rank_file(p))
            except StoreFormatError as e:
                if "newer than this stepscope" in str(e):
                    raise
                problems.append(f"record file skipped: {e}")
    return assemble_run(run_dir, run, end, ranks, problems)


def assemble_run(run_dir: Path, run: Run, end: dict[str, Any] | None, ranks: list[RankData],
                 problems: list[str]) -> RunData:
    """The RunData of a manifest, an end record and the rank files read (by :func:`read_run`, or as they
    grow by store/tail.py): ranks in order, status derived, world size and artifacts filled in."""
    ranks = sorted(ranks, key=lambda r: (r.stream.rank, r.stream.start_ns))
    streams = [r.stream for r in ranks]
    status, end_ns, exit_code = derive_status(run, end, streams)
    extra = {**run.extra, "record_problems": problems} if problems else run.extra
    run = replace(run, status=status, end_ns=end_ns, exit_code=exit_code, streams=tuple(streams), extra=extra,
                  world_size=max([run.world_size, *(s.world_size for s in streams)]))
    art_dir = run_dir / ARTIFACTS
    artifacts = (tuple(sorted(str(p.relative_to(run_dir)) for p in art_dir.rglob("*") if p.is_file()))
                 if art_dir.is_dir() else ())
    return RunData(run=run, ranks=tuple(ranks), path=str(run_dir), artifacts=artifacts)
