"""Issue 19, fuzz (the trace half): 1,200 mutated traces, seeded, from the real fixture traces, through the trace
reader and the trace analysis. Each ends in an EventTable or a one-line TraceError: no traceback, no NumPy
warning, no hang (each input bounded to 2 s per MB, at least 1 s on a loaded machine)."""

from __future__ import annotations

import gzip
import json
import random
import signal
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from stepscope.errors import TraceError
from stepscope.traces.kineto import read_trace
from tests.conftest import TRACES

SEED = 19
CASES = 1200
BASES = ("cpu_only/rank34.json.gz", "mi250_1rank/rank0.json.gz", "a100_alexnet/rank0.json.gz",
         "a100_2rank_nccl/rank0.json.gz")
HOSTILE_VALUES: list[Any] = [10**30, -(10**30), 2**63, 2**64 + 1, -1, 0, 1e308, -1e308, 1.5e-300, "NaN", "1e999",
                             None, True, [], {}, [1, 2], {"a": 1}, "", "x" * 300, "\u0000", "\ud7ff"]
FIELDS = ("ts", "dur", "ph", "cat", "name", "pid", "tid", "args", "id", "bp", "s")
ARG_FIELDS = ("stream", "device", "correlation", "External id", "bytes", "grid", "block", "Input Dims",
              "blocks per SM", "est. achieved occupancy %", "Collective name", "In msg nelems", "Group size",
              "Process Group Ranks", "rank")


def _base_docs() -> list[dict[str, Any]]:
    docs = []
    for name in BASES:
        doc = json.loads(gzip.decompress((TRACES / name).read_bytes()))
        doc["traceEvents"] = doc["traceEvents"][:300]  # small inputs: 1,200 of them run in seconds
        docs.append(doc)
    return docs


def _structural(rng: random.Random, doc: dict[str, Any]) -> dict[str, Any]:
    doc = json.loads(json.dumps(doc))
    events = doc["traceEvents"]
    for _ in range(rng.randint(1, 6)):
        kind = rng.random()
        if not events:
            break
        ev = rng.choice(events)
        if not isinstance(ev, dict):
            continue
        if kind < 0.45:
            ev[rng.choice(FIELDS)] = rng.choice(HOSTILE_VALUES)
        elif kind < 0.7:
            args = ev.setdefault("args", {})
            if isinstance(args, dict):
                args[rng.choice(ARG_FIELDS)] = rng.choice(HOSTILE_VALUES)
        elif kind < 0.8:
            ev.pop(rng.choice(FIELDS), None)
        elif kind < 0.9:
            events[rng.randrange(len(events))] = rng.choice(HOSTILE_VALUES)
        else:
            doc[rng.choice(("distributedInfo", "deviceProperties", "schemaVersion", "traceEvents"))] = rng.choice(
                [*HOSTILE_VALUES, {"rank": rng.choice(HOSTILE_VALUES), "world_size": rng.choice(HOSTILE_VALUES)},
                 [rng.choice(HOSTILE_VALUES)]])
            if not isinstance(doc.get("traceEvents"), list):
                break
    return doc


def _bytewise(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        kind = rng.random()
        at = rng.randrange(len(b) or 1)
        if kind < 0.35 and b:
            b[at] = rng.randrange(256)
        elif kind < 0.55:
            b[at:at] = rng.choice([b"{", b"}", b"[", b"]", b'"', b"\\", b",", b":", b" " * rng.randint(1, 5000),
                                   b"\xff\xfe", b"99999999999999999999999999", b"-1e400", b"null"])
        elif kind < 0.7:
            del b[at:at + rng.randint(1, 200)]
        elif kind < 0.85:
            end = min(len(b), at + rng.randint(1, 2000))
            b[at:at] = b[at:end]
        else:
            del b[at:]
    return bytes(b)


def _cases() -> Iterator[tuple[int, str, bytes]]:
    rng = random.Random(SEED)
    docs = _base_docs()
    for i in range(CASES):
        doc = rng.choice(docs)
        r = rng.random()
        if r < 0.5:
            data, how = json.dumps(_structural(rng, doc)).encode(), "structural"
        elif r < 0.9:
            data, how = _bytewise(rng, json.dumps(doc).encode()), "bytes"
        else:
            data, how = _bytewise(rng, json.dumps(_structural(rng, doc)).encode()), "both"
        suffix = ".json"
        if rng.random() < 0.2:
            data, suffix = gzip.compress(data, compresslevel=1), ".json.gz"
            if rng.random() < 0.3:
                data = data[: rng.randrange(len(data))]
        yield i, f"{how}{suffix}", data


class _Hang(Exception):
    pass


def _bounded(seconds: float, fn: Callable[[], Any]) -> Any:
    def alarm(signum: int, frame: Any) -> None:
        raise _Hang

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return fn()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")  # a leaked file handle fails
def test_mutated_traces_end_in_a_table_or_one_line(tmp_path: Path) -> None:
    from stepscope.analyze.trace.analysis import analyze_trace

    outcomes = {"read": 0, "refused": 0}
    failures: list[str] = []
    for i, how, data in _cases():
        path = tmp_path / f"case{i}{how[how.index('.'):]}"
        path.write_bytes(data)
        bound = max(1.0, 2.0 * len(data) / 1e6)
        t0 = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # a NumPy overflow / invalid-value warning is a failure
                table = _bounded(bound * 5, lambda p=path: read_trace(p))
                _bounded(bound * 5, lambda t=table: analyze_trace(t))
            outcomes["read"] += 1
        except TraceError as e:
            outcomes["refused"] += 1
            msg = str(e)
            if "\n" in msg or len(msg) > 500:
                failures.append(f"case {i} ({how}): not one line: {msg[:300]!r}")
        except _Hang:
            failures.append(f"case {i} ({how}): still running after {bound * 5:.1f} s")
        except Exception as e:
            failures.append(f"case {i} ({how}): {type(e).__name__}: {str(e)[:200]}")
        elapsed = time.perf_counter() - t0
        if elapsed > bound:
            failures.append(f"case {i} ({how}): {elapsed:.2f} s for {len(data)} bytes")
        path.unlink()
    assert not failures, f"{len(failures)} of {CASES} failed:\n" + "\n".join(failures[:40])
    assert outcomes["read"] > CASES // 10 and outcomes["refused"] > CASES // 10, outcomes
