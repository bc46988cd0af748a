"""CPU time of the queue-length, copy-bandwidth, memory-timeline, kernel-sequence and annotation analyses.

    .venv/bin/python benchmarks/trace_counters.py [TRACE ...]

Default traces: the largest fixtures, plus a synthetic trace of 20,000 operators and 200,000 allocation records
(written to a temporary folder) for the memory timeline, which no fixture exercises. Each analysis runs 5 times on
the table already read; the best CPU time (``time.process_time``) is printed in ms.
"""

from __future__ import annotations

import json
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from stepscope.analyze.trace.annotations import gpu_annotations
from stepscope.analyze.trace.bandwidth import bandwidth
from stepscope.analyze.trace.memory_timeline import memory_timeline
from stepscope.analyze.trace.queues import queue_lengths
from stepscope.analyze.trace.sequences import kernel_sequences
from stepscope.traces.kineto import read_trace

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "data" / "traces"
DEFAULT = ["a100_8rank_diff/control_rank3.json.gz", "a100_8rank_diff/test_rank3.json.gz", "v100_1rank/rank0.json.gz"]
ANALYSES: list[Callable[[Any], Any]] = [queue_lengths, bandwidth, memory_timeline, kernel_sequences, gpu_annotations]


def memory_trace(path: Path, ops: int = 20_000, per_op: int = 10) -> Path:
    """Operators of 40 µs, each with ``per_op`` allocation records (45% frees of a random live block)."""
    rng = random.Random(1)
    events: list[dict[str, Any]] = [{"ph": "X", "cat": "Trace", "name": "span", "pid": "Spans", "tid": "x", "ts": 0,
                                     "dur": ops * 50, "args": {}}]
    live: list[tuple[int, int]] = []
    total = 0
    for i in range(ops):
        t = 50.0 * i
        events.append({"ph": "X", "cat": "cpu_op", "name": f"aten::op{i % 50}", "pid": 1, "tid": 1, "ts": t,
                       "dur": 40, "args": {}})
        for j in range(per_op):
            if live and rng.random() < 0.45:
                addr, size = live.pop(rng.randrange(len(live)))
                delta = -size
            else:
                addr, size = len(events) * 64, rng.choice([256, 4096, 1 << 20])
                live.append((addr, size))
                delta = size
            total += delta
            events.append({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1,
                           "ts": t + 1 + 3 * j, "args": {"Total Reserved": 1 << 30, "Total Allocated": total,
                                                        "Bytes": delta, "Device Id": 0, "Device Type": 1,
                                                        "Addr": addr}})
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def main(argv: list[str]) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        paths = [Path(p) for p in argv] or [FIXTURES / p for p in DEFAULT] + [memory_trace(Path(tmp) / "mem.json")]
        for path in paths:
            table = read_trace(path)
            cells = []
            for fn in ANALYSES:
                best = float("inf")
                for _ in range(5):
                    t0 = time.process_time()
                    fn(table)
                    best = min(best, time.process_time() - t0)
                cells.append(f"{fn.__name__} {best * 1e3:.1f}")
            print(f"{path.name} ({len(table):,} events, {table.memory.get('ts_ns', ()).__len__():,} allocation "
                  f"records): " + ", ".join(cells) + " ms CPU")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
