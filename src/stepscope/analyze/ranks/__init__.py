"""Many ranks of one run: per-rank breakdowns, POP metrics and stragglers, roles, the communication
matrix, transfer vs synchronisation.

Its entry points (``_ENTRY_POINTS``) can be imported from the package itself; each is loaded on first use,
so the package's modules never import one another through it."""

from __future__ import annotations

from stepscope.analyze._entrypoints import lazy_exports

_ENTRY_POINTS = {
    "analyze_ranks": "ranks",
    "pop_metrics": "ranks",
    "find_stragglers": "ranks",
    "analyze_roles": "roles",
    "comm_matrix": "commmatrix",
    "CommMatrix": "commmatrix",
    "split_calls": "commsplit",
}
__all__ = sorted(_ENTRY_POINTS)

__getattr__ = lazy_exports(__name__, _ENTRY_POINTS)
