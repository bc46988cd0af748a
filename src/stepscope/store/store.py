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
from dataclasses import dataclass
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


_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
"""What a run directory's name may be: no separators, no `..`, no leading dot, at most 128 characters."""


def default_root() -> Path:
    env = os.environ.get("STEPSCOPE_HOME")
    return Path(env) if env else Path.cwd() / ".stepscope"


def is_safe_id(run_id: str) -> bool:
    """Can ``run_id`` name a run directory of a store (a plain name, never a path)?"""
    return bool(_SAFE_ID.fullmatch(run_id)) and ".." not in run_id


def shown(ref: str, limit: int = 60) -> str:
    """A user-given reference, quoted and cut short for a one-line message."""
    return repr(ref) if len(ref) <= limit else repr(ref[:limit]) + f"… ({len(ref)} characters)"


class Store:
    """Run directories under ``root/runs`` and the index. Create with :func:`open_store`."""

    def __init__(self, root: Path, db_url: str | None, key: str | None = None) -> None:
        self.root = root.absolute()
        self.runs_dir = self.root / "runs"
        self.db_url = db_url or str(self.root / "index.sqlite")
        self.key = key or str(self.root.resolve())
        """Identity of this store in an index several stores share: store.json's id, else its location."""
        self._index: Index | None = None

    @property
    def index(self) -> Index:
        if self._index is None:
            self._index = Index(self.db_url, store_key=self.key, groups_dir=self.root / "groups")
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
        """The directory of one of this store's runs; a UserError for anything that is not a plain run id
        (a path, `..`) or whose directory is a link out of the store."""
        if not is_safe_id(run_id):
            raise NotFoundError(f"no run {shown(run_id)} in {self.root} — a run id is a plain name, not a path")
        path = self.runs_dir / run_id
        if path.is_symlink():
            raise UserError(f"{path} is a symbolic link — stepscope only uses run directories inside the store")
        return path

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
        if len(ref) > 256:
            raise NotFoundError(f"no run {shown(ref)} in {self.root} — `stepscope ls` lists the runs")
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
        if is_safe_id(ref):
            path = self.runs_dir / ref
            if not path.is_symlink() and (path / "manifest.json").is_file():
                return ref  # on disk but not (yet) indexed
            owner = self.index.foreign_owner(ref)
            if owner is not None:
                raise NotFoundError(f"run {ref} belongs to another store sharing this index (its directory: "
                                    f"{owner}) — pass that store with --store")
        if not is_safe_id(ref) and ("/" in ref or "\\" in ref or ".." in ref):
            raise NotFoundError(f"no run {shown(ref)} in {self.root} — a run is named by its id, name or latest~N, "
                                "not a path")
        close = difflib.get_close_matches(ref, ids + sorted({r.name for r in rows}), n=3, cutoff=0.5)
        hint = f"closest: {', '.join(close)}" if close else "`stepscope ls` lists the runs"
        raise NotFoundError(f"no run {shown(ref)} in {self.root} — {hint}")

    def load(self, ref: str) -> RunData:
        run_id = self.resolve(ref)
        data = read_run(self.run_path(run_id))
        _check_id(data.run, run_id, self.run_path(run_id))
        return data

    def manifest(self, ref: str) -> Run:
        run_id = self.resolve(ref)
        run = read_run_manifest(self.run_path(run_id))[0]
        _check_id(run, run_id, self.run_path(run_id))
        return run

    def links_leaving(self, run_id: str) -> list[Path]:
        """Symbolic links inside a run directory that point outside the store (or nowhere): what a server
        must not follow (a trace linked to /etc/passwd would show its text)."""
        root = self.root.resolve()
        out = []
        for dirpath, dirs, files in os.walk(self.run_path(run_id)):
            for name in dirs + files:
                p = Path(dirpath) / name
                if p.is_symlink():
                    target = p.resolve()
                    if not target.exists() or not target.is_relative_to(root):
                        out.append(p)
        return out

    def removal(self, ref: str) -> tuple[str, Path | None]:
        """What removing ``ref`` deletes: its run id and its directory inside this store (None when only
        an index row is left). Refuses ids of another store sharing the index, links, and paths."""
        run_id = self.resolve(ref)
        path = self.run_path(run_id)
        owner = self.index.foreign_owner(run_id)
        if owner is not None and not any(r.id == run_id for r in self.rows()):
            raise UserError(f"run {run_id} belongs to another store sharing this index (its directory: {owner}) — "
                            "remove it from that store (--store)")
        if not path.exists():
            return run_id, None
        if not path.is_dir() or path.resolve().parent != self.runs_dir.resolve():
            raise UserError(f"{path} is not a run directory of the store at {self.root} — nothing removed")
        return run_id, path

    def remove(self, ref: str) -> str:
        """Remove a run of this store: its index rows, then its directory (never anything outside ``runs/``)."""
        run_id, path = self.removal(ref)
        self.index.remove_run(run_id)
        if path is not None:
            shutil.rmtree(path, ignore_errors=True)
        return run_id

    def reindex(self, summarize: Callable[[RunData], dict[str, float]]) -> Reindexed:
        """Rebuild the index from the run directories (the truth): every readable run is indexed, a damaged
        one is skipped and named, groups come back from ``groups/``, rows of missing directories go."""
        done, bad = 0, []
        on_disk: set[str] = set()
        for path in sorted(self.runs_dir.glob("*/manifest.json")):
            run_dir = path.parent
            on_disk.add(run_dir.name)
            if not is_safe_id(run_dir.name) or run_dir.is_symlink():
                bad.append(f"{run_dir}: not a run directory name stepscope made (or a link) — left alone")
                continue
            try:
                data = read_run(run_dir)
                _check_id(data.run, run_dir.name, run_dir)
                metrics = summarize(data)
            except Exception as e:  # one damaged run never stops the rebuild
                msg = str(e).splitlines()[0] if str(e) else ""
                bad.append(msg if isinstance(e, UserError) else f"{run_dir}: unreadable ({type(e).__name__}: {msg})")
                continue
            self.index.upsert_run(data.run, str(run_dir), metrics)
            done += 1
        pruned = [r.id for r in self.rows() if not is_safe_id(r.id) or not (self.runs_dir / r.id).is_dir()]
        for run_id in pruned:
            self.index.remove_run(run_id)
        groups = self._restore_groups(bad)
        return Reindexed(done, tuple(bad), tuple(pruned), groups)

    def _restore_groups(self, bad: list[str]) -> int:
        """Put back the groups recorded under ``groups/`` and rebuild the ones only runs still name."""
        have = {g[0] for g in self.index.groups()}
        restored = 0
        for path in sorted((self.root / "groups").glob("*.json")):
            try:
                doc = orjson.loads(path.read_bytes())
                gid, kind, name, created, spec = (doc["id"], doc["kind"], doc["name"], int(doc["created_ns"]),
                                                  doc["spec"])
                if not (isinstance(gid, str) and isinstance(kind, str) and isinstance(name, str)
                        and isinstance(spec, dict)):
                    raise TypeError("wrong field types")
            except (OSError, ValueError, KeyError, TypeError) as e:
                bad.append(f"{path}: unreadable group record ({type(e).__name__}) — skipped")
                continue
            if gid not in have:
                self.index.put_group(gid, kind, name, created, spec)
                have.add(gid)
                restored += 1
        members: dict[str, list[RunRow]] = {}
        for row in self.rows():
            if row.grp:
                members.setdefault(row.grp, []).append(row)
        for gid, rows in sorted(members.items()):
            if gid in have:
                continue
            kind = next((k for p, k in _GROUP_PREFIXES if gid.startswith(p)), "group")
            params = sorted({k for r in rows for k in r.params})
            rebuilt: dict[str, object] = {"rebuilt": True}
            if kind == "sweep":
                rebuilt.update(grid={k: sorted({r.params[k] for r in rows if k in r.params}) for k in params},
                               params=params)
            self.index.put_group(gid, kind, rows[0].name, min(r.start_ns for r in rows), rebuilt)
            restored += 1
        return restored


def _check_id(run: Run, run_id: str, run_dir: Path) -> None:
    if run.id != run_id:
        raise StoreFormatError(f"{run_dir / 'manifest.json'}: the manifest names run {shown(run.id)}, its directory "
                               f"is {run_id} — the file is damaged")


_GROUP_PREFIXES = (("bench-", "bench"), ("sweep-", "sweep"), ("databench-", "data-bench"))


@dataclass(frozen=True, slots=True)
class Reindexed:
    """What `store reindex` did."""

    indexed: int
    damaged: tuple[str, ...]
    """One line per run directory (or group record) that could not be read; nothing else stopped."""
    pruned: tuple[str, ...]
    """Ids whose rows were removed because their directory is gone."""
    groups_restored: int


def _store_key(marker: Path) -> str | None:
    """The store's id from its store.json (None when the file names none)."""
    try:
        doc = orjson.loads(marker.read_bytes())
    except (OSError, orjson.JSONDecodeError) as e:
        raise StoreFormatError(f"{marker}: unreadable ({e}) — is this a stepscope store?") from None
    doc = check_version(doc, fmt=STORE_FORMAT, current=STORE_VERSION, what=str(marker), migrations={})
    return doc.get("id") if isinstance(doc.get("id"), str) else None


def open_store(root: str | Path | None = None, db: str | None = None, *, create: bool = False) -> Store:
    """Open (and with ``create``, make) a store; a one-line UserError when it cannot be used."""
    path = Path(root) if root else default_root()
    db_url = db or os.environ.get("STEPSCOPE_DB") or None
    marker = path / "store.json"
    key = None
    if marker.is_file():
        key = _store_key(marker)
    elif create:
        try:
            (path / "runs").mkdir(parents=True, exist_ok=True)
            tmp = path / f".store.json.{os.getpid()}"
            tmp.write_bytes(orjson.dumps({"format": STORE_FORMAT, "version": STORE_VERSION,
                                          "id": "store-" + secrets.token_hex(8)}))
            try:
                os.link(tmp, marker)  # create-if-absent: processes creating the store at once agree on one id
            except FileExistsError:
                pass
            finally:
                tmp.unlink(missing_ok=True)
            key = _store_key(marker)
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
    return Store(path, db_url, key)
