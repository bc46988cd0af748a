"""Change stamps of what the dashboard shows, so that `dashboard build` redoes only what changed and `serve`
answers from what it built for the same state of the store. A stamp is a digest: equal stamps, equal pages.
Computing one reads the raw index tables once (no JSON decoded, no analysis) and the directories of the few
runs it is asked about; this module imports nothing heavy, so an unchanged build costs little more than
reading the index."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from stepscope.store import Store


def code_stamp() -> str:
    """A digest of stepscope's installed files (names, sizes, modification times): pages made by other code
    are not reused."""
    import stepscope

    root = Path(stepscope.__file__).resolve().parent
    h = hashlib.sha1(stepscope.__version__.encode())
    for p in sorted(root.rglob("*")):
        if p.suffix in (".py", ".js", ".css") and p.is_file():
            st = p.stat()
            h.update(f"{p.relative_to(root)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def _running_states(store: Store, rows: list[tuple[Any, ...]], status_at: int) -> list[tuple[str, Any]]:
    """(id, state in its run directory) of each row the index calls running: its launcher may be gone."""
    from stepscope.store.rundir import live_status

    out = []
    for t in rows:
        if t[status_at] == "running":
            try:
                state = live_status(store.run_path(str(t[0])))
            except Exception:  # an unsafe id or a link out of the store: its pages say so, nothing to follow
                state = None
            out.append((str(t[0]), repr(state)))
    return out


def _tables(store: Store, ids: Sequence[str] | None) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], int]:
    from stepscope.store.index import RUN_COLUMNS

    args = list(ids or ())
    marks = ", ".join("?" * len(args))
    rows = store.index.query(f"SELECT {', '.join(RUN_COLUMNS)} FROM runs"
                             + (f" WHERE id IN ({marks})" if ids is not None else "") + " ORDER BY id", args)
    metrics = store.index.query("SELECT run_id, name, value FROM run_metrics"
                                + (f" WHERE run_id IN ({marks})" if ids is not None else "")
                                + " ORDER BY run_id, name", args)
    return rows, metrics, RUN_COLUMNS.index("status")


def site_stamp(store: Store, options: Any = ()) -> str:
    """The stamp of every page but the full reports and diffs: every indexed row and metric value (a running
    row with its run directory's state), the build's options and the code."""
    rows, metrics, status_at = _tables(store, None)
    h = hashlib.sha1(f"{options!r}|{code_stamp()}|".encode())
    h.update(repr(rows).encode())
    h.update(repr(metrics).encode())
    h.update(repr(_running_states(store, rows, status_at)).encode())
    return h.hexdigest()


def run_stamps(store: Store, ids: Sequence[str]) -> dict[str, str]:
    """Run id -> the stamp of its full report page: its index row and metric values, its state if running,
    and every file of its run directory (name, size, modification time), so records a running run appends,
    or a trace added later, change it. Ids not in the index get a stamp too (of nothing indexed)."""
    rows, metrics, status_at = _tables(store, ids)
    parts: dict[str, list[Any]] = {i: [] for i in ids}
    for t in rows:
        parts.setdefault(str(t[0]), []).append(t)
    for m in metrics:
        parts.setdefault(str(m[0]), []).append(m)
    for run_id, state in _running_states(store, rows, status_at):
        parts[run_id].append(state)
    return {i: _dir_stamp(store, i, repr(p)) for i, p in parts.items()}


def _dir_stamp(store: Store, run_id: str, indexed: str) -> str:
    h = hashlib.sha1(indexed.encode())
    try:
        root = store.run_path(run_id)
        for p in sorted(root.rglob("*")):
            if p.is_symlink():  # never followed; a link added or removed changes the stamp
                h.update(f"{p.relative_to(root)}: link\n".encode())
            elif p.is_file():
                st = p.stat()
                h.update(f"{p.relative_to(root)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    except OSError:
        h.update(b"unreadable")
    except Exception:  # an unsafe id (UserError): stamped as such; its page is refused elsewhere
        h.update(b"refused")
    return h.hexdigest()
