"""The analyses that work a few threads, a block of rows or a block of calls at a time give the same figures
whatever the sizes: run on every fixture with tiny chunks and blocks (many chunks, small threads grouped, big
ones alone, many blocks) and with the defaults, they agree array for array."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from stepscope.analyze.trace import intervals, ops
from stepscope.analyze.trace.gpuview import gpu_view
from stepscope.analyze.trace.ops import host_times, module_tree, operator_table
from stepscope.analyze.trace.steps import step_summary
from stepscope.traces.components import ComponentRules
from stepscope.traces.kineto import read_trace
from tests.traces.tracebuild import fixture_files


@pytest.mark.parametrize("path", fixture_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_tiny_chunks_and_blocks_give_the_same_figures(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    t = read_trace(path)
    gpu, rules = gpu_view(t), ComponentRules.defaults()

    def run() -> tuple[object, ...]:
        h = host_times(t, gpu)
        return (h, operator_table(t, h, rules), module_tree(t, h), step_summary(t, gpu))

    want = run()
    rows = want[0].rows  # type: ignore[attr-defined]
    key = ops.thread_key(t["pid"], t["tid"], rows)
    threads = np.unique(key).size
    for chunk, block in ((5, 3), (200, 97), (1200, 1000)):  # the last: a small thread, then a big one alone
        monkeypatch.setattr(ops, "CHUNK_EVENTS", chunk)
        monkeypatch.setattr(ops, "BLOCK_EVENTS", block)
        monkeypatch.setattr(intervals, "MERGE_BLOCK", block)
        chunks = list(ops._thread_chunks(key))
        assert sorted(np.concatenate(chunks).tolist()) == list(range(rows.size))
        for c in chunks:  # threads of at least ``chunk`` events alone, smaller ones grouped
            _, count = np.unique(key[c], return_counts=True)
            assert count.size == 1 or count.max() < chunk
        if chunk == 5 and threads > 1 and rows.size > 10:
            assert len(chunks) > 1
        got = run()
        for k in ("rows", "parent", "cpu_self_ns", "device_self_ns", "device_total_ns"):
            assert np.array_equal(getattr(got[0], k), getattr(want[0], k)), (chunk, k)
        assert got[1:] == want[1:], chunk
