"""Communication calls of each rank's trace, and the rank x rank matrix of a set of traces.

Each GPU communication kernel is one call. Newer PyTorch (2.x) writes the call's parameters on the kernel
(``Collective name``, ``In msg nelems``, ``dtype``, ``Process Group Ranks``, ... kept in the EventTable as
:class:`~stepscope.model.events.CollectiveArgs`): bytes = ``In msg nelems`` x the dtype's size (for a
receive, the larger of in and out), the group = ``Process Group Ranks`` (else, when ``Group size`` equals
the world size, every rank), a send's / receive's peer = ``Dst Rank`` / ``Src Rank`` (else the other
member of a two-rank group). Older traces only have the kernel name (``ncclKernel_AllReduce_...``): the
collective comes from the name, the group is the world of ``distributedInfo`` (none without it), the
bytes are unknown (time only), and a ``SendRecv`` kernel's peer is known only in a world of two. Time is
the kernel's GPU duration. The matrix conventions are those of :mod:`stepscope.analyze.ranks.commmatrix`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from stepscope.analyze.ranks.commmatrix import CommCall, CommMatrix, matrix_from_calls
from stepscope.analyze.trace.gpuview import KernelType, gpu_view
from stepscope.model.events import CollectiveArgs, EventKind, EventTable

DTYPE_BYTES = {
    "Float": 4, "Double": 8, "Half": 2, "BFloat16": 2, "Long": 8, "Int": 4, "Short": 2, "Char": 1, "Byte": 1,
    "Bool": 1, "ComplexHalf": 4, "ComplexFloat": 8, "ComplexDouble": 16, "QInt8": 1, "QUInt8": 1, "QInt32": 4,
    "QUInt4x2": 1, "QUInt2x4": 1, "Float8_e4m3fn": 1, "Float8_e5m2": 1, "Float8_e4m3fnuz": 1,
    "Float8_e5m2fnuz": 1, "UInt16": 2, "UInt32": 4, "UInt64": 8, "Bits8": 1, "Bits16": 2,
}
"""Bytes per element of PyTorch scalar type names, as Kineto writes them in ``dtype``."""
KERNEL_COLLECTIVE = re.compile(r"^(?:nccl|rccl)(?:Dev)?Kernel_([A-Za-z]+?)(?:_|\(|$)", re.IGNORECASE)
NAME_OPS = {"allreduce": "allreduce", "allgather": "allgather", "reducescatter": "reduce_scatter",
            "broadcast": "broadcast", "reduce": "reduce", "sendrecv": "sendrecv", "alltoall": "alltoall"}
"""Collective from an NCCL/RCCL kernel name (lower-cased word after ``Kernel_``)."""
TRACE_CONVENTION = ("p2p: bytes sender->receiver (max of the two sides); collectives: each rank's payload (In msg "
                    "nelems x dtype size) spread evenly over the other group members; time: the communication "
                    "kernel's GPU duration, collectives spread evenly")


@dataclass(frozen=True, slots=True)
class RankComm:
    """One rank's communication calls from its trace.

    with_args: kernels carrying PyTorch's collective args. from_name: kernels read from their name only
    (older traces). unknown: communication kernels whose collective the name does not tell either.
    """

    rank: int
    world_size: int | None
    calls: tuple[CommCall, ...]
    with_args: int
    from_name: int
    unknown: int


def _call_from_args(a: CollectiveArgs, dur: float, rank: int, world: int | None) -> CommCall:
    size = DTYPE_BYTES.get(a.dtype or "")
    group = a.group_ranks
    if group is None and a.group_size is not None and a.group_size == world:
        group = tuple(range(world))
    op = a.name.lstrip("_").lower()
    if op in ("send", "recv"):
        nelems = max(a.in_nelems or 0, a.out_nelems or 0) if a.in_nelems is not None or a.out_nelems is not None \
            else None
        peer = a.dst_rank if op == "send" else a.src_rank
        if peer is None and group is not None and len(group) == 2 and rank in group:
            peer = group[0] if group[1] == rank else group[1]
        return CommCall(op, None if nelems is None or size is None else float(nelems * size), dur,
                        peer=-1 if peer is None else peer)
    nbytes = None if a.in_nelems is None or size is None else float(a.in_nelems * size)
    return CommCall(op, nbytes, dur, group=group if group is not None and rank in group else None)


def _call_from_name(name: str, dur: float, rank: int, world: int | None) -> CommCall | None:
    m = KERNEL_COLLECTIVE.match(name)
    op = NAME_OPS.get(m.group(1).lower()) if m else None
    if op is None:
        return None
    if op == "sendrecv":
        return CommCall(op, None, dur, peer=1 - rank if world == 2 and rank in (0, 1) else -1)
    return CommCall(op, None, dur, group=tuple(range(world)) if world and 0 <= rank < world else None)


def trace_comm_calls(table: EventTable) -> RankComm:
    """Every GPU communication kernel of one rank's trace as a :class:`CommCall`."""
    gpu = gpu_view(table)
    rows = gpu.rows[(gpu.ktype == KernelType.COMMUNICATION) & (gpu.kind == EventKind.KERNEL)]
    rank, world = table.meta.rank, table.meta.world_size
    calls: list[CommCall] = []
    with_args = from_name = unknown = 0
    for code, name, dur in zip(table["coll"][rows].tolist(), table["name"][rows].tolist(),
                               table["dur_ns"][rows].tolist(), strict=True):
        if code >= 0:
            calls.append(_call_from_args(table.colls[code], float(dur), rank, world))
            with_args += 1
            continue
        call = _call_from_name(table.names[name], float(dur), rank, world)
        if call is None:
            unknown += 1
        else:
            calls.append(call)
            from_name += 1
    return RankComm(rank, world, tuple(calls), with_args, from_name, unknown)


def _notes(per_rank: Sequence[RankComm], errors: Sequence[str]) -> list[str]:
    notes = list(errors)
    from_name = sum(r.from_name for r in per_rank)
    if from_name:
        worlds = sorted({r.world_size for r in per_rank if r.from_name and r.world_size})
        notes.append(f"{from_name} communication kernels carry no collective args (older PyTorch): collective "
                     f"from the kernel name, group = all ranks of distributedInfo's world"
                     f"{' (' + ', '.join(map(str, worlds)) + ')' if worlds else ' (not recorded: unattributed)'}, "
                     "bytes not recorded (time only)")
    unknown = sum(r.unknown for r in per_rank)
    if unknown:
        notes.append(f"{unknown} communication kernels name no known collective and carry no args: left out")
    if not any(r.calls for r in per_rank) and not unknown:
        notes.append("no communication kernels in the traces")
    return notes


def comm_matrix(per_rank: Sequence[RankComm], *, errors: Sequence[str] = (), top: int = 5) -> CommMatrix:
    """The matrix of ranks' calls (pure: reading the traces is
    :func:`stepscope.executor.traceset.comm_matrix_from_traces`). errors: files that could not be read."""
    return matrix_from_calls({r.rank: r.calls for r in per_rank}, source="traces", convention=TRACE_CONVENTION,
                             notes=_notes(per_rank, errors), top=top)


__all__ = ["DTYPE_BYTES", "RankComm", "comm_matrix", "trace_comm_calls"]
