"""CPU operator table and module tree of one rank (launch statistics: launches.py)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from stepscope.analyze.trace.gpuview import GpuView, KernelType
from stepscope.analyze.trace.intervals import unique_sorted
from stepscope.analyze.trace.nesting import parents
from stepscope.analyze.trace.sets import member, unique_inverse
from stepscope.model.events import EventKind, EventTable
from stepscope.traces.components import ComponentRules

Array = npt.NDArray[Any]
MODULE_PREFIX = "nn.Module: "


@dataclass(frozen=True, slots=True)
class HostTimes:
    """Per host event (operators, annotations, Python functions): parent, self CPU, GPU self/total.
    kernel_self_ns: the part of device_self_ns in compute kernels (not communication kernels, memory copies or
    memsets): the roofline's time."""

    rows: Array
    parent: Array
    cpu_self_ns: Array
    device_self_ns: Array
    device_total_ns: Array
    kernel_self_ns: Array


def host_times(table: EventTable, gpu: GpuView) -> HostTimes:
    """CPU self time from nesting; GPU time of each GPU work item goes to the operator that launched it
    (see :func:`_launching_ops`) and, for GPU total, to every enclosing host event.

    Nesting never crosses threads, so it is computed a few threads at a time (:func:`_thread_chunks`): the
    working set is that of the largest chunk, not of every host event at once. Positions are int32."""
    kind, corr = table["kind"], table["correlation"]
    rows = _small(np.flatnonzero(_IS_HOST[kind]), len(table))
    rt = np.flatnonzero((kind == EventKind.RUNTIME) & (corr >= 0))
    rt = _small(rt[member(corr[rt], corr[gpu.rows])], len(table))  # only the calls that launched GPU work
    thread = thread_key(table["pid"], table["tid"], rows, rt)  # host events first, then the calls
    par_all = np.full(thread.size, -1, dtype=rows.dtype)
    for sel in _thread_chunks(thread):
        at = np.empty(sel.size, dtype=rows.dtype)  # rows of the chunk's positions (those past rows: calls)
        k = int(np.searchsorted(sel, rows.size))
        np.take(rows, sel[:k], out=at[:k])
        at[k:] = rt[sel[k:] - rows.size]
        leaf = np.zeros(sel.size, dtype=bool)
        leaf[k:] = True
        # the thread keys and columns are passed as temporaries that ``parents`` alone holds (and frees once used)
        par = parents(thread[sel], np.broadcast_to(thread[sel[:1]], sel.shape), table["ts_ns"][at], _ends(table, at),
                      leaf=leaf)
        del at, leaf
        has = par >= 0
        par_all[sel[has]] = sel[par[has]]
        del par, has
    del thread
    par = par_all[:rows.size]
    owner = _launching_ops(table, gpu, rows, par, rt, par_all[rows.size:])
    par = par.copy()
    del par_all
    dev_self = np.zeros(rows.size, dtype=np.int64)
    hit = owner >= 0
    np.add.at(dev_self, owner[hit], table["dur_ns"][gpu.rows[hit]])
    dev_total = subtree_sums(dev_self, par)  # the peak: before kernel_self exists (owner is per GPU item, smaller)
    kernel_self = np.zeros(rows.size, dtype=np.int64)
    hit &= (gpu.kind == EventKind.KERNEL) & (gpu.ktype != KernelType.COMMUNICATION)
    np.add.at(kernel_self, owner[hit], table["dur_ns"][gpu.rows[hit]])
    del owner, hit
    cpu_self = table["dur_ns"][rows]
    child = np.zeros(rows.size, dtype=np.int64)  # summed durations of each event's children
    for i in range(0, rows.size, BLOCK_EVENTS):
        p, d = par[i:i + BLOCK_EVENTS], cpu_self[i:i + BLOCK_EVENTS]
        np.add.at(child, p[p >= 0], d[p >= 0])
    cpu_self -= child
    del child
    np.maximum(cpu_self, 0, out=cpu_self)
    return HostTimes(rows, par, cpu_self, dev_self, dev_total, kernel_self)


CHUNK_EVENTS = 1 << 14
"""Threads with fewer events than this are nested together, up to about this many events per chunk."""


def _thread_chunks(thread: Array) -> Iterator[Array]:
    """Positions of ``thread`` (ascending) grouped by thread value: one chunk per thread of at least
    :data:`CHUNK_EVENTS` events, smaller neighbouring threads (in key order) together."""
    keys = unique_sorted(thread)
    if keys.size < 2:
        yield np.arange(thread.size, dtype=np.int32 if thread.size < 2**31 else np.int64)
        return
    count = np.bincount(np.searchsorted(keys, thread), minlength=keys.size).tolist()
    lo, size = 0, 0
    for i, c in enumerate(count):
        if size and c >= CHUNK_EVENTS:  # a big thread on its own, after the small ones before it
            yield _small(np.flatnonzero((thread >= keys[lo]) & (thread < keys[i])), thread.size)
            lo, size = i, 0
        size += c
        if size >= CHUNK_EVENTS or i == keys.size - 1:
            yield _small(np.flatnonzero((thread >= keys[lo]) & (thread <= keys[i])), thread.size)
            lo, size = i + 1, 0


def _ends(table: EventTable, at: Array) -> Array:
    """``ts_ns + dur_ns`` of the rows ``at``."""
    end = table["dur_ns"][at]
    end += table["ts_ns"][at]
    return end


def _small(index: Array, n: int) -> Array:
    """Positions below ``n`` as int32 where they fit (half the bytes of NumPy's default int64)."""
    return index.astype(np.int32) if n < 2**31 else index


_IS_HOST = np.zeros(len(EventKind), dtype=bool)
_IS_HOST[[EventKind.CPU_OP, EventKind.USER_ANNOTATION, EventKind.PYTHON_FUNCTION]] = True
"""Indexed by kind code: host events (operators, annotations, Python functions)."""


def thread_key(pid: Array, tid: Array, *at: Array) -> Array:
    """One integer per event (per position of the index arrays ``at``, one after another, where given) whose
    order is that of its (pid, tid) pair (int32 where the pairs fit): what
    :func:`~stepscope.analyze.trace.nesting.parents` needs of the threads, in one small column. Gathered and
    coded a block of positions at a time."""
    parts: list[tuple[Array | None, slice]] = [
        (a, slice(i, min(i + BLOCK_EVENTS, a.size))) for a in at for i in range(0, a.size, BLOCK_EVENTS)]
    if not at:
        parts = [(None, slice(i, min(i + BLOCK_EVENTS, pid.size))) for i in range(0, pid.size, BLOCK_EVENTS)]

    def part(col: Array, a: Array | None, b: slice) -> Array:
        return col[a[b]] if a is not None else col[b]

    pu = unique_sorted(np.concatenate([pid[:0]] + [unique_sorted(part(pid, a, b)) for a, b in parts]))
    tu = unique_sorted(np.concatenate([tid[:0]] + [unique_sorted(part(tid, a, b)) for a, b in parts]))
    wide = pu.size * tu.size >= 2**31
    key: Array = np.empty(sum(a.size for a in at) if at else pid.size, dtype=np.int64 if wide else np.int32)
    at_key = 0
    for a, b in parts:
        k = key[at_key:at_key + b.stop - b.start]
        at_key += k.size
        k[:] = np.searchsorted(pu, part(pid, a, b))
        k *= tu.size
        k += np.searchsorted(tu, part(tid, a, b)).astype(key.dtype)
    return key


BLOCK_EVENTS = 1 << 14
"""Positions gathered at a time where a whole-length temporary is not needed."""


def subtree_sums(values: Array, par: Array) -> Array:
    """Each node's value plus those of all its descendants (``par``: parent index, -1 for roots), summed
    level by level from the deepest up (integers: the order of additions does not change the sums). Depths
    by pointer doubling: each round adds the depth counted at the node's current ancestor and jumps there."""
    total = values.copy()
    small: type[np.signedinteger[Any]] = np.int32 if par.size < 2**31 else np.int64  # below n: half the bytes
    depth: Array = (par >= 0).astype(small)
    up: Array = par.astype(small)
    live = np.flatnonzero(up >= 0).astype(small)
    while live.size:
        nxt = up[live]
        depth[live], up[live] = depth[live] + depth[nxt], up[nxt]  # right side read before assigning
        live = live[up[live] >= 0]
    del up, live
    by_depth = np.argsort(depth, kind="stable").astype(small)
    cut = np.searchsorted(depth[by_depth], np.arange(int(depth.max(initial=0)) + 2))
    del depth
    for d in range(cut.size - 2, 0, -1):
        at = by_depth[cut[d]:cut[d + 1]]
        np.add.at(total, par[at], total[at])
    return total


def _launching_ops(table: EventTable, gpu: GpuView, rows: Array, par: Array, rt: Array, rt_par: Array) -> Array:
    """For each GPU work item, the position in ``rows`` (host events, parents ``par``) of the CPU operator
    that launched it, -1 where none can be told. ``rt``: runtime calls, ``rt_par``: their innermost host event.

    First the innermost operator enclosing the launching runtime call (same correlation id) on the same
    (pid, tid), as HTA's call graph does; where the call is not in the trace or runs outside every
    operator, the operator with the item's (else its call's) ``External id``. An External id equal to the
    item's correlation id is a copy of the correlation (PyTorch 1.x-era Kineto writes one for every
    event), not an operator's id, and is never matched: it would pick an unrelated operator.
    """
    owner = np.full(len(gpu), -1, dtype=np.int64)
    is_op = table["kind"][rows] == EventKind.CPU_OP
    if not is_op.any() or not len(gpu):
        return owner
    up = rt_par.copy()
    while True:  # from the innermost host event (maybe an annotation or a Python function) up to an operator
        climb = np.flatnonzero(up >= 0)
        climb = climb[~is_op[up[climb]]]
        if not climb.size:
            break
        up[climb] = par[up[climb]]
    corr_all = table["correlation"]
    o_rt = np.argsort(corr_all[rt], kind="stable")
    rt, up = rt[o_rt], up[o_rt]
    g_corr = corr_all[gpu.rows]
    g_rt = np.full(len(gpu), -1, dtype=np.int64)
    if rt.size:
        i = np.clip(np.searchsorted(corr_all[rt], g_corr), 0, rt.size - 1)
        found = (corr_all[rt[i]] == g_corr) & (g_corr >= 0)
        g_rt[found] = i[found]
        owner[found] = up[i[found]]
    missing = np.flatnonzero(owner < 0)
    if missing.size:
        ext = table["external_id"][gpu.rows[missing]].copy()
        ext[ext == g_corr[missing]] = -1
        via = g_rt[missing]
        use_rt = (ext < 0) & (via >= 0)
        if use_rt.any():
            r = rt[via[use_rt]]
            ext[use_rt] = np.where(table["external_id"][r] != corr_all[r], table["external_id"][r], -1)
        op_local = np.flatnonzero(is_op)
        op_ext = table["external_id"][rows[op_local]]
        o = np.argsort(op_ext, kind="stable")
        j = np.clip(np.searchsorted(op_ext[o], ext), 0, o.size - 1)
        ok = (op_ext[o[j]] == ext) & (ext >= 0)
        owner[missing[ok]] = op_local[o[j[ok]]]
    return owner


@dataclass(frozen=True, slots=True)
class OpStats:
    """One operator name (all its calls on this rank), times from the trace in ns.

    cpu_total_ns: summed call durations (nested calls of the same name count again). cpu_self_ns: minus
    time in nested host events. device_self_ns: GPU work launched directly by the operator (matched by
    external id / correlation). device_total_ns: including work launched by nested operators.
    shapes: the most frequent recorded input shapes (JSON), most common first.
    """

    name: str
    component: str
    calls: int
    cpu_total_ns: int
    cpu_self_ns: int
    device_self_ns: int
    device_total_ns: int
    shapes: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k in self.__slots__ for v in [getattr(self, k)]}


OP_SORT_KEYS = ("cpu_total", "cpu_self", "device_total", "device_self", "calls")


def operator_table(table: EventTable, host: HostTimes, rules: ComponentRules) -> tuple[OpStats, ...]:
    """Operators sorted by device_total then cpu_total (largest first)."""
    local = _small(np.flatnonzero(table["kind"][host.rows] == EventKind.CPU_OP), host.rows.size)
    op_rows = host.rows[local]
    names = table["name"][op_rows]
    present = np.zeros(len(table.names), dtype=bool)
    present[names] = True
    uniq = np.flatnonzero(present)  # the names called, in code order
    codes = (np.cumsum(present) - 1).astype(np.int32)[names]
    del names, present
    sums = {k: np.zeros(uniq.size, dtype=np.int64) for k in ("cpu_total", "cpu_self", "device_self", "device_total")}
    calls = np.zeros(uniq.size, dtype=np.int64)
    # a block of calls at a time; each block's sums are integers below 2^53 ns, exact in float64, so adding
    # them up block by block gives the sums of one whole-length bincount
    columns = (("cpu_total", table["dur_ns"], op_rows), ("cpu_self", host.cpu_self_ns, local),
               ("device_self", host.device_self_ns, local), ("device_total", host.device_total_ns, local))
    for i in range(0, local.size, BLOCK_EVENTS):
        c = codes[i:i + BLOCK_EVENTS]
        calls += np.bincount(c, minlength=uniq.size)
        for k, col, at in columns:
            sums[k] += np.bincount(c, weights=col[at[i:i + BLOCK_EVENTS]], minlength=uniq.size).astype(np.int64)
    del columns
    del local
    shapes = _top_shapes(table, op_rows, codes, uniq.size)
    out = [OpStats(table.names[n], rules.classify(table.names[n]), int(calls[i]), int(sums["cpu_total"][i]),
                   int(sums["cpu_self"][i]), int(sums["device_self"][i]), int(sums["device_total"][i]), shapes[i])
           for i, n in enumerate(uniq.tolist())]
    return tuple(sorted(out, key=lambda o: (-o.device_total_ns, -o.cpu_total_ns, o.name)))


def _top_shapes(table: EventTable, rows: Array, codes: Array, n: int, top: int = 3) -> list[tuple[str, ...]]:
    """Per operator code, its ``top`` most frequent shapes, ties in order of first appearance in ``rows``
    (``Counter.most_common``)."""
    shape = table["shape"][rows]
    have = np.flatnonzero(shape >= 0)
    out: list[list[str]] = [[] for _ in range(n)]
    if not have.size:
        return [()] * n
    width = int(shape[have].max()) + 1
    pairs, at, count = unique_inverse(codes[have].astype(np.int64) * width + shape[have])
    first = np.full(pairs.size, have.size, dtype=np.int64)
    np.minimum.at(first, at, np.arange(have.size))
    op, shp = np.divmod(pairs, width)
    o = np.lexsort((first, -count, op))  # per operator: most frequent first, then first seen
    op, shp = op[o], shp[o]
    rank = np.arange(op.size) - np.searchsorted(op, op)
    for c, s in zip(op[rank < top].tolist(), shp[rank < top].tolist()):
        out[c].append(table.shapes[s])
    return [tuple(x) for x in out]


@dataclass(frozen=True, slots=True)
class ModuleNode:
    """One nn.Module path (from python_function events "nn.Module: X"), all its calls.

    cpu_ns: summed call durations. device_ns: GPU work launched inside the calls (attributed as for ops).
    """

    path: tuple[str, ...]
    calls: int
    cpu_ns: int
    device_ns: int

    def to_dict(self) -> dict[str, Any]:
        return {"path": list(self.path), "depth": len(self.path) - 1, "calls": self.calls, "cpu_ns": self.cpu_ns,
                "device_ns": self.device_ns}


def module_tree(table: EventTable, host: HostTimes) -> tuple[ModuleNode, ...]:
    """Module paths in tree order (parents before children); empty without module events."""
    names = table["name"][host.rows]
    is_mod = np.asarray([n.startswith(MODULE_PREFIX) for n in table.names], dtype=bool)
    local = np.flatnonzero(is_mod[names]) if names.size else np.empty(0, dtype=np.int64)
    path_of: dict[int, tuple[str, ...]] = {}
    agg: dict[tuple[str, ...], list[int]] = {}
    par = host.parent  # read one parent at a time: a list of every host event's parent is 2 MB per 57k events
    for j in sorted(local.tolist(), key=lambda r: int(host.rows[r])):
        up = int(par[j])
        while up >= 0 and up not in path_of:
            up = int(par[up])
        path = (*path_of.get(up, ()), table.names[names[j]][len(MODULE_PREFIX):])
        path_of[j] = path
        a = agg.setdefault(path, [0, 0, 0])
        a[0] += 1
        a[1] += int(table["dur_ns"][host.rows[j]])
        a[2] += int(host.device_total_ns[j])
    return tuple(ModuleNode(p, *v) for p, v in sorted(agg.items()))
