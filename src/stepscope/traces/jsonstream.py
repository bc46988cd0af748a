"""Split a Chrome-trace JSON document into chunks of ``traceEvents`` without parsing it whole.

A trace is ``{..., "traceEvents": [ {event}, {event}, ... ], ...}`` (or a bare ``[ ... ]`` of events).
Parsing it whole with any JSON library holds every event as a Python dict at once; this splitter finds
event boundaries with vectorised NumPy scans over blocks of bytes (quotes, escapes and brackets), so
each chunk can be parsed with ``orjson`` and turned into columns before the next is read. Memory then
stays at one chunk of Python objects plus the columns, whatever the size of the trace.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

BLOCK_BYTES = 256 * 1024
"""Bytes read and parsed at a time: small enough that a chunk's freshly parsed events are still in the
CPU cache when their columns are extracted (measured fastest between 256 KiB and 1 MiB), and memory
stays a few MB of Python objects."""
_QUOTE, _BACKSLASH = 34, 92
_OPEN = (123, 91)  # { [
_CLOSE = (125, 93)  # } ]


class JsonShapeError(ValueError):
    """The bytes are not a JSON object with a traceEvents array (message says what was found)."""


def _structure(buf: bytes) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
    """Positions of brackets outside strings, the bracket bytes, and the depth after each one.

    The buffer must start outside a string. Depth is relative to the buffer start.
    """
    arr = np.frombuffer(buf, dtype=np.uint8)
    mask = arr == _QUOTE
    for byte in (123, 125, 91, 93):  # in place: one temporary of the buffer's size at a time, not five
        mask |= arr == byte
    pos = np.flatnonzero(mask)
    del mask
    chars = arr[pos]
    is_quote = chars == _QUOTE
    escaped = _escaped_quotes(arr, pos[is_quote])
    if escaped.size:
        keep = np.ones(pos.size, dtype=bool)
        keep[np.searchsorted(pos, escaped)] = False  # escaped quotes are a subset of pos: no set lookup
        pos, chars, is_quote = pos[keep], chars[keep], is_quote[keep]
    counter: type[np.signedinteger[Any]] = np.int32 if pos.size < 2**31 else np.int64
    quotes_so_far: npt.NDArray[np.signedinteger[Any]] = np.cumsum(is_quote, dtype=counter)
    inside = (quotes_so_far & 1).astype(bool) ^ is_quote
    bracket = ~is_quote & ~inside
    pos, chars = pos[bracket], chars[bracket]
    delta = np.where((chars == 123) | (chars == 91), 1, -1).astype(np.int8)
    return pos.astype(np.int64, copy=False), chars, np.cumsum(delta, dtype=counter)


def _escaped_quotes(arr: npt.NDArray[np.uint8], quotes: npt.NDArray[np.intp]) -> npt.NDArray[np.intp]:
    """Quote positions preceded by an odd run of backslashes (vectorised: linear in the buffer whatever its
    content, a hostile file of ``\\"`` included)."""
    cand = quotes[(quotes > 0) & (arr[np.maximum(quotes - 1, 0)] == _BACKSLASH)]
    if not cand.size:
        return np.asarray(cand, dtype=np.intp)
    bs = np.flatnonzero(arr == _BACKSLASH)
    # index (in bs) of the first backslash of the run each backslash belongs to
    starts = np.ones(bs.size, dtype=bool)
    starts[1:] = bs[1:] != bs[:-1] + 1
    run_start = np.maximum.accumulate(np.where(starts, np.arange(bs.size), 0))
    k = np.searchsorted(bs, cand - 1)  # the backslash just before each candidate quote
    run = k - run_start[k] + 1
    return np.asarray(cand[run % 2 == 1], dtype=np.intp)


class ByteReader(Protocol):
    """What the splitter reads from: a binary file, plain or gzip (``read(n)`` returns up to n bytes)."""

    def read(self, size: int = ..., /) -> bytes: ...


class TraceEventSplitter:
    """Iterate over chunks of raw event bytes (each a valid JSON array) and keep the rest as header."""

    def __init__(self, stream: ByteReader, block_bytes: int = BLOCK_BYTES, *, allow_truncated: bool = False) -> None:
        self._stream = stream
        self._block = block_bytes
        self._allow_truncated = allow_truncated
        self.header_bytes = b""
        self.suffix_bytes = b""
        self.bare_array = False
        self.truncated = False
        """True when the array never ended and (allow_truncated) the events up to the last whole one were kept."""

    def _read(self) -> bytes:
        return self._stream.read(self._block)

    def array_start(self) -> bytes:
        """Consume the header up to the ``[`` of traceEvents; return the bytes read after it (for a reader that
        cuts the events itself, as :mod:`stepscope.traces.compiled` does)."""
        return self._find_array_start()

    def _find_array_start(self) -> bytes:
        """Consume the header up to the ``[`` of traceEvents; return the bytes after it.

        The header is searched again only when it has doubled since the last search, so a header of any
        length (a hostile one of whitespace or of decoy keys) costs time linear in its size.
        """
        parts: list[bytes] = []
        size, next_look = 0, 0
        buf = b""
        while True:
            more = self._read()
            if more:
                parts.append(more)
                size += len(more)
                if size < next_look:
                    continue
            buf = b"".join(parts)
            parts = [buf]
            start = buf.lstrip()
            if start[:1] == b"[":
                self.bare_array = True
                return start[1:]
            if start and start[:1] != b"{":
                raise JsonShapeError(f"starts with {start[:20]!r}, not a JSON object")
            found = self._locate_key(buf)
            if found is not None:
                self.header_bytes = buf[:found[0]]
                return buf[found[1]:]
            if not more:
                raise JsonShapeError("no traceEvents array")
            next_look = 2 * size

    @staticmethod
    def _locate_key(buf: bytes) -> tuple[int, int] | None:
        """Where the top-level ``"traceEvents": [`` is: (start of the key, end of the ``[``), or None.
        One scan of the buffer, however many times the key appears inside strings or nested objects."""
        key = b'"traceEvents"'
        at = buf.find(key)
        if at < 0:
            return None
        arr = np.frombuffer(buf, dtype=np.uint8)
        quotes = np.flatnonzero(arr == _QUOTE)
        escaped = _escaped_quotes(arr, quotes)
        if escaped.size:
            keep = np.ones(quotes.size, dtype=bool)
            keep[np.searchsorted(quotes, escaped)] = False
            quotes = quotes[keep]
        pos, _, depth = _structure(buf)
        while at >= 0:
            quotes_before = int(np.searchsorted(quotes, at))
            brackets_before = int(np.searchsorted(pos, at))
            level = int(depth[brackets_before - 1]) if brackets_before else 0
            if quotes_before % 2 == 0 and level == 1:
                rest = buf[at + len(key):].lstrip()
                if rest[:1] == b":":
                    value = rest[1:].lstrip()
                    if value[:1] == b"[":
                        return at, len(buf) - len(value) + 1
                    if value:
                        raise JsonShapeError("traceEvents is not an array")
                    return None
            at = buf.find(key, at + 1)
        return None

    def chunks(self, loads: Any) -> Iterator[list[Any]]:
        """Yield lists of parsed events; afterwards ``suffix_bytes`` holds what follows the array.

        Fast path: cut the buffer at the last ``}, {"`` (an unescaped quote can only delimit a string,
        so this is an event boundary unless a string ends in ``}, {``) and let the parse validate the
        cut: a cut inside an event leaves brackets or a string unbalanced and fails. On failure, and at
        the end of the file, the exact bracket scan decides.
        """
        buf = self._find_array_start()
        pending: list[bytes] = []
        pending_size, wait_for = 0, 0
        while True:
            more = self._read()
            eof = not more
            if more:
                pending.append(more)
                pending_size += len(more)
                if pending_size < wait_for:
                    continue  # no event boundary yet: look again when the buffer has doubled (linear cost)
            buf = b"".join([buf, *pending]) if pending else buf
            pending, pending_size = [], 0
            buf = buf.lstrip().lstrip(b",")  # a stretch of whitespace between events is dropped, not kept
            cut = _fast_cut(buf)
            if eof and not cut:
                break
            parsed = _try_loads(loads, memoryview(buf)[:cut]) if cut else None
            if parsed is None:
                cut = _exact_cut(buf)
                parsed = loads(_array_of(buf, cut)) if cut else None
            if parsed:
                yield parsed
                buf = buf[cut:].lstrip().lstrip(b",")
                wait_for = 0
            else:
                wait_for = max(len(buf), self._block)
            if eof:
                break
        pos, _, depth = _structure(buf)
        closing = np.flatnonzero(depth < 0)
        if not closing.size:
            if not self._allow_truncated:
                raise JsonShapeError("the traceEvents array never ends (file truncated?)")
            yield from self._truncated_tail(buf, loads)
            return
        cut = int(pos[closing[0]])
        body = _array_of(buf, cut)
        if len(body) > 2:
            yield loads(body)
        self.suffix_bytes = buf[cut + 1:]


    def _truncated_tail(self, buf: bytes, loads: Any) -> Iterator[list[Any]]:
        """A file cut mid-write: keep the whole events of the tail, drop the partial one and close the header."""
        cut = _exact_cut(buf)
        body = _array_of(buf, cut)
        self.truncated = True
        self.suffix_bytes = b"}"
        if len(body) > 2:
            yield loads(body)


_SPACE = frozenset(b" \t\n\r\x0b\x0c")  # what bytes.strip() strips
_COMMA = 44


def _array_of(buf: bytes, end: int) -> bytes:
    """``b"[" + buf[:end].strip().strip(b",") + b"]"``, copied once (a huge event is not copied again for the
    slice, the strip and each concatenation)."""
    start = 0
    while start < end and buf[start] in _SPACE:
        start += 1
    while end > start and buf[end - 1] in _SPACE:
        end -= 1
    while start < end and buf[start] == _COMMA:
        start += 1
    while end > start and buf[end - 1] == _COMMA:
        end -= 1
    return b"".join((b"[", memoryview(buf)[start:end], b"]"))


_BOUNDARY = re.compile(rb"\}\s*,\s*(?=\{\s*\")")
_TAIL = 64 * 1024


def _fast_cut(buf: bytes) -> int:
    """End (exclusive) of the last ``}`` that looks like an event boundary, or 0.

    Searches a window at the end of the buffer, widened until it holds a boundary (events are small).
    """
    window = _TAIL
    while True:
        base = max(0, len(buf) - window)
        last = None
        for last in _BOUNDARY.finditer(buf, base):  # noqa: B007 - we want the last match
            pass
        if last is not None:
            return last.start() + 1
        if base == 0:
            return 0
        window *= 8


def _try_loads(loads: Any, body: bytes | memoryview) -> list[Any] | None:
    try:
        value = loads(b"".join((b"[", body, b"]")))
    except ValueError:
        return None
    return value if isinstance(value, list) and value else None


MAX_DEPTH = 1023
"""Levels of nesting inside an event (the event object is level 1) that a trace may hold: exactly what orjson
parses inside the ``[...]`` a chunk is wrapped in (its limit is 1,024 levels), so every reader and every path
(fast cut, exact cut, header, the compiled reader) refuses the same files with :data:`TOO_DEEP`. Deeper is
refused at once, before more of a hostile file is buffered."""
TOO_DEEP = f"brackets nested more than {MAX_DEPTH} deep — not trace events"


def _exact_cut(buf: bytes) -> int:
    """End (exclusive) of the last complete event found by the bracket scan, or 0."""
    pos, _, depth = _structure(buf)
    if depth.size and int(depth.max()) > MAX_DEPTH:
        raise JsonShapeError(TOO_DEEP)
    ends = np.flatnonzero(depth == 0)
    if not ends.size or (depth < 0).any():
        return 0
    return int(pos[ends[-1]]) + 1


def header_object(splitter: TraceEventSplitter, loads: Any) -> dict[str, Any]:
    """The trace's top-level keys other than traceEvents, parsed."""
    if splitter.bare_array:
        return {}
    doc = splitter.header_bytes + b'"traceEvents": []' + splitter.suffix_bytes
    value = loads(doc)
    if not isinstance(value, dict):
        raise JsonShapeError("top level is not a JSON object")
    return value
