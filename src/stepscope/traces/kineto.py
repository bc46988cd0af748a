"""Read a Kineto / PyTorch-profiler trace (plain or gzip JSON) into an :class:`EventTable`.

Handles PyTorch 1.x and 2.x traces, CUDA and ROCm (HIP runtime) traces, CPU-only traces, traces without
``distributedInfo`` or ``deviceProperties`` and nanosecond-resolution (float µs) timestamps. The JSON is
split into chunks (:mod:`stepscope.traces.jsonstream`), each parsed with ``orjson`` and turned into NumPy
columns at once, so no more than one chunk of events is ever held as Python objects. Where the compiled reader
is built (:mod:`stepscope.traces.compiled`) it reads the events instead, with no Python object per event, and
hands any file it cannot read exactly back to this Python path.

Every problem with the file raises :class:`~stepscope.errors.TraceError` with one line naming the file.
"""

from __future__ import annotations

import gc
import gzip
import io
import re
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from stepscope.errors import TraceError
from stepscope.model.events import DeviceInfo, EventKind, EventTable, TraceMeta, category_kind
from stepscope.traces import compiled, typed
from stepscope.traces.columns import ChunkColumns, NotTraceEvents, value_text
from stepscope.traces.jsonstream import BLOCK_BYTES, TOO_DEEP, JsonShapeError, TraceEventSplitter, header_object
from stepscope.traces.notes import reading_notes

RANK_IN_NAME = re.compile(r"rank[_\-.]?(\d+)", re.IGNORECASE)
_GZIP_MAGIC = b"\x1f\x8b"


def _open(path: Path) -> io.BufferedIOBase:
    raw = path.open("rb")
    magic = raw.read(2)
    raw.seek(0)
    if magic == _GZIP_MAGIC:
        raw.close()  # a GzipFile given a fileobj never closes it: let it own the file instead
        return gzip.GzipFile(filename=path, mode="rb")
    return raw


class _EndAtEof:
    """A gzip stream cut mid-write ends where its data ends instead of raising EOFError."""

    def __init__(self, stream: io.BufferedIOBase) -> None:
        self._stream = stream

    def read(self, size: int = -1, /) -> bytes:
        try:
            return self._stream.read(size)
        except EOFError:
            return b""


def read_trace_partial(path: str | Path, *, rank: int | None = None,
                       reader: str | None = None) -> tuple[EventTable, str | None]:
    """Parse one trace file that may still be being written (a running job's).

    A file cut mid-write is read up to its last whole event; the note (else None) says so. Every other
    problem raises as :func:`read_trace` does.
    """
    return _read(Path(path), rank, None, allow_truncated=True, reader=reader)


def read_trace(path: str | Path, *, rank: int | None = None, block_bytes: int | None = None,
               reader: str | None = None) -> EventTable:
    """Parse one trace file.

    Args:
        path: a ``.json`` or ``.json.gz`` Kineto / Chrome trace.
        rank: used when neither ``distributedInfo`` nor the file name gives one.
        block_bytes: bytes read at a time (memory vs. speed; the default suits traces of any size).
        reader: ``"auto"`` (compiled where built), ``"c"`` or ``"python"``; default ``$STEPSCOPE_TRACE_READER``
            or auto. Both give the same table (:mod:`stepscope.traces.compiled`).

    Raises:
        TraceError: unreadable, truncated, not a trace, or with negative durations.
    """
    return _read(Path(path), rank, block_bytes, allow_truncated=False, reader=reader)[0]


def _read(p: Path, rank: int | None, block_bytes: int | None, *,
          allow_truncated: bool, reader: str | None = None) -> tuple[EventTable, str | None]:
    if not p.is_file():
        raise TraceError(f"{p}: no such trace file — give a .json or .json.gz Kineto trace")
    from stepscope.traces.xla import is_xla_trace, read_xla_trace

    if is_xla_trace(p):  # a TensorFlow / JAX profile (XPlane or its trace-viewer JSON)
        return read_xla_trace(p, rank=rank), None
    try:
        use_c = compiled.use_compiled(reader)
    except ValueError as exc:
        raise TraceError(f"{p}: {exc}") from None
    got = None
    if use_c:
        try:
            got = _events(p, block_bytes, allow_truncated=allow_truncated, use_c=True)
        except compiled.Unsupported:  # only the Python reader reads this file exactly (or reports it its way)
            got = None
    builder, splitter, header = got or _events(p, block_bytes, allow_truncated=allow_truncated, use_c=False)
    meta = _meta(p, header, rank, builder)
    try:
        table = builder.finish(meta)
    except ValueError as exc:
        raise TraceError(f"{p}: {exc}") from None
    if splitter.truncated and not len(table):
        raise TraceError(f"{p}: truncated before its first whole event (still being written?) — nothing to analyse")
    note = (f"{p}: truncated (still being written?): analysed up to its last whole event ({len(table)} events)"
            if splitter.truncated else None)
    return table, note


def _events(p: Path, block_bytes: int | None, *, allow_truncated: bool,
            use_c: bool) -> tuple[ChunkColumns, TraceEventSplitter, dict[str, Any]]:
    """The event columns, the splitter (truncation) and the header of one file, by either reader."""
    with _reading(p) as raw:
        stream = _EndAtEof(raw) if allow_truncated else raw
        block = block_bytes or BLOCK_BYTES
        splitter = TraceEventSplitter(stream, block, allow_truncated=allow_truncated)
        if use_c:
            builder = compiled.read_columns(splitter, stream, block, allow_truncated=allow_truncated)
        else:
            builder = ChunkColumns()
            for events in splitter.chunks(typed.loads):
                builder.add(events)
                del events
        header = header_object(splitter, orjson.loads)
    return builder, splitter, header


def read_raw_events(path: str | Path) -> list[dict[str, Any]]:
    """Every event of a trace file as the JSON objects it holds (all fields and args kept), for exports
    that must stay faithful to the source; the analyses read :func:`read_trace`'s columns instead."""
    p = Path(path)
    if not p.is_file():
        raise TraceError(f"{p}: no such trace file — give a .json or .json.gz Kineto trace")
    out: list[dict[str, Any]] = []
    with _reading(p) as stream:
        for events in TraceEventSplitter(stream).chunks(orjson.loads):
            out.extend(e for e in events if isinstance(e, dict))
    return out


@contextmanager
def _reading(p: Path) -> Iterator[io.BufferedIOBase]:
    """The open trace file, with every way reading it can fail turned into one TraceError line."""
    gc_was_enabled = gc.isenabled()
    gc.disable()  # millions of short-lived dicts: the cycle collector only costs time here
    try:
        with _open(p) as stream:
            yield stream
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise TraceError(f"{p}: truncated or corrupt gzip ({exc}) — re-copy or re-record the trace") from None
    except orjson.JSONDecodeError as exc:
        if str(exc).startswith("depth limit exceeded"):  # the header, or a last chunk: the bound every path keeps
            raise TraceError(_not_a_trace(p, TOO_DEEP)) from None
        raise TraceError(f"{p}: invalid JSON ({str(exc).splitlines()[0]}) — the file is damaged") from None
    except (JsonShapeError, NotTraceEvents) as exc:
        raise TraceError(_not_a_trace(p, str(exc))) from None
    except UnicodeDecodeError:
        raise TraceError(f"{p}: not text JSON — expected a .json or .json.gz Kineto trace") from None
    finally:
        if gc_was_enabled:
            gc.enable()


def _not_a_trace(p: Path, why: str) -> str:
    return f"{p}: not a Kineto/Chrome trace ({why}) — expected {{\"traceEvents\": [...]}}"


def _meta(path: Path, header: dict[str, Any], given: int | None, builder: ChunkColumns) -> TraceMeta:
    dist = header.get("distributedInfo")
    dist = dist if isinstance(dist, dict) else {}
    rank, source = _rank(path, dist, given)
    unknown = sorted(c for c in builder.cat_codes if category_kind(c) == EventKind.OTHER
                     and c not in ("Trace", "") and c not in builder.device_cats)
    return TraceMeta(
        path=str(path), rank=rank, rank_source=source,
        world_size=_int_or_none(dist.get("world_size")), backend=_str_or_none(dist.get("backend")),
        devices=tuple(_device(d) for d in _list(header.get("deviceProperties")) if isinstance(d, dict)),
        schema_version=_int_or_none(header.get("schemaVersion")), dropped_events=builder.dropped,
        unknown_categories=tuple(unknown), wrong_type_values=builder.wrong_types, cut_strings=builder.cut_strings,
    )


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _rank(path: Path, dist: dict[str, Any], given: int | None) -> tuple[int, str]:
    r = _int_or_none(dist.get("rank"))
    if r is not None:
        return r, "distributedInfo"
    m = RANK_IN_NAME.search(path.name)
    if m:
        return int(m.group(1)), "file name"
    if given is not None:
        return given, "given"
    return 0, "default"


def _device(d: dict[str, Any]) -> DeviceInfo:
    major, minor = d.get("computeMajor"), d.get("computeMinor")
    return DeviceInfo(
        id=_int_or_none(d.get("id")) or 0, name=value_text(d.get("name", "")), num_sms=_int_or_none(d.get("numSms")),
        max_threads_per_sm=_int_or_none(d.get("maxThreadsPerMultiprocessor")),
        warp_size=_int_or_none(d.get("warpSize")), total_memory_bytes=_int_or_none(d.get("totalGlobalMem")),
        compute_capability=f"{value_text(major)}.{value_text(minor)}" if major is not None else None,
        memory_clock_khz=_int_or_none(d.get("memoryClockRate")), memory_bus_bits=_int_or_none(d.get("memoryBusWidth")),
    )


def _int_or_none(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _str_or_none(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def kind_of_category(cat: str) -> EventKind:
    return category_kind(cat)


__all__ = ["RANK_IN_NAME", "kind_of_category", "read_trace", "read_trace_partial", "reading_notes"]
