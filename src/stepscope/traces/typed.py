"""Typed decoding of trace events with msgspec: only the fields the engine reads, no dict per event.

``msgspec.json.Decoder(list[Event])`` turns a chunk of ``traceEvents`` into small Struct objects holding
only the fields :mod:`stepscope.traces.columns` reads; every other key (and its value, however nested)
is skipped in C. Values keep the types the dict path would see (``int | str`` where a trace may write
either), so the columns built from Structs are the columns built from dicts, bit for bit.

Where a chunk holds a value of a type the Structs do not accept (a string timestamp, ``null`` where a
number belongs or as args, args that are not an object), :func:`loads` parses that chunk with ``orjson`` instead and
the dict path handles it as before; malformed JSON is reported by ``orjson`` too, so errors read the same
whether msgspec is installed or not. msgspec is optional (``pip install stepscope[fast]``):
:data:`AVAILABLE` is False without it and the reader uses ``orjson`` alone.
"""

from __future__ import annotations

from typing import Any

import orjson

MISSING = -(2**62)
"""Default of the integer args: tells an absent key from a present ``-1`` (columns turn it into -1)."""
NAN = float("nan")

try:
    import msgspec
except ImportError:  # pragma: no cover - exercised by the fallback test through AVAILABLE
    msgspec = None  # type: ignore[assignment]

AVAILABLE = msgspec is not None

if msgspec is not None:
    UNSET: Any = msgspec.UNSET

    class Args(msgspec.Struct, frozen=True, gc=False):
        """The args an event's columns are built from (names as Kineto writes them)."""

        correlation: int | str = MISSING
        external_id: int | str = msgspec.field(default=MISSING, name="External id")
        stream: int | str = MISSING
        device: int | str = MISSING
        bytes: int | str = MISSING
        blocks_per_sm: float = msgspec.field(default=NAN, name="blocks per SM")
        warps_per_sm: float = msgspec.field(default=NAN, name="warps per SM")
        occupancy: float = msgspec.field(default=NAN, name="est. achieved occupancy %")
        bandwidth: float = msgspec.field(default=NAN, name="memory bandwidth (GB/s)")
        mem_delta: int | str = msgspec.field(default=MISSING, name="Bytes Delta")
        mem_bytes: int | str = msgspec.field(default=MISSING, name="Bytes")
        total_allocated: int | str = msgspec.field(default=MISSING, name="Total Allocated")
        total_reserved: int | str = msgspec.field(default=MISSING, name="Total Reserved")
        device_id: int | str = msgspec.field(default=MISSING, name="Device Id")
        device_type: int | str = msgspec.field(default=MISSING, name="Device Type")
        addr: int | str = msgspec.field(default=MISSING, name="Addr")
        wait_stream: int | str = msgspec.field(default=MISSING, name="wait_on_stream")
        wait_record: int | str = msgspec.field(default=MISSING, name="wait_on_cuda_event_record_corr_id")
        grid: Any = None
        block: Any = None
        input_dims: Any = msgspec.field(default=None, name="Input Dims")
        input_type: Any = msgspec.field(default=None, name="Input type")
        concrete_inputs: Any = msgspec.field(default=None, name="Concrete Inputs")
        coll_name: Any = msgspec.field(default=UNSET, name="Collective name")
        in_nelems: Any = msgspec.field(default=None, name="In msg nelems")
        out_nelems: Any = msgspec.field(default=None, name="Out msg nelems")
        group_size: Any = msgspec.field(default=None, name="Group size")
        dtype: Any = None
        group_ranks: Any = msgspec.field(default=None, name="Process Group Ranks")
        group_name: Any = msgspec.field(default=None, name="Process Group Name")
        src_rank: Any = msgspec.field(default=None, name="Src Rank")
        dst_rank: Any = msgspec.field(default=None, name="Dst Rank")

    NO_ARGS: Any = Args()

    class Event(msgspec.Struct, gc=False):
        """One trace event: the top-level fields the engine reads."""

        ph: str = ""
        ts: float = NAN
        dur: float = NAN
        cat: str = ""
        name: str = ""
        pid: int | str = -1
        tid: int | str = -1
        args: Args = NO_ARGS
        id: int | str = -1

    _decode = msgspec.json.Decoder(list[Event]).decode
    _Error: Any = msgspec.MsgspecError
else:  # pragma: no cover
    Args = Event = None  # type: ignore[misc]
    NO_ARGS = UNSET = None
    _decode = orjson.loads
    _Error = ()


def loads(data: bytes | memoryview) -> list[Any]:
    """Events of one chunk as :class:`Event` Structs, or as dicts (``orjson``) where the Structs cannot
    hold them; malformed JSON raises ``orjson.JSONDecodeError`` (a ``ValueError``)."""
    try:
        value: list[Any] = _decode(data)
        return value
    except (_Error, RecursionError):  # msgspec's nesting limit is Python's stack; orjson's is the documented bound
        parsed: list[Any] = orjson.loads(data)
        return parsed


def is_typed(events: list[Any]) -> bool:
    return AVAILABLE and bool(events) and events[0].__class__ is Event
