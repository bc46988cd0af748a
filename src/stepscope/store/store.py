"""The store: a folder of run directories plus the SQL index over them.

Location: ``--store`` / ``STEPSCOPE_HOME``, else ``./.stepscope`` in the current directory.
Index: ``--db`` / ``STEPSCOPE_DB`` (a PostgreSQL URL for a team), else ``<store>/index.sqlite``.
"""

from __future__ import annotations

import difflib
import os
import re
import secrets
import shutil
from collections.abc import Callable
from pathlib import Path

import orjson

from stepscope.errors import NotFoundError, StoreFormatError, UserError
from stepscope.model.run import Run
from stepscope.model.tables import RunData
from stepscope.store.formats import check_version
from stepscope.store.index import Index, RunRow
from stepscope.store.rundir import read_run, read_run_manifest

STORE_FORMAT = "stepscope-store"
STORE_VERSION = 1
_ALPHABET = "abcdefghijkmnpqrstuvwxyz23456789"  # no 0/o/1/l: ids are read aloud and typed


def default_root() -> Path:
    env = os.environ.get("STEPSCOPE_HOME")
    return Path(env) if env else Path.cwd() / ".stepscope"


class Store:
    """Run directories under ``root/runs`` and the index. Create with :func:`open_store`."""

    def __init__(self, root: Path, db_url: str | None) -> None:
        self.root = root
        self.runs_dir = root / "runs"
        self.db_url = db_url or str(root / "index.sqlite")
        self._index: Index | None = None

    @property
    def index(self) -> Index:
        if self._index is None:
            self._index = Index(self.db_url)
        return self._index

    def close(self) -> None:
        if self._index is not None:
            self._index.close()
            self._index = None

    # -- creating runs ----------------------------------------------------------------------------
    def new_run_dir(self) -> tuple[str, Path]:
        """A fresh run id and its directory, created atomically (mkdir fails on a collision)."""
        for _ in range(100):
            run_id = "".join(secrets.choice(_ALPHABET) for _ in range(8))
            path = self.runs_dir / run_id
            try:
                path.mkdir(parents=True)
            except FileExistsError:
                continue
            return run_id, path
        raise UserError(f"could not create a run directory in {self.runs_dir}")

    def run_path(self, run_id: str) -> Path:
        return self.runs_dir / run_id

    # -- finding runs ---------------------------------------------------------------------------------
    def rows(self) -> list[RunRow]:
        """Every indexed run, newest first. A row still ``running`` is checked against its run directory
        (a killed launcher never updated it): see rundir.live_status."""
        return [self._live(r) if r.status == "running" else r for r in self.index.runs()]

    def _live(self, row: RunRow) -> RunRow:
        from dataclasses import replace

        from stepscope.store.rundir import live_status

        live = live_status(self.run_path(row.id))
        if live is None or live[0].value == row.status:
            return row
        return replace(row, status=live[0].value, end_ns=live[1], exit_code=live[2])

    def resolve(self, ref: str) -> str:
        """A run id from ``latest``, ``latest~N``, an id, a unique id prefix or a run name (newest wins)."""
        rows = self.rows()
        m = re.fullmatch(r"latest(?:~(\d+))?", ref)
        if m:
            n = int(m.group(1) or 0)
            if n >= len(rows):
                raise NotFoundError(f"{ref}: the store has {len(rows)} run(s) — `stepscope ls` lists them")
            return rows[n].id
        ids = [r.id for r in rows]
        if ref in ids:
            return ref
        prefixed = [i for i in ids if i.startswith(ref)]
        if len(prefixed) == 1:
            return prefixed[0]
        if len(prefixed) > 1:
            raise UserError(f"{ref}: ambiguous id prefix, matches {', '.join(prefixed[:5])} — give more characters")
        named = [r.id for r in rows if r.name == ref]
        if named:
            return named[0]
        if (self.runs_dir / ref / "manifest.json").is_file():
            return ref  # on disk but not (yet) indexed
        close = difflib.get_close_matches(ref, ids + sorted({r.name for r in rows}), n=3, cutoff=0.5)
        hint = f"closest: {', '.join(close)}" if close else "`stepscope ls` lists the runs"
        raise NotFoundError(f"no run {ref!r} in {self.root} — {hint}")

    def load(self, ref: str) -> RunData:
        return read_run(self.run_path(self.resolve(ref)))

    def manifest(self, ref: str) -> Run:
        return read_run_manifest(self.run_path(self.resolve(ref)))[0]

    def remove(self, ref: str) -> str:
        run_id = self.resolve(ref)
        self.index.remove_run(run_id)
        shutil.rmtree(self.run_path(run_id), ignore_errors=True)
        return run_id

    def reindex(self, summarize: Callable[[RunData], dict[str, float]]) -> tuple[int, list[str]]:
        """Rebuild the index from the run directories. Returns (runs indexed, damaged run messages)."""
        done, bad = 0, []
        for path in sorted(self.runs_dir.glob("*/manifest.json")):
            try:
                data = read_run(path.parent)
            except StoreFormatError as e:
                bad.append(str(e))
                continue
            self.index.upsert_run(data.run, str(path.parent), summarize(data))
            done += 1
        return done, bad


def open_store(root: str | Path | None = None, db: str | None = None, *, create: bool = False) -> Store:
    """Open (and with ``create``, make) a store; a one-line UserError when it cannot be used."""
    path = Path(root) if root else default_root()
    db_url = db or os.environ.get("STEPSCOPE_DB") or None
    marker = path / "store.json"
    if marker.is_file():
        try:
            doc = orjson.loads(marker.read_bytes())
        except (OSError, orjson.JSONDecodeError) as e:
            raise StoreFormatError(f"{marker}: unreadable ({e}) — is this a stepscope store?") from None
        check_version(doc, fmt=STORE_FORMAT, current=STORE_VERSION, what=str(marker), migrations={})
    elif create:
        try:
            (path / "runs").mkdir(parents=True, exist_ok=True)
            tmp = path / f".store.json.{os.getpid()}"
            tmp.write_bytes(orjson.dumps({"format": STORE_FORMAT, "version": STORE_VERSION}))
            os.replace(tmp, marker)
        except OSError as e:
            raise UserError(f"cannot write the store at {path}: {e.strerror or e} — pass a writable --store "
                            "or set STEPSCOPE_HOME") from None
    elif path.exists():
        raise UserError(f"{path} is not a stepscope store (no store.json) — pass --store or set STEPSCOPE_HOME")
    else:
        raise NotFoundError(f"no stepscope store at {path} — record a run with `stepscope run -- python train.py` "
                            "or pass --store")
    if create and not os.access(path / "runs", os.W_OK):
        raise UserError(f"the store at {path} is not writable — pass a writable --store or set STEPSCOPE_HOME")
    return Store(path, db_url)
