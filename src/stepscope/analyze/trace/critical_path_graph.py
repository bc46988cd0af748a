"""The dependency graph of one rank's trace, as HolisticTraceAnalysis defines it for its critical path.

Every host operator / runtime call and every launched GPU work item is two nodes, its start and its end.
Edges, each with a weight in ns (the time it spans) and the event it is attributed to:

- host: on each thread, the nodes in call-stack order (enter, enter child, exit child, ..., exit); an edge
  spans the time between two consecutive nodes. The exit of a blocking call (``cudaStreamSynchronize``,
  ``cudaMemcpy``, ...) weighs 0: its wait is counted on the GPU side through a sync edge. Between two
  top-level operators of a thread: a dependency edge of weight 0 (the thread's idle time is not work).
- GPU: each item spans its duration. The item before it on its stream leads to it (kernel-to-kernel gap),
  unless it was launched onto an empty queue after that item had ended: then its launching call's start
  leads to it (launch delay = item start - call start).
- sync: ``Stream Sync`` (``cudaStreamSynchronize``) and ``Context Sync`` (``cudaDeviceSynchronize``) events
  tie the last item on the stream (every stream) to the end of the call that waited for it (weight 0).

Graph nodes are laid out chain by chain (a host thread, then a GPU stream): almost every edge joins two
neighbours of a chain, so the longest path is computed with cumulative sums and maxima per chain, and a few
rounds over the remaining (cross) edges (:mod:`stepscope.analyze.trace.critical_path`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any

import numpy as np
import numpy.typing as npt

from stepscope.analyze.trace.launches import launch_calls, pair_calls
from stepscope.analyze.trace.nesting import parents, thread_order
from stepscope.analyze.trace.sets import kind_mask
from stepscope.model.events import GPU_WORK_KINDS, EventKind, EventTable

Array = npt.NDArray[Any]

BLOCKING_CALLS = ("cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventQuery", "cudaEventSynchronize",
                  "cudaMemcpy", "cudaMemcpyAsync")
"""Calls whose duration is a wait for the GPU (HTA's list): their exit edge weighs 0."""
QUEUE_CALLS = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cudaMemcpyAsync", "cudaMemsetAsync",
               "runFunction - job_prep_and_submit_for_execution", "hipLaunchKernel", "hipExtModuleLaunchKernel",
               "hipMemsetAsync", "hipMemcpyAsync", "hipMemcpyWithStream")
"""Launch calls counted in a stream's queue (HTA's): an item launched by another call never gets a launch edge."""
STREAM_SYNC, CONTEXT_SYNC = "Stream Sync", "Context Sync"


class EdgeKind(IntEnum):
    """What an edge's time is (HTA's edge types, the operator type split into host and GPU)."""

    CPU = 0
    KERNEL = 1
    KERNEL_GAP = 2
    LAUNCH = 3
    DEPENDENCY = 4
    SYNC = 5


@dataclass(frozen=True, slots=True)
class PathGraph:
    """Nodes laid out chain after chain; edge ``k`` of a chain joins node ``k - 1`` to node ``k``.

    node_row / node_start / node_ts: the event (table row) of each node, whether it is its start, its time.
    linked: node k has an in-chain edge from k - 1, of weight ``w_in``, kind ``kind_in``, attributed to row
    ``attr_in`` (-1: none). cross_*: the other edges (launch and sync), sorted by destination.
    """

    node_row: Array
    node_start: Array
    node_ts: Array
    linked: Array
    w_in: Array
    kind_in: Array
    attr_in: Array
    cross_src: Array
    cross_dst: Array
    cross_w: Array
    cross_kind: Array
    notes: tuple[str, ...]

    @property
    def edges(self) -> int:
        return int(self.linked.sum()) + int(self.cross_src.size)


def _named(table: EventTable, names: tuple[str, ...]) -> Array:
    """Per name code: whether the name is one of ``names``."""
    want = frozenset(names)
    return np.asarray([n in want for n in table.names], dtype=bool)


def host_rows(table: EventTable) -> Array:
    """Operators and runtime calls of positive duration (HTA drops zero-length ones: they break its stacks)."""
    kind = table["kind"]
    return np.flatnonzero(((kind == EventKind.CPU_OP) | (kind == EventKind.RUNTIME)) & (table["dur_ns"] > 0))


def _euler(table: EventTable, rows: Array) -> tuple[Array, Array, Array, Array]:
    """Host nodes in call-stack order per thread: (row position, is start, parent position, thread start flag)."""
    pid, tid = table["pid"][rows], table["tid"][rows]
    ts = table["ts_ns"][rows]
    end = ts + table["dur_ns"][rows]
    leaf = table["kind"][rows] == EventKind.RUNTIME
    par = parents(pid, tid, ts, end, leaf)
    order = thread_order(pid, tid, ts, end).astype(np.int64)
    pos = np.empty(rows.size, dtype=np.int64)
    pos[order] = np.arange(rows.size)
    depth = np.zeros(rows.size, dtype=np.int64)
    up = par.copy()
    while (has := up >= 0).any():  # a call stack is tens deep: one pass per level
        depth += has
        up[has] = par[up[has]]
    last = pos.copy()  # pre-order position of the last event of each subtree, deepest levels first
    for d in range(int(depth.max(initial=0)), 0, -1):
        at = np.flatnonzero(depth == d)
        np.maximum.at(last, par[at], last[at])
    n = rows.size
    key = np.concatenate([2 * pos, 2 * last + 1])  # enter at its own position, exit after its subtree ...
    sub = np.concatenate([np.zeros(n, np.int64), -depth])  # ... the deepest exit first
    tok = np.lexsort((sub, key))
    ev = np.concatenate([np.arange(n), np.arange(n)])[tok]
    is_start = tok < n
    thread = np.empty(n, dtype=np.int64)
    thread[order] = np.cumsum(np.r_[True, (pid[order][1:] != pid[order][:-1]) | (tid[order][1:] != tid[order][:-1])])
    th = thread[ev]
    first = np.r_[True, th[1:] != th[:-1]]
    return ev, is_start, par, first


def build_graph(table: EventTable) -> PathGraph:
    """The graph of the whole trace (HTA's ``critical_path_analysis`` with the empty annotation)."""
    hrows = host_rows(table)
    ts_all, dur_all = table["ts_ns"], table["dur_ns"]
    ev, h_start, hpar, first = _euler(table, hrows)
    h_row = hrows[ev]
    h_ts = np.where(h_start, ts_all[h_row], ts_all[h_row] + dur_all[h_row])
    nh = h_row.size
    # host in-chain edges
    prev_start = np.r_[False, h_start[:-1]]
    w = np.r_[0, np.diff(h_ts)]
    root = hpar[ev] < 0
    dep = ~first & ~prev_start & h_start & root & np.r_[False, root[:-1]]  # a root's exit -> the next root
    blocking = _named(table, BLOCKING_CALLS)[table["name"][h_row]]
    kind = np.where(dep, EdgeKind.DEPENDENCY, EdgeKind.CPU).astype(np.int8)
    w = np.where(dep | (blocking & ~h_start), 0, np.maximum(w, 0))
    w[first] = 0
    # attribution (HTA's four cases): start->start, start->end: the source; end->end: the destination;
    # end->start: the source's parent
    src_ev = np.r_[0, ev[:-1]]
    par_src = hpar[src_ev]
    attr_pos = np.where(prev_start, src_ev, np.where(~h_start, ev, par_src))
    attr = np.where(attr_pos >= 0, hrows[np.maximum(attr_pos, 0)], -1)
    attr[first | dep] = -1
    enter_node = np.empty(hrows.size, dtype=np.int64)
    exit_node = np.empty(hrows.size, dtype=np.int64)
    enter_node[ev[h_start]] = np.flatnonzero(h_start)
    exit_node[ev[~h_start]] = np.flatnonzero(~h_start)
    node_of_row = np.full(len(table), -1, dtype=np.int64)  # host row -> its enter node
    node_of_row[hrows] = enter_node
    exit_of_row = np.full(len(table), -1, dtype=np.int64)
    exit_of_row[hrows] = exit_node

    g = _gpu_part(table, node_of_row, nh)
    notes = list(g.notes)
    cross_src = [g.launch_src]
    cross_dst = [g.launch_dst]
    cross_w = [g.launch_w]
    s_src, s_dst = _sync_edges(table, g, exit_of_row, notes)
    cross_src.append(s_src)
    cross_dst.append(s_dst)
    cross_w.append(np.zeros(s_src.size, np.int64))
    ck = np.concatenate([np.full(g.launch_src.size, EdgeKind.LAUNCH, np.int8), np.full(s_src.size, EdgeKind.SYNC,
                                                                                        np.int8)])
    csrc, cdst, cw = (np.concatenate(a) for a in (cross_src, cross_dst, cross_w))
    by_dst = np.argsort(cdst, kind="stable")
    return PathGraph(
        node_row=np.concatenate([h_row, g.row]), node_start=np.concatenate([h_start, g.start]),
        node_ts=np.concatenate([h_ts, g.ts]), linked=np.concatenate([~first, g.linked]),
        w_in=np.concatenate([w, g.w_in]), kind_in=np.concatenate([kind, g.kind_in]),
        attr_in=np.concatenate([attr, g.attr_in]), cross_src=csrc[by_dst], cross_dst=cdst[by_dst],
        cross_w=cw[by_dst], cross_kind=ck[by_dst], notes=tuple(notes))


@dataclass(frozen=True, slots=True)
class _Gpu:
    row: Array
    start: Array
    ts: Array
    linked: Array
    w_in: Array
    kind_in: Array
    attr_in: Array
    launch_src: Array
    launch_dst: Array
    launch_w: Array
    items: Array
    """Table rows of the launched items, in chain order (device, stream, start)."""
    chain: Array
    """Chain id (device, stream) of each item."""
    chain_keys: Array
    end_node: Array
    notes: tuple[str, ...]


def _gpu_part(table: EventTable, node_of_row: Array, base: int) -> _Gpu:
    """Nodes of the GPU items whose launching call is a host node, chained per (device, stream)."""
    kind = table["kind"]
    work = np.flatnonzero(kind_mask(kind, GPU_WORK_KINDS))
    call = pair_calls(table, work, launch_calls(table))
    ok = call >= 0
    ok[ok] = node_of_row[call[ok]] >= 0
    items, call = work[ok], call[ok]
    notes = []
    if (~ok).any():
        notes.append(f"{int((~ok).sum())} GPU work items without a launching call in the trace are left out of the "
                     "graph (as HTA does)")
    dev = table["device"][items].astype(np.int64)
    stream = table["stream"][items]
    order = np.lexsort((items, stream, dev))  # rows are in start order: (device, stream, start)
    items, call, dev, stream = items[order], call[order], dev[order], stream[order]
    n = items.size
    new_chain = np.r_[True, (dev[1:] != dev[:-1]) | (stream[1:] != stream[:-1])] if n else np.zeros(0, bool)
    chain = np.cumsum(new_chain) - 1
    ts = table["ts_ns"][items]
    end = ts + table["dur_ns"][items]
    call_ts = table["ts_ns"][call]
    prev_end = np.r_[0, end[:-1]]
    # HTA's queue per stream: +1 at each counted launch call, -1 at each item's start; a launch edge needs
    # the item to be the only one queued at its launch (1) and nothing queued behind it at its start (0)
    counted = _named(table, QUEUE_CALLS)[table["name"][call]] if n else np.zeros(0, bool)
    qa, qb = _queue_lengths(chain[counted], call_ts[counted], ts[counted])
    ql_call, ql_item = np.full(n, -1, np.int64), np.full(n, -1, np.int64)
    ql_call[counted], ql_item[counted] = qa, qb
    launch = (ql_call == 1) & (ql_item == 0) & (new_chain | (prev_end < call_ts))
    after = ~new_chain & ~launch  # from the previous item on the stream
    node = base + np.arange(2 * n, dtype=np.int64)
    start_node, end_node = node[0::2], node[1::2]
    linked = np.ones(2 * n, dtype=bool)
    linked[0::2] = after
    w_in = np.zeros(2 * n, dtype=np.int64)
    w_in[0::2] = np.where(after, np.maximum(ts - prev_end, 0), 0)
    w_in[1::2] = end - ts
    kind_in = np.empty(2 * n, dtype=np.int8)
    kind_in[0::2] = EdgeKind.KERNEL_GAP
    kind_in[1::2] = EdgeKind.KERNEL
    attr = np.empty(2 * n, dtype=np.int64)
    attr[0::2] = np.where(after, np.r_[-1, items[:-1]], -1)  # a gap is the previous item's (as HTA)
    attr[1::2] = items
    row = np.repeat(items, 2)
    start = np.tile(np.array([True, False]), n)
    nts = np.empty(2 * n, dtype=np.int64)
    nts[0::2], nts[1::2] = ts, end
    keys = np.stack([dev[new_chain], stream[new_chain]], axis=1) if n else np.zeros((0, 2), np.int64)
    return _Gpu(row=row, start=start, ts=nts, linked=linked, w_in=w_in, kind_in=kind_in, attr_in=attr,
                launch_src=node_of_row[call[launch]], launch_dst=start_node[launch],
                launch_w=np.maximum(ts[launch] - call_ts[launch], 0), items=items, chain=chain, chain_keys=keys,
                end_node=end_node, notes=tuple(notes))


def _queue_lengths(chain: Array, call_ts: Array, item_ts: Array) -> tuple[Array, Array]:
    """Queue length of each item's stream just after its launch call and just after its start."""
    n = chain.size
    ts = np.concatenate([call_ts, item_ts])
    step = np.concatenate([np.ones(n, np.int64), -np.ones(n, np.int64)])
    ch = np.concatenate([chain, chain])
    order = np.lexsort((ts, ch))  # stable: on equal times, launches before starts
    level = np.cumsum(step[order])
    first = np.r_[True, ch[order][1:] != ch[order][:-1]] if order.size else np.zeros(0, bool)
    base = np.maximum.accumulate(np.where(first, np.arange(order.size), 0)) if order.size else order
    before = np.r_[0, level[:-1]]
    level = level - before[base]
    out = np.empty(2 * n, dtype=np.int64)
    out[order] = level
    return out[:n], out[n:]


def _sync_edges(table: EventTable, g: _Gpu, exit_of_row: Array, notes: list[str]) -> tuple[Array, Array]:
    """Edges from the last item on a stream (every stream: Context Sync) to the end of the waiting call."""
    kind = table["kind"]
    syncs = np.flatnonzero(kind == EventKind.SYNC)
    if not syncs.size or not g.items.size:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    names = np.asarray(table.names, dtype=object)[table["name"][syncs]]
    call = pair_calls(table, syncs, launch_calls(table))
    waiter = np.where(call >= 0, exit_of_row[np.maximum(call, 0)], -1)
    at = table["ts_ns"][syncs] + table["dur_ns"][syncs]  # HTA orders syncs by their end among item starts
    item_ts = table["ts_ns"][g.items]
    src, dst = [], []
    other = 0
    for i in range(syncs.size):
        if waiter[i] < 0:
            continue
        if names[i] == CONTEXT_SYNC:
            chains: list[int] = list(range(g.chain_keys.shape[0]))
        elif names[i] == STREAM_SYNC:
            chains = np.flatnonzero(g.chain_keys[:, 1] == table["stream"][syncs[i]]).tolist()
        else:
            other += 1
            continue
        for c in chains:
            lo, hi = np.searchsorted(g.chain, [c, c + 1])
            k = lo + int(np.searchsorted(item_ts[lo:hi], at[i], side="right")) - 1
            if k >= lo:
                src.append(int(g.end_node[k]))
                dst.append(int(waiter[i]))
    if other:
        notes.append(f"{other} Event Sync / Stream Wait Event records are not used (the trace reader keeps no "
                     "wait_on_cuda_event_record args): paths through cudaEventSynchronize waits are not followed")
    return np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
