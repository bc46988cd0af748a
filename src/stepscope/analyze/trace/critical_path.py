"""Critical path of one rank: the longest chain of dependent host and GPU work (HTA's definition).

The graph is :mod:`stepscope.analyze.trace.critical_path_graph`'s. Its longest path is found chain by chain:
along a chain (a host thread, a GPU stream) the distance to node k is the best of "start a path at j (or
arrive at j by a cross edge) and walk the chain from j to k", a running maximum of ``incoming[j] - prefix[j]``
plus ``prefix[k]``. Cross edges (launches, syncs) feed ``incoming``; rounds repeat until no distance grows
(one round per hop between chains on the longest path, a handful in practice), each round a few NumPy passes;
past :data:`MAX_ROUNDS` one pass in topological order (in Python) takes over, and finds a cycle if there is one.

The result breaks the path's time down by kind (HTA's ``bound_by``: cpu, gpu compute / communication, the
gap between kernels on a stream, the launch delay; memory copies apart from compute) and by event name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from stepscope.analyze.trace.critical_path_graph import EdgeKind, PathGraph, build_graph, host_rows
from stepscope.analyze.trace.gpuview import GpuView, KernelType
from stepscope.analyze.trace.stepseries import distinct
from stepscope.model.events import EventKind, EventTable
from stepscope.traces.components import ComponentRules

Array = npt.NDArray[Any]
TOP = 10

KINDS = ("cpu", "gpu_compute", "gpu_memory", "gpu_communication", "kernel_gap", "launch_delay")
"""Breakdown keys. HTA's ``bound_by`` names: cpu_bound, gpu_compute_bound (= gpu_compute + gpu_memory),
gpu_communication_bound, gpu_kernel_kernel_overhead, gpu_kernel_launch_overhead."""


@dataclass(frozen=True, slots=True)
class PathItem:
    """Time on the path attributed to events of one name and kind (``KINDS``)."""

    name: str
    kind: str
    time_ns: int
    count: int

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "time_ns": self.time_ns, "count": self.count}


@dataclass(frozen=True, slots=True)
class PathCollective:
    """A communication kernel on the path: its group and instance number (order within the group on this
    rank, as every rank of the group calls its collectives in the same order), start, end and time on the path."""

    group: str
    name: str
    instance: int
    start_ns: int
    end_ns: int
    time_ns: int


@dataclass(frozen=True, slots=True)
class CriticalPath:
    """The critical path of one rank's trace (whole trace as the window, as HTA's empty annotation).

    length_ns: the path's weight (sum of its edges). span_ns: from its first node to its last.
    breakdown_ns: time per kind (``KINDS``). top: names with the most time on the path.
    event_rows: table rows of the events on the path, in path order (a report's timeline highlights them).
    edge_*: the path's edges in order: kind (``EdgeKind`` name), weight and attributed row (-1: none).
    collectives: communication kernels on the path; collective_starts: start of every collective instance of
    this rank per group (for :func:`stepscope.analyze.trace.critical_path_ranks.cross_rank_path`).
    """

    length_ns: int
    span_ns: int
    breakdown_ns: dict[str, int]
    top: tuple[PathItem, ...]
    event_rows: Array
    edge_kind: Array
    edge_weight: Array
    edge_row: Array
    graph_nodes: int
    graph_edges: int
    rounds: int
    notes: tuple[str, ...]
    collectives: tuple[PathCollective, ...] = ()
    collective_starts: dict[str, Array] = field(default_factory=dict)
    window_ns: tuple[int, int] | None = None
    """The window the path was found in (HTA's annotation window); None: the whole trace."""
    operators: tuple[PathItem, ...] = ()
    """CPU operators with the most time on the path, the GPU work they launched included (kind "operator")."""

    def to_dict(self) -> dict[str, Any]:
        return {"length_ns": self.length_ns, "span_ns": self.span_ns, "breakdown_ns": dict(self.breakdown_ns),
                "top": [t.to_dict() for t in self.top], "operators": [o.to_dict() for o in self.operators],
                "events": int(self.event_rows.size),
                "event_rows": self.event_rows.tolist(), "graph_nodes": self.graph_nodes,
                "window_ns": list(self.window_ns) if self.window_ns else None,
                "graph_edges": self.graph_edges, "notes": list(self.notes),
                "collectives": [{"group": c.group, "name": c.name, "instance": c.instance, "start_ns": c.start_ns,
                                 "end_ns": c.end_ns, "time_ns": c.time_ns} for c in self.collectives]}


@dataclass(frozen=True, slots=True)
class _Longest:
    """dist: longest distance to each node. base: ``segment * bound - prefix`` (prefix: weight along the chain
    segment up to the node), so that a walk along a segment from j to k weighs ``base[j] - base[k]``.
    targets / incoming: the nodes cross edges lead to and the best that arrives at each (sorted by node)."""

    dist: Array
    base: Array
    targets: Array
    incoming: Array
    rounds: int


MAX_ROUNDS = 64
"""Rounds of relaxation over the cross edges before the topological pass takes over."""


def _base(g: PathGraph) -> tuple[Array, Array | None]:
    """``segment * bound - prefix`` per node (one node-sized array): the running maximum of ``base + incoming``
    along the nodes is then the best walk within each segment, ``bound`` (twice the graph's total weight, above
    any distance) keeping a segment's maximum from leaking into the next. Where ``segments * bound`` would pass
    int64, ``base`` is ``-prefix`` alone and the segments' starts are returned: their maxima are then taken
    segment by segment."""
    n = g.node_row.size
    base = np.where(g.linked, g.w_in, 0)
    np.cumsum(base, out=base)
    starts = np.flatnonzero(~g.linked)
    bound = 2 * (int(base[-1]) + int(g.cross_w.sum()) + 1) if n else 1
    apart = not starts.size or (starts.size - 1) * bound < 2**62
    shift = base[starts] + (np.arange(starts.size, dtype=np.int64) * bound if apart else 0)
    np.subtract(np.repeat(shift, np.diff(np.append(starts, n))), base, out=base)
    return base, None if apart else starts


def longest(g: PathGraph, *, max_rounds: int = MAX_ROUNDS) -> _Longest:
    """Longest distance to every node (a path may start anywhere; all weights >= 0). Two node-sized arrays:
    ``base`` and one to work in; what arrives by cross edges is kept per target node only."""
    base, starts = _base(g)
    targets, slot = np.unique(g.cross_dst, return_inverse=True)
    incoming = np.zeros(targets.size, dtype=np.int64)
    work = np.empty_like(base)

    def along(incoming: Array) -> None:
        np.copyto(work, base)
        work[targets] += incoming
        if starts is None:
            np.maximum.accumulate(work, out=work)
        else:  # a trace too long for one pass: segment by segment
            for lo, hi in zip(starts.tolist(), [*starts[1:].tolist(), work.size]):
                np.maximum.accumulate(work[lo:hi], out=work[lo:hi])
        np.subtract(work, base, out=work)  # the distance to each node

    def arriving() -> Array:
        nxt = np.zeros(targets.size, dtype=np.int64)
        np.maximum.at(nxt, slot, work[g.cross_src] + g.cross_w)
        return nxt

    rounds = 0
    while rounds < max_rounds:
        rounds += 1
        along(incoming)
        if not targets.size:
            break
        nxt = arriving()
        if np.array_equal(nxt, incoming):
            break
        incoming = nxt
    else:  # many hops between chains (syncs all along the trace), or a cycle: one pass in topological order
        work[:] = topological_longest(g)
        incoming = arriving()
    return _Longest(dist=work, base=base, targets=targets, incoming=incoming, rounds=rounds)


def _walk(g: PathGraph, lp: _Longest) -> tuple[list[tuple[int, int]], list[int]]:
    """The path backwards: chain ranges [j, k] and, between them, the cross edge taken (index)."""
    k = int(np.argmax(lp.dist))
    starts = np.flatnonzero(~g.linked)
    ranges: list[tuple[int, int]] = []
    cross: list[int] = []
    for _ in range(g.node_row.size + 1):  # a bound: each node is left at most once
        s = int(starts[np.searchsorted(starts, k, side="right") - 1])
        val = lp.base[s:k + 1].copy()  # the walk's start j within the segment: the first best ``base + incoming``
        lo, hi = np.searchsorted(lp.targets, [s, k + 1])
        val[lp.targets[lo:hi] - s] += lp.incoming[lo:hi]
        j = s + int(np.argmax(val))
        ranges.append((j, k))
        t = int(np.searchsorted(lp.targets, j))
        arrived = int(lp.incoming[t]) if t < lp.targets.size and lp.targets[t] == j else 0
        if arrived <= 0:
            break
        lo, hi = np.searchsorted(g.cross_dst, [j, j + 1])
        hit = np.flatnonzero(lp.dist[g.cross_src[lo:hi]] + g.cross_w[lo:hi] == arrived)
        e = int(lo + hit[0])
        cross.append(e)
        k = int(g.cross_src[e])
    return ranges[::-1], cross[::-1]


def topological_longest(g: PathGraph) -> Array:
    """Longest distance to every node by one pass in topological order (Kahn's), in Python: the fallback when
    the rounds do not settle. Raises :class:`CycleError` if the graph has a cycle."""
    n = g.node_row.size
    linked, w_in = g.linked.tolist(), g.w_in.tolist()
    by_src = np.argsort(g.cross_src, kind="stable")
    out_dst, out_w = g.cross_dst[by_src].tolist(), g.cross_w[by_src].tolist()
    out_at = np.searchsorted(g.cross_src[by_src], np.arange(n + 1)).tolist()
    indeg = (g.linked.astype(np.int64) + np.bincount(g.cross_dst, minlength=n)).tolist()
    dist = [0] * n
    ready = [v for v in range(n) if indeg[v] == 0]
    done = 0
    while ready:
        u = ready.pop()
        done += 1
        du = dist[u]
        nxt = u + 1
        if nxt < n and linked[nxt]:
            if du + w_in[nxt] > dist[nxt]:
                dist[nxt] = du + w_in[nxt]
            indeg[nxt] -= 1
            if not indeg[nxt]:
                ready.append(nxt)
        for e in range(out_at[u], out_at[u + 1]):
            v = out_dst[e]
            if du + out_w[e] > dist[v]:
                dist[v] = du + out_w[e]
            indeg[v] -= 1
            if not indeg[v]:
                ready.append(v)
    if done < n:
        raise CycleError(f"the dependency graph has a cycle through {n - done} of its {n} nodes (clocks skewed "
                         "between host and device: a kernel placed before the call that launched it)")
    return np.asarray(dist, dtype=np.int64)


class CycleError(ValueError):
    """The graph has a cycle: no longest path (HTA fails on such a trace too)."""


def critical_path(table: EventTable, *, rules: ComponentRules | None = None, gpu: GpuView | None = None,
                  window: tuple[int, int] | None = None) -> CriticalPath | None:
    """The critical path of one rank's trace; None when the trace has no host operators or runtime calls, or
    when its graph has a cycle (clocks skewed between host and device).

    gpu: the table's GPU view where already built (its components say which kernels communicate). window: only
    the host events starting in it (ns) and the GPU work they launched (:func:`step_window` gives HTA's)."""
    if not host_rows(table, window).size:  # GPU items join the graph through their launching call: none without
        return None
    g = build_graph(table, window)
    try:
        lp = longest(g)
    except CycleError:
        return None
    ranges, cross = _walk(g, lp)
    length, rounds = int(lp.dist[ranges[-1][1]]), lp.rounds
    del lp  # the search's arrays go before the path's are built (a worker's peak)
    nodes, kinds, weights, rows = [], [], [], []
    launched = []  # per cross edge on the path: the item a launch edge leads to (its operator pays the delay)
    for i, (j, k) in enumerate(ranges):
        if i:
            e = cross[i - 1]
            kinds.append(np.asarray([g.cross_kind[e]], np.int8))
            weights.append(np.asarray([g.cross_w[e]], np.int64))
            rows.append(np.asarray([-1], np.int32))
            launched.append(int(g.node_row[g.cross_dst[e]]) if g.cross_kind[e] == EdgeKind.LAUNCH else -1)
        nodes.append(np.arange(j, k + 1))
        kinds.append(g.kind_in[j + 1:k + 1])
        weights.append(g.w_in[j + 1:k + 1])
        rows.append(g.attr_in[j + 1:k + 1])
    node = np.concatenate(nodes)
    ek, ew, er = np.concatenate(kinds), np.concatenate(weights), np.concatenate(rows)
    del nodes, kinds, weights, rows
    path_rows = g.node_row[node]
    span = _node_time(table, g, int(node[-1])) - _node_time(table, g, int(node[0]))
    size, edges, notes = int(g.node_row.size), g.edges, g.notes
    del g, node
    op_rows = er.astype(np.int64)
    op_rows[np.flatnonzero(ek == EdgeKind.LAUNCH)] = [r for r in launched if r >= 0]
    # a launch edge is the item's (HTA attributes it to no event: its time is launch delay either way)
    comm = comm_rows(table, rules or ComponentRules.defaults(), gpu)
    bucket = _buckets(table, ek, er, comm)
    breakdown = {name: int(ew[bucket == i].sum()) for i, name in enumerate(KINDS)}
    _, first = np.unique(path_rows, return_index=True)
    event_rows = path_rows[np.sort(first)]
    return CriticalPath(
        length_ns=length, span_ns=span, breakdown_ns=breakdown, top=_top(table, ew, er, bucket),
        operators=_operators(table, ew, op_rows, bucket),
        event_rows=event_rows, edge_kind=ek, edge_weight=ew, edge_row=er, graph_nodes=size, graph_edges=edges,
        rounds=rounds, notes=notes, collectives=_path_collectives(table, ew, er, bucket, comm),
        collective_starts=collective_starts(table, comm), window_ns=window)


def _node_time(table: EventTable, g: PathGraph, node: int) -> int:
    """A node's time: its event's start, or its end."""
    r = int(g.node_row[node])
    return int(table["ts_ns"][r]) + (0 if g.node_start[node] else int(table["dur_ns"][r]))


def _buckets(table: EventTable, ek: Array, er: Array, comm: Array) -> Array:
    """Index into ``KINDS`` of each path edge (-1: weightless dependency or sync)."""
    out = np.full(ek.size, -1, dtype=np.int8)
    out[ek == EdgeKind.CPU] = 0
    out[ek == EdgeKind.KERNEL_GAP] = 4
    out[ek == EdgeKind.LAUNCH] = 5
    k = np.flatnonzero(ek == EdgeKind.KERNEL)
    if k.size:
        memory = table["kind"][er[k]] != EventKind.KERNEL
        out[k] = np.where(comm[er[k]], 3, np.where(memory, 2, 1))
    return out


def comm_rows(table: EventTable, rules: ComponentRules, gpu: GpuView | None = None) -> Array:
    """Per row: a communication kernel (the component rules' communication, or collective args)."""
    kernel = table["kind"] == EventKind.KERNEL
    out: Array = kernel & (table["coll"] >= 0)
    if gpu is not None:
        out[gpu.rows[gpu.ktype == KernelType.COMMUNICATION]] = True
        return out
    names = distinct(table["name"][kernel])  # only kernels' names are classified (the rules are regexes)
    comps = rules.component_names()
    if names.size and "communication" in comps:
        is_comm = np.zeros(len(table.names), dtype=bool)
        is_comm[names] = [rules.classify(table.names[int(n)]) == "communication" for n in names]
        out |= kernel & is_comm[table["name"]]
    return out


def _top(table: EventTable, ew: Array, er: Array, bucket: Array) -> tuple[PathItem, ...]:
    """Time on the path per (name, kind), the largest first (counted per name code: no sort of the path)."""
    have = (er >= 0) & (bucket >= 0)
    if not have.any():
        return ()
    key = table["name"][er[have]].astype(np.int64) * len(KINDS) + bucket[have]
    size = len(table.names) * len(KINDS)
    time = np.bincount(key, weights=ew[have], minlength=size)
    count = np.bincount(key, minlength=size)
    hit = np.flatnonzero(count)
    order = hit[np.argsort(-time[hit], kind="stable")][:TOP]
    return tuple(PathItem(name=table.names[int(k) // len(KINDS)], kind=KINDS[int(k) % len(KINDS)],
                          time_ns=int(time[k]), count=int(count[k])) for k in order if time[k] > 0)


def _operators(table: EventTable, ew: Array, rows: Array, bucket: Array) -> tuple[PathItem, ...]:
    """Time on the path per CPU operator: its own host edges, and the GPU time, gaps and launch delays of the
    work it launched (GPU items and runtime calls name their operator by ``External id``). Kind "operator";
    time not traced to an operator is left out."""
    keep = (rows >= 0) & (bucket >= 0)
    rows, w = rows[keep], ew[keep]
    kind, ext = table["kind"], table["external_id"]
    op_at = np.flatnonzero((kind == EventKind.CPU_OP) & (ext >= 0))
    op_at = op_at[np.argsort(ext[op_at], kind="stable")]
    own = kind[rows] == EventKind.CPU_OP
    want = ext[rows]
    i = np.clip(np.searchsorted(ext[op_at], want), 0, max(op_at.size - 1, 0))
    found = (want >= 0) & (op_at.size > 0) & (ext[op_at][i] == want) if op_at.size else np.zeros(rows.size, bool)
    op = np.where(own, rows, np.where(found, op_at[i] if op_at.size else -1, -1))
    has = op >= 0
    if not has.any():
        return ()
    names = table["name"][op[has]].astype(np.int64)
    time = np.bincount(names, weights=w[has], minlength=len(table.names))
    count = np.bincount(names, minlength=len(table.names))
    hit = np.flatnonzero(count)
    order = hit[np.argsort(-time[hit], kind="stable")][:TOP]
    return tuple(PathItem(name=table.names[int(k)], kind="operator", time_ns=int(time[k]), count=int(count[k]))
                 for k in order if time[k] > 0)


def _group_of(table: EventTable, rows: Array) -> list[str]:
    """Process group and collective of each communication kernel (its name where the trace has no args)."""
    out = []
    for r, c in zip(rows.tolist(), table["coll"][rows].tolist()):
        if c >= 0:
            a = table.colls[c]
            out.append(f"{a.group_name or a.group_ranks or ''}|{a.name}")
        else:
            out.append(f"|{table.names[int(table['name'][r])].split('(')[0]}")  # the kernel's name, no parameters
    return out


def collective_starts(table: EventTable, comm: Array) -> dict[str, Array]:
    """Start (ns) of each communication kernel (``comm``: per row), per group key, in call order."""
    rows = np.flatnonzero(comm)
    if not rows.size:
        return {}
    groups = np.asarray(_group_of(table, rows), dtype=object)
    return {str(k): table["ts_ns"][rows[groups == k]] for k in dict.fromkeys(groups.tolist())}


def _path_collectives(table: EventTable, ew: Array, er: Array, bucket: Array,
                      comm_mask: Array) -> tuple[PathCollective, ...]:
    on = np.flatnonzero(bucket == 3)
    if not on.size:
        return ()
    rows = er[on]
    ts = table["ts_ns"]
    comm = np.flatnonzero(comm_mask)
    groups_all = np.asarray(_group_of(table, comm), dtype=object)
    out = []
    for r, t in zip(rows.tolist(), ew[on].tolist()):
        at = int(np.searchsorted(comm, r))
        key = str(groups_all[at])
        instance = int((groups_all[:at] == key).sum())
        group, _, name = key.partition("|")
        out.append(PathCollective(group=group, name=name, instance=instance, start_ns=int(ts[r]),
                                  end_ns=int(ts[r] + table["dur_ns"][r]), time_ns=int(t)))
    return tuple(out)
