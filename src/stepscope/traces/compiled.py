"""The compiled trace reader: C scans the ``traceEvents`` bytes block by block into columns of the table's types,
NumPy turns them, in their own memory, into the columns :class:`~stepscope.traces.columns.ChunkColumns` would have
built.

``_kineto_reader.c`` (an optional extension, built by ``setup.py``) parses each whole event of a block, keeps the
fields of complete (``X``) and flow (``s``/``f``) events in growable C arrays and interns names, categories,
``Input Dims`` (as the compact JSON the Python path writes) and collective-argument keys in first-seen order; no
Python object is made per event. What it cannot reproduce exactly (a value of an odd type in a field the engine
reads, a duplicated or escaped key, an integer beyond 64 bits, JSON it does not accept) raises
:class:`Unsupported`, and the caller reads the whole file again with the Python reader, which gives its own
result or its own error. :func:`to_columns` then applies the rules of ``ChunkColumns._add_complete`` over the
whole table at once (kinds, device work of unknown categories, GPU-only columns, shape and collective codes).

The reader is chosen by ``read_trace(reader=...)`` or the ``STEPSCOPE_TRACE_READER`` environment variable:
``auto`` (the default: compiled where built), ``c`` (compiled, an error where not built) or ``python``.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson

from stepscope.model.events import EventKind, category_kind
from stepscope.traces.columns import _IS_GPU_WORK, _IS_ON_STREAM, ChunkColumns, optype_text
from stepscope.traces.jsonstream import TOO_DEEP, ByteReader, JsonShapeError, TraceEventSplitter

LAYOUT = 5
"""The column layout this module reads (the extension's ``LAYOUT``; 3: the table's types, the ``wrong`` bits and
the count of cut strings; 4: operators' Input type and Concrete Inputs; 5: the side table of sync records'
``wait_on_*`` args). A build of older C source reads as not
built, never as wrong columns."""

try:
    from stepscope.traces import _kineto_reader
except ImportError:  # pragma: no cover - the extension is optional (a failed compile installs without it)
    _kineto_reader = None  # type: ignore[assignment]
if _kineto_reader is not None and getattr(_kineto_reader, "LAYOUT", 1) != LAYOUT:  # a stale build: not used
    _kineto_reader = None  # type: ignore[assignment]

AVAILABLE = _kineto_reader is not None
"""Whether the extension is built, from this source (``make setup``, or ``python setup.py build_ext --inplace``
in a checkout)."""
READER_ENV = "STEPSCOPE_TRACE_READER"
READERS = ("auto", "c", "python")

Array = npt.NDArray[Any]


class Unsupported(Exception):
    """The trace holds something the compiled reader leaves to the Python reader (the whole file is reread)."""


class ReaderUnavailable(ValueError):
    """The compiled reader was asked for by name but is not built."""


def use_compiled(reader: str | None = None) -> bool:
    """Whether to read with the compiled reader: ``reader`` if given, else ``$STEPSCOPE_TRACE_READER``, else auto."""
    choice = reader or os.environ.get(READER_ENV) or "auto"
    if choice not in READERS:
        raise ValueError(f"trace reader {choice!r}: expected one of {', '.join(READERS)}")
    if choice == "c" and not AVAILABLE:
        raise ReaderUnavailable("the compiled trace reader is not built, or built from older source (run "
                                "`make setup`, or `python setup.py build_ext --inplace` in a checkout)")
    return choice != "python" and AVAILABLE


def read_columns(splitter: TraceEventSplitter, stream: ByteReader, block_bytes: int, *,
                 allow_truncated: bool) -> ChunkColumns:
    """Read the events of ``splitter``'s stream; afterwards the splitter holds the header and suffix as if it had
    read them itself (``header_object`` works unchanged).

    Raises:
        Unsupported: the Python reader must read this file (the stream is then spent).
    """
    builder = _kineto_reader.Builder()
    rest = splitter.array_start()
    size = block_bytes
    while True:
        more = stream.read(size)
        data = rest + more if rest else more
        try:
            consumed, ended = builder.feed(data)
        except _kineto_reader.Unsupported as exc:
            raise Unsupported(str(exc)) from None
        except _kineto_reader.TooDeep:
            raise JsonShapeError(TOO_DEEP) from None
        rest = data[consumed:]
        if ended:
            tail = [rest]
            while chunk := stream.read(block_bytes):
                tail.append(chunk)
            splitter.suffix_bytes = b"".join(tail)
            break
        if not more:  # the array never ends
            if not allow_truncated:
                raise Unsupported("the traceEvents array never ends")  # the Python reader says so, its way
            splitter.truncated = True
            splitter.suffix_bytes = b"}"
            break
        # an event longer than what is held: read twice as much, so a huge event costs linear time
        size = block_bytes if consumed else max(block_bytes, 2 * len(rest))
    return to_columns(builder)


def to_columns(builder: _kineto_reader.Builder) -> ChunkColumns:
    """The raw C columns as one chunk of :class:`ChunkColumns` (each C column handed to NumPy without a copy)."""
    out = ChunkColumns()
    n, n_flows, out.dropped, out.cut_strings = builder.counts()
    cats: list[str] = builder.strings("cat")
    out.cat_codes = {c: i for i, c in enumerate(cats)}
    out.name_codes = {s: i for i, s in enumerate(builder.strings("name"))}

    def col(name: str, dtype: type[np.generic[Any]]) -> Array:
        return np.frombuffer(memoryview(builder.take(name)), dtype=dtype)

    if n_flows:
        flows = out.flow_parts
        flows["id"].append(col("flow_id", np.int64))
        flows["is_start"].append(col("flow_start", np.uint8).view(bool))  # 0 or 1: the bools' own bytes
        flows["ts_ns"].append(col("flow_ts", np.int64))
        flows["pid"].append(col("flow_pid", np.int64))
        flows["tid"].append(col("flow_tid", np.int64))
    if not n:
        return out
    cat = col("cat", np.int32)
    kind = np.asarray([category_kind(c) for c in cats], dtype=np.int8)[cat]
    hits = np.flatnonzero((kind == EventKind.OTHER) & (col("flags", np.uint8) == 7))
    if hits.size:  # an unknown category with a device, a stream and a correlation id: device work
        kind[hits] = EventKind.KERNEL
        out.device_cats.update(cats[c] for c in np.unique(cat[hits]).tolist())
    cols: dict[str, Array] = {"kind": kind, "cat": cat, "name": col("name", np.int32)}
    cols["ts_ns"] = col("ts", np.int64)
    cols["dur_ns"] = col("dur", np.int64)
    for key in ("pid", "tid", "correlation", "external_id"):
        cols[key] = col(key, np.int64)
    out.wrong_types = _wrong_types(col("wrong", np.uint16), kind)
    cols.update(_gpu_columns(builder, kind, cols["tid"], out))
    cols["shape"] = _shape_column(builder, kind, out)
    cols["optype"] = _optype_column(builder, kind, out)
    _waits(builder, kind, cols["correlation"], out)
    for k, v in cols.items():
        out.parts[k].append(v)
    return out


_W_EVERY, _W_ON_STREAM, _W_KERNEL = 1 | 2 | 4 | 8, 16 | 32 | 64 | 1024, 128 | 256 | 512
"""The C reader's wrong-type bits by the rows the Python reader reads them on: pid, tid, correlation and External id
on every event; stream, device, bytes and bandwidth on stream; the three launch figures on kernels."""


def _wrong_types(bits: Array, kind: Array) -> int:
    """How many values the Python reader would count as of the wrong type, from the C reader's bits."""
    hit = np.flatnonzero(bits)
    if not hit.size:
        return 0
    b, k = bits[hit], kind[hit]
    mask = _W_EVERY | np.where(_IS_ON_STREAM[k], _W_ON_STREAM, 0) | np.where(k == EventKind.KERNEL, _W_KERNEL, 0)
    return int(np.unpackbits((b & mask).astype(">u2").view(np.uint8)).sum())


def _gpu_columns(builder: _kineto_reader.Builder, kind: Array, tid: Array, out: ChunkColumns) -> dict[str, Array]:
    """As ``ChunkColumns._gpu_columns``: stream, device and bytes for on-stream events, launch figures and
    collective codes for kernels. Each raw column is taken when used and, where the types match, becomes the
    column in place (so the raw and the final columns are not all held at once)."""

    def raw(key: str, dtype: type[np.generic[Any]] = np.int64) -> Array:
        return np.frombuffer(memoryview(builder.take(key)), dtype=dtype)

    on_stream = _IS_ON_STREAM[kind]
    off_stream, not_kernel = ~on_stream, kind != EventKind.KERNEL
    cols: dict[str, Array] = {}
    stream = cols["stream"] = raw("stream")
    stream[off_stream] = -1
    no_stream = np.flatnonzero((stream < 0) & on_stream & _IS_GPU_WORK[kind])
    if no_stream.size:  # device work recorded without a stream arg: its trace row (tid) is its queue
        stream[no_stream] = tid[no_stream]
    cols["device"] = raw("device", np.int32)
    cols["device"][off_stream] = -1
    cols["bytes"] = raw("bytes")
    cols["bytes"][off_stream] = -1
    bw = cols["bandwidth_gbps"] = raw("bandwidth", np.float64)  # C wrote NaN where absent or not finite
    bw[off_stream] = np.nan
    for key, arg in (("grid_blocks", "grid"), ("block_threads", "block")):
        cols[key] = raw(arg)
        cols[key][not_kernel] = -1
    coll = raw("coll", np.int32)
    coll[not_kernel] = -1
    ci = np.flatnonzero(coll >= 0)
    if ci.size:
        keys: list[bytes] = builder.strings("coll")
        coll[ci] = _first_seen_map(coll[ci], lambda c: out._coll_code(tuple(orjson.loads(keys[c]))))
    cols["coll"] = coll
    for key, arg in (("blocks_per_sm", "blocks_per_sm"), ("warps_per_sm", "warps_per_sm"),
                     ("occupancy_pct", "occupancy")):
        cols[key] = raw(arg, np.float32)  # C wrote NaN where absent or beyond float32 (not measured)
        cols[key][not_kernel] = np.nan
    return cols


def _waits(builder: _kineto_reader.Builder, kind: Array, corr: Array, out: ChunkColumns) -> None:
    """As ``ChunkColumns._add_waits``: the side table's rows that are sync records."""
    rows = np.frombuffer(memoryview(builder.take("wait_row")), dtype=np.int64)
    stream = np.frombuffer(memoryview(builder.take("wait_stream")), dtype=np.int64)
    rec = np.frombuffer(memoryview(builder.take("wait_record")), dtype=np.int64)
    keep = kind[rows] == EventKind.SYNC
    if keep.any():
        out.wait_parts["correlation"].append(corr[rows[keep]])
        out.wait_parts["stream"].append(stream[keep])
        out.wait_parts["record_corr"].append(rec[keep])


def _shape_column(builder: _kineto_reader.Builder, kind: Array, out: ChunkColumns) -> Array:
    """As ``ChunkColumns._shape_column``: operators' Input Dims, coded in first-seen order among operators."""
    shape = np.frombuffer(memoryview(builder.take("dims")), dtype=np.int32)  # raw codes, recoded in place
    shape[kind != EventKind.CPU_OP] = -1
    si = np.flatnonzero(shape >= 0)
    if si.size:
        texts: list[str] = builder.strings("dims")
        table = out.shape_codes
        shape[si] = _first_seen_map(shape[si], lambda c: table.setdefault(texts[c], len(table)))
    return shape


def _optype_column(builder: _kineto_reader.Builder, kind: Array, out: ChunkColumns) -> Array:
    """As ``ChunkColumns._optype_column``: each distinct raw ``[Input type, Concrete Inputs]`` read by orjson and
    written as :func:`~stepscope.traces.columns.optype_text` does (-1 where that gives none)."""
    opt = np.frombuffer(memoryview(builder.take("optype")), dtype=np.int32)
    opt[kind != EventKind.CPU_OP] = -1
    oi = np.flatnonzero(opt >= 0)
    if oi.size:
        raw: list[bytes] = builder.strings("optype")
        table = out.optype_codes

        def code(c: int) -> int:
            try:
                types, concrete = orjson.loads(raw[c])
            except orjson.JSONDecodeError:  # an integer beyond 64 bits: no text, as the Python path
                return -1
            text = optype_text(types, concrete)
            return -1 if text is None else table.setdefault(text, len(table))

        opt[oi] = _first_seen_map(opt[oi], code)
    return opt


def _first_seen_map(raw: Array, code_of: Any) -> Array:
    """``raw`` codes re-coded by ``code_of``, called once per distinct raw code in order of first appearance
    (so a table filled by ``code_of`` gets the order a row-by-row pass would give)."""
    distinct, first = np.unique(raw, return_index=True)
    remap = np.zeros(int(distinct[-1]) + 1, dtype=np.int64)
    for c in distinct[np.argsort(first)].tolist():
        remap[c] = code_of(c)
    return remap[raw]
