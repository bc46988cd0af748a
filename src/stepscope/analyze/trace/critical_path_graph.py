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
  A CUDA event's waits (records with ``wait_on_cuda_event_record_corr_id``, ``EventTable.waits``): the event
  stands for the item launched last on its stream before its ``cudaEventRecord``; an ``Event Sync``
  (``cudaEventSynchronize``) ties that item's end to the end of the waiting call, a ``Stream Wait Event``
  (``cudaStreamWaitEvent``) to the start of the next item its thread launches on the waiting stream, which
  then has no launch or gap edge unless that one ends later than the awaited item.

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
STREAM_WAIT, EVENT_SYNC = "Stream Wait Event", "Event Sync"
EVENT_RECORD, STREAM_WAIT_CALL = "cudaEventRecord", "cudaStreamWaitEvent"


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

    node_row / node_start: the event (table row) of each node and whether the node is its start.
    linked: node k has an in-chain edge from k - 1, of weight ``w_in``, kind ``kind_in``, attributed to row
    ``attr_in`` (-1: none). cross_*: the other edges (launch and sync), sorted by destination.
    """

    node_row: Array
    node_start: Array
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


def host_rows(table: EventTable, window: tuple[int, int] | None = None) -> Array:
    """Operators and runtime calls of positive duration (HTA drops zero-length ones: they break its stacks), that
    start within ``window`` (ns, both ends included) where one is given."""
    kind = table["kind"]
    keep = ((kind == EventKind.CPU_OP) | (kind == EventKind.RUNTIME)) & (table["dur_ns"] > 0)
    if window is not None:
        ts = table["ts_ns"]
        keep &= (ts >= window[0]) & (ts <= window[1])
    return np.flatnonzero(keep)


def step_window(table: EventTable, annotation: str = "ProfilerStep",
                instances: tuple[int, int] = (0, 0)) -> tuple[int, int] | None:
    """HTA's window: the events whose name holds ``annotation``, in start order; from the start of instance
    ``instances[0]`` to the latest end among instances ``instances[0]..instances[1]`` (None: no such instance)."""
    hit = np.asarray([annotation in n for n in table.names], dtype=bool)
    rows = np.flatnonzero(hit[table["name"]]) if hit.any() else np.zeros(0, np.int64)
    lo, hi = instances
    rows = rows[lo:hi + 1]
    if not rows.size:
        return None
    ts = table["ts_ns"][rows]
    return int(ts.min()), int((ts + table["dur_ns"][rows]).max())


def _euler(table: EventTable, rows: Array) -> tuple[Array, Array, Array, Array]:
    """Host nodes in call-stack order per thread: (row position, is start, parent position, thread start flag),
    positions int32; every temporary freed as soon as it is used (the graph is built within a worker's memory)."""
    n = rows.size
    pid, tid = table["pid"][rows], table["tid"][rows]
    ts = table["ts_ns"][rows]
    end = ts + table["dur_ns"][rows]
    order = thread_order(pid, tid, ts, end)
    new = np.ones(n, dtype=bool)
    new[1:] = pid[order][1:] != pid[order][:-1]
    new[1:] |= tid[order][1:] != tid[order][:-1]
    par64 = parents(pid, tid, ts, end, table["kind"][rows] == EventKind.RUNTIME)
    del pid, tid, ts, end
    par = par64.astype(np.int32)
    del par64
    pos = np.empty(n, dtype=np.int32)
    pos[order] = np.arange(n, dtype=np.int32)
    thread = np.empty(n, dtype=np.int32)
    thread[order] = np.cumsum(new, dtype=np.int32)
    del new, order
    depth = np.zeros(n, dtype=np.int32)
    up = par.copy()
    while (has := up >= 0).any():  # a call stack is tens deep: one pass per level
        depth += has
        up[has] = par[up[has]]
    del up, has
    last = pos.copy()  # pre-order position of the last event of each subtree, deepest levels first
    for d in range(int(depth.max(initial=0)), 0, -1):
        at = np.flatnonzero(depth == d)
        np.maximum.at(last, par[at], last[at])
    # one sort key: an enter at its own position, an exit after its subtree, the deepest exit first
    key = np.empty(2 * n, dtype=np.int64)
    np.left_shift(pos, 17, out=key[:n], dtype=np.int64)
    np.left_shift(last, 17, out=key[n:], dtype=np.int64)
    key[n:] |= 1 << 16
    key[n:] += 0xFFFF - np.minimum(depth, 0xFFFF)
    del pos, last, depth
    tok = np.argsort(key).astype(np.int32)
    del key
    is_start = tok < n
    tok[~is_start] -= n
    th = thread[tok]
    first = np.ones(2 * n, dtype=bool)
    np.not_equal(th[1:], th[:-1], out=first[1:])
    return tok, is_start, par, first


def build_graph(table: EventTable, window: tuple[int, int] | None = None) -> PathGraph:
    """The graph of the whole trace (HTA's ``critical_path_analysis`` with the empty annotation), or of the host
    events that start in ``window`` and the GPU work they launched (HTA's annotation window)."""
    hrows = host_rows(table, window)
    host_mask = np.zeros(len(table), dtype=bool)
    host_mask[hrows] = True
    items, calls, notes = _launched(table, host_mask)
    del host_mask
    nh, ng = 2 * hrows.size, 2 * items.size
    n = nh + ng
    euler = _euler(table, hrows)  # before the graph's arrays exist: the two peaks do not add up
    # the graph's arrays, written in place: host chains first, then GPU streams
    node_row = np.empty(n, dtype=np.int32)
    node_start = np.empty(n, dtype=bool)
    linked = np.empty(n, dtype=bool)
    w_in = np.empty(n, dtype=np.int64)
    kind_in = np.empty(n, dtype=np.int8)
    attr_in = np.empty(n, dtype=np.int32)
    enter_of, exit_of = _host_part(table, hrows, euler, node_row[:nh], node_start[:nh], linked[:nh], w_in[:nh],
                                   kind_in[:nh], attr_in[:nh])
    del euler
    waits = _event_waits(table, items, hrows, window, notes)
    g = _gpu_part(table, items, calls, waits.gpu_src, nh, node_row[nh:], node_start[nh:], linked[nh:], w_in[nh:],
                  kind_in[nh:], attr_in[nh:])
    at = np.searchsorted(hrows, g.launch_call)  # the launching calls are host rows: their enter nodes
    launch_src = enter_of[at].astype(np.int64)
    s_src, s_dst = _sync_edges(table, g, hrows, exit_of)
    # a CUDA event's waits: the awaited item's end -> the next item's start / the waiting call's end
    dst_item = np.flatnonzero(waits.gpu_src >= 0)
    w_src = np.concatenate([g.end_node[waits.gpu_src[dst_item]], g.end_node[waits.host_src]])
    w_dst = np.concatenate([g.end_node[dst_item] - 1, exit_of[waits.host_at].astype(np.int64)])
    s_src, s_dst = np.concatenate([s_src, w_src]), np.concatenate([s_dst, w_dst])
    csrc = np.concatenate([launch_src, s_src])
    cdst = np.concatenate([g.launch_dst, s_dst])
    cw = np.concatenate([g.launch_w, np.zeros(s_src.size, np.int64)])
    ck = np.concatenate([np.full(launch_src.size, EdgeKind.LAUNCH, np.int8), np.full(s_src.size, EdgeKind.SYNC,
                                                                                      np.int8)])
    by_dst = np.argsort(cdst, kind="stable")
    return PathGraph(node_row=node_row, node_start=node_start, linked=linked, w_in=w_in, kind_in=kind_in,
                     attr_in=attr_in, cross_src=csrc[by_dst], cross_dst=cdst[by_dst], cross_w=cw[by_dst],
                     cross_kind=ck[by_dst], notes=tuple(notes))


def _host_part(table: EventTable, hrows: Array, euler: tuple[Array, Array, Array, Array], node_row: Array,
               node_start: Array, linked: Array, w: Array, kind: Array, attr: Array) -> tuple[Array, Array]:
    """Fill the host chains' part of the graph's arrays from :func:`_euler`'s order; return each host row's enter
    and exit node (by position in ``hrows``)."""
    ev, h_start, hpar, first = euler
    node_row[:] = hrows[ev]
    node_start[:] = h_start
    np.logical_not(first, out=linked)
    ts_all = table["ts_ns"]
    t = ts_all[node_row]  # each node's time: the event's start, or its end
    t[~h_start] += table["dur_ns"][node_row[~h_start]]
    w[0] = 0
    np.subtract(t[1:], t[:-1], out=w[1:])
    del t
    np.maximum(w, 0, out=w)
    prev_start = np.empty(ev.size, dtype=bool)
    prev_start[:1] = False
    prev_start[1:] = h_start[:-1]
    root = hpar[ev] < 0
    dep = ~first & ~prev_start & h_start & root
    dep[1:] &= root[:-1]  # a root's exit -> the next root: a dependency of weight 0
    del root
    blocking = _named(table, BLOCKING_CALLS)[table["name"][node_row]] & ~h_start
    w[dep | blocking | first] = 0
    del blocking
    kind[:] = np.where(dep, EdgeKind.DEPENDENCY, EdgeKind.CPU)
    # attribution (HTA's four cases): start->start, start->end: the source; end->end: the destination;
    # end->start: the source's parent
    src = np.empty(ev.size, dtype=np.int32)
    src[:1] = 0
    src[1:] = ev[:-1]
    at = np.where(prev_start, src, np.where(h_start, hpar[src], ev))
    del src, prev_start
    at[first | dep] = -1
    attr[:] = -1
    has = at >= 0
    attr[has] = hrows[at[has]]
    del at, has, dep
    enter_of = np.empty(hrows.size, dtype=np.int32)
    exit_of = np.empty(hrows.size, dtype=np.int32)
    enter_of[ev[h_start]] = np.flatnonzero(h_start)
    exit_of[ev[~h_start]] = np.flatnonzero(~h_start)
    return enter_of, exit_of


@dataclass(frozen=True, slots=True)
class _Gpu:
    launch_call: Array
    """Table rows of the calls behind the launch edges (host rows)."""
    launch_dst: Array
    launch_w: Array
    items: Array
    """Table rows of the launched items, in chain order (device, stream, start)."""
    chain: Array
    """Chain id (device, stream) of each item."""
    chain_keys: Array
    end_node: Array


def _launched(table: EventTable, host: Array) -> tuple[Array, Array, list[str]]:
    """GPU items whose launching call is a host node (and the calls' rows), in (device, stream, start) order."""
    work = np.flatnonzero(kind_mask(table["kind"], GPU_WORK_KINDS))
    call = pair_calls(table, work, launch_calls(table))
    ok = call >= 0
    ok[ok] = host[call[ok]]
    notes = []
    if (~ok).any():
        notes.append(f"{int((~ok).sum())} GPU work items without a launching call in the trace are left out of the "
                     "graph (as HTA does)")
    items, call = work[ok], call[ok]
    order = np.lexsort((items, table["stream"][items], table["device"][items]))  # rows are in start order
    return items[order], call[order], notes


def _gpu_part(table: EventTable, items: Array, call: Array, wait_src: Array, base: int, row: Array, start: Array,
              linked: Array, w_in: Array, kind_in: Array, attr: Array) -> _Gpu:
    """Fill the GPU streams' part of the graph's arrays (items chained per (device, stream)); ``wait_src``: per
    item, the item it waits for through a Stream Wait Event (position in ``items``, -1: none)."""
    dev = table["device"][items].astype(np.int64)
    stream = table["stream"][items]
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
    waited = np.where(wait_src >= 0, end[np.maximum(wait_src, 0)], np.iinfo(np.int64).min)  # awaited item's end
    launch = (ql_call == 1) & (ql_item == 0) & (new_chain | (prev_end < call_ts)) & (waited < call_ts)
    after = ~new_chain & ~launch & (waited < prev_end)  # from the previous item on the stream
    node = base + np.arange(2 * n, dtype=np.int64)
    start_node, end_node = node[0::2], node[1::2]
    linked[0::2] = after
    linked[1::2] = True
    w_in[0::2] = np.where(after, np.maximum(ts - prev_end, 0), 0)
    w_in[1::2] = end - ts
    kind_in[0::2] = EdgeKind.KERNEL_GAP
    kind_in[1::2] = EdgeKind.KERNEL
    attr[0::2] = np.where(after, np.r_[-1, items[:-1]], -1)  # a gap is the previous item's (as HTA)
    attr[1::2] = items
    row[0::2] = items
    row[1::2] = items
    start[0::2] = True
    start[1::2] = False
    keys = np.stack([dev[new_chain], stream[new_chain]], axis=1) if n else np.zeros((0, 2), np.int64)
    return _Gpu(launch_call=call[launch], launch_dst=start_node[launch],
                launch_w=np.maximum(ts[launch] - call_ts[launch], 0), items=items, chain=chain, chain_keys=keys,
                end_node=end_node)


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


def _sync_edges(table: EventTable, g: _Gpu, hrows: Array, exit_of: Array) -> tuple[Array, Array]:
    """Edges from the last item on a stream (every stream: Context Sync) to the end of the waiting call."""
    kind = table["kind"]
    syncs = np.flatnonzero(kind == EventKind.SYNC)
    if not syncs.size or not g.items.size:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    names = np.asarray(table.names, dtype=object)[table["name"][syncs]]
    call = pair_calls(table, syncs, launch_calls(table))
    at = np.minimum(np.searchsorted(hrows, call), max(hrows.size - 1, 0))
    host = (call >= 0) & (hrows[at] == call) if hrows.size else np.zeros(call.size, bool)
    waiter = np.where(host, exit_of[at], -1) if hrows.size else np.full(call.size, -1)
    at = table["ts_ns"][syncs] + table["dur_ns"][syncs]  # HTA orders syncs by their end among item starts
    item_ts = table["ts_ns"][g.items]
    src, dst = [], []
    for i in range(syncs.size):
        if waiter[i] < 0:
            continue
        if names[i] == CONTEXT_SYNC:
            chains: list[int] = list(range(g.chain_keys.shape[0]))
        elif names[i] == STREAM_SYNC:
            chains = np.flatnonzero(g.chain_keys[:, 1] == table["stream"][syncs[i]]).tolist()
        else:  # a CUDA event's wait: _event_waits
            continue
        for c in chains:
            lo, hi = np.searchsorted(g.chain, [c, c + 1])
            k = lo + int(np.searchsorted(item_ts[lo:hi], at[i], side="right")) - 1
            if k >= lo:
                src.append(int(g.end_node[k]))
                dst.append(int(waiter[i]))
    return np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)


class _Groups:
    """Launch calls grouped by a key (e.g. device and stream of their items), each group in call-start order."""

    def __init__(self, keys: tuple[Array, ...], ts: Array, items: Array) -> None:
        order = np.lexsort((ts, *reversed(keys)))
        self.ts, self.items = ts[order], items[order]
        cols = [k[order] for k in keys]
        edge = np.zeros(order.size, dtype=bool)
        edge[:1] = True
        for c in cols:
            edge[1:] |= c[1:] != c[:-1]
        starts = np.flatnonzero(edge).tolist()
        ends = [*starts[1:], order.size]
        self.ranges = {tuple(int(c[a]) for c in cols): (a, b) for a, b in zip(starts, ends)}

    def last_until(self, key: tuple[int, ...], t: int) -> int:
        """Item row of the group's last call starting at or before ``t`` (-1: none)."""
        lo, hi = self.ranges.get(key, (0, 0))
        k = lo + int(np.searchsorted(self.ts[lo:hi], t, side="right")) - 1
        return int(self.items[k]) if k >= lo else -1

    def first_from(self, key: tuple[int, ...], t: int) -> int:
        """Item row of the group's first call starting at or after ``t`` (-1: none)."""
        lo, hi = self.ranges.get(key, (0, 0))
        k = lo + int(np.searchsorted(self.ts[lo:hi], t, side="left"))
        return int(self.items[k]) if k < hi else -1


@dataclass(frozen=True, slots=True)
class _Waits:
    gpu_src: Array
    """Per graph item: the item it waits for through a Stream Wait Event (position in the items), -1: none."""
    host_src: Array
    """Event Sync edges: the awaited item (position in the items) ..."""
    host_at: Array
    """... and the waiting cudaEventSynchronize call (position in the host rows)."""


def _event_waits(table: EventTable, items: Array, hrows: Array, window: tuple[int, int] | None,
                 notes: list[str]) -> _Waits:
    """HTA's event syncs. A record's ``wait_on_cuda_event_record_corr_id`` names its ``cudaEventRecord`` call,
    whose event stands for the item launched last (by call start) on the recorded stream (``wait_on_stream``, on
    the record's device) up to that call. A Stream Wait Event's waiting item is the next item its
    ``cudaStreamWaitEvent`` call's thread launches on the record's stream; it waits only if the record ends
    before it starts (HTA meets them in that order), the latest such record if several."""
    none = _Waits(np.full(items.size, -1, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))
    w = table.waits
    kind, names = table["kind"], table.names
    syncs = np.flatnonzero(kind == EventKind.SYNC)
    if not w or not syncs.size or not items.size:
        return none
    corr = table["correlation"]
    at = np.minimum(np.searchsorted(w["correlation"], corr[syncs]), w["correlation"].size - 1)
    has = (w["correlation"][at] == corr[syncs]) & (corr[syncs] >= 0)
    syncs, rec_corr, rec_stream = syncs[has], w["record_corr"][at[has]], w["stream"][at[has]]
    # cudaEventRecord correlation -> (device, stream) recorded on: from any record that names the stream
    named = rec_stream >= 0
    rec_key = {c: (d, s) for c, d, s in zip(rec_corr[named].tolist(), table["device"][syncs[named]].tolist(),
                                          rec_stream[named].tolist())}
    # launch calls and their items (the whole trace, as HTA)
    work = np.flatnonzero(kind_mask(kind, GPU_WORK_KINDS))
    call = pair_calls(table, work, launch_calls(table, QUEUE_CALLS))
    work, call = work[call >= 0], call[call >= 0]
    on_stream = _Groups((table["device"][work], table["stream"][work]), table["ts_ns"][call], work)
    on_thread = _Groups((table["pid"][call], table["tid"][call], table["stream"][work]), table["ts_ns"][call], work)
    # the awaited item of each record call
    is_rec = np.asarray([n == EVENT_RECORD for n in names], dtype=bool)[table["name"]] if names else None
    rec_calls = np.flatnonzero(is_rec & (kind == EventKind.RUNTIME)) if is_rec is not None else np.zeros(0, np.int64)
    awaited: dict[int, int] = {}  # cudaEventRecord correlation -> table row of the item before it
    for r in rec_calls.tolist():
        key = rec_key.get(int(corr[r]))
        if key is not None and (item := on_stream.last_until(key, int(table["ts_ns"][r]))) >= 0:
            awaited[int(corr[r])] = item
    pos = np.argsort(items, kind="stable")
    sorted_items = items[pos]

    def item_pos(row: int) -> int:
        i = int(np.searchsorted(sorted_items, row))
        return int(pos[i]) if i < sorted_items.size and sorted_items[i] == row else -1

    waiters = pair_calls(table, syncs, launch_calls(table))
    ts, end = table["ts_ns"], table["ts_ns"] + table["dur_ns"]
    gpu_src = none.gpu_src.copy()
    gpu_when = np.full(items.size, np.iinfo(np.int64).min, np.int64)  # end of the record that set gpu_src
    host_src, host_at = [], []
    unmatched = 0
    for i, s in enumerate(syncs.tolist()):
        name, waiter = names[table["name"][s]], int(waiters[i])
        src_row = awaited.get(int(rec_corr[i]), -1)
        src = item_pos(src_row) if src_row >= 0 else -1
        if src < 0 or waiter < 0:
            unmatched += name in (STREAM_WAIT, EVENT_SYNC)
            continue
        if name == EVENT_SYNC:
            h = int(np.searchsorted(hrows, waiter))
            if h < hrows.size and hrows[h] == waiter:
                host_src.append(src)
                host_at.append(h)
        elif name == STREAM_WAIT:
            if window is not None and not window[0] <= ts[waiter] <= window[1]:
                continue
            nxt = on_thread.first_from((int(table["pid"][waiter]), int(table["tid"][waiter]),
                                        int(table["stream"][s])), int(ts[waiter]))
            dst = item_pos(nxt) if nxt >= 0 else -1
            if dst >= 0 and end[s] < ts[items[dst]] and end[s] >= gpu_when[dst]:
                gpu_src[dst], gpu_when[dst] = src, end[s]
    if unmatched:
        notes.append(f"{unmatched} Event Sync / Stream Wait Event records are not followed (as HTA): the "
                     "cudaEventRecord they wait for has no work launched before it on its stream in the graph")
    return _Waits(gpu_src, np.asarray(host_src, np.int64), np.asarray(host_at, np.int64))
