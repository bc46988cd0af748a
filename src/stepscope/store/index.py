"""SQL index of runs and their summary metrics: a SQLite file by default, PostgreSQL by URL.

The run directories are the truth; the index makes listing, resolving and history fast and can be
rebuilt from them (`stepscope store reindex`). Schema changes are numbered migrations applied on
open, for both back-ends, inside one transaction each.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from stepscope.errors import UserError
from stepscope.model.run import Run

MIGRATIONS: list[list[str]] = [
    [  # 1: initial schema
        """CREATE TABLE runs (
            id TEXT PRIMARY KEY, name TEXT NOT NULL, status TEXT NOT NULL,
            start_ns BIGINT NOT NULL, end_ns BIGINT, exit_code INTEGER, world_size INTEGER NOT NULL,
            command TEXT NOT NULL, cwd TEXT NOT NULL, host TEXT NOT NULL,
            git_commit TEXT, git_branch TEXT, git_dirty INTEGER, git_commit_time DOUBLE PRECISION,
            git_subject TEXT, grp TEXT, path TEXT NOT NULL, params TEXT NOT NULL, tags TEXT NOT NULL)""",
        "CREATE INDEX runs_start ON runs (start_ns)",
        "CREATE INDEX runs_name ON runs (name)",
        "CREATE INDEX runs_commit ON runs (git_commit)",
        "CREATE INDEX runs_grp ON runs (grp)",
        """CREATE TABLE run_metrics (run_id TEXT NOT NULL, name TEXT NOT NULL, value DOUBLE PRECISION,
            PRIMARY KEY (run_id, name))""",
        """CREATE TABLE run_labels (run_id TEXT NOT NULL, kind TEXT NOT NULL, key TEXT NOT NULL,
            value TEXT NOT NULL, PRIMARY KEY (run_id, kind, key))""",
        "CREATE INDEX run_labels_kv ON run_labels (kind, key, value)",
        """CREATE TABLE run_groups (id TEXT PRIMARY KEY, kind TEXT NOT NULL, name TEXT NOT NULL,
            created_ns BIGINT NOT NULL, spec TEXT NOT NULL)""",
    ],
    [  # 2: shallow-clone flag (history says when commit order may be incomplete); metric-name lookups
        "ALTER TABLE runs ADD COLUMN git_shallow INTEGER",
        "CREATE INDEX run_metrics_name ON run_metrics (name)",
    ],
    [  # 3: the store a run belongs to (an index shared by several stores); NULL: written before schema 3
        "ALTER TABLE runs ADD COLUMN store TEXT",
        "CREATE INDEX runs_store ON runs (store)",
    ],
]
SCHEMA_VERSION = len(MIGRATIONS)

RUN_COLUMNS = ("id", "name", "status", "start_ns", "end_ns", "exit_code", "world_size", "command", "cwd", "host",
               "git_commit", "git_branch", "git_dirty", "git_commit_time", "git_subject", "grp", "path", "params",
               "tags", "git_shallow", "store")


@dataclass(frozen=True, slots=True)
class RunRow:
    """One run as the index holds it (enough to list, filter, resolve and chart without the run dir)."""

    id: str
    name: str
    status: str
    start_ns: int
    end_ns: int | None
    exit_code: int | None
    world_size: int
    command: str
    cwd: str
    host: str
    git_commit: str | None
    git_branch: str | None
    git_dirty: bool | None
    git_commit_time: float | None
    git_subject: str | None
    grp: str | None
    path: str
    params: dict[str, str]
    tags: dict[str, str]
    git_shallow: bool | None = None
    """The run's work tree was a shallow clone (None: unknown, e.g. indexed before schema 2)."""
    store: str | None = None
    """Key of the store holding the run directory (None: indexed before schema 3)."""

    @classmethod
    def from_tuple(cls, t: Sequence[Any]) -> RunRow:
        d = dict(zip(RUN_COLUMNS, t, strict=True))
        d["params"] = json.loads(d["params"])
        d["tags"] = json.loads(d["tags"])
        d["git_dirty"] = None if d["git_dirty"] is None else bool(d["git_dirty"])
        d["git_shallow"] = None if d["git_shallow"] is None else bool(d["git_shallow"])
        return cls(**d)


class Index:
    """A connection to the index. ``url``: a SQLite file path, or ``postgresql://...``.

    A SQLite index is opened read-only (no WAL switch, no lock, no file created) and reopened for
    writing on the first write, so read commands work on a read-only or full store. ``store_key``
    scopes the rows to one store when several share the index (see :meth:`runs`); ``groups_dir``,
    when given, keeps a JSON copy of every group so that a rebuilt index gets them back.
    """

    def __init__(self, url: str, *, store_key: str | None = None, groups_dir: Path | None = None) -> None:
        self.url = url
        self.is_postgres = url.startswith(("postgresql://", "postgres://"))
        self.store_key = store_key
        self.groups_dir = groups_dir
        self._writable = False
        self._in_memory = False
        self._conn = self._connect()
        self._migrate()

    # -- connection -----------------------------------------------------------------------------
    def _connect(self) -> Any:
        if self.is_postgres:
            self._writable = True
            try:
                import psycopg
            except ImportError:
                raise UserError("a PostgreSQL store needs psycopg — pip install 'stepscope[postgres]'") from None
            try:
                return psycopg.connect(self.url, autocommit=False, connect_timeout=5)
            except psycopg.OperationalError as e:
                cause = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                raise UserError(f"cannot reach the database {_redact(self.url)}: {cause}") from None
        return self._connect_sqlite_readonly()

    def _connect_sqlite_readonly(self) -> sqlite3.Connection:
        path = Path(self.url)
        if not path.exists():
            self._in_memory = True  # no index yet: an empty one, written on the first write
            return sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        uri = "file:" + quote(str(path.absolute()))
        last: sqlite3.Error | None = None
        # mode=ro reads a live index beside its writers; immutable=1 reads one whose folder is read-only
        # and has no -shm file to share (nobody can be writing it then).
        for query in ("?mode=ro", "?mode=ro&immutable=1"):
            try:
                conn = sqlite3.connect(uri + query, uri=True, timeout=30, isolation_level=None,
                                       check_same_thread=False)
                conn.execute("PRAGMA busy_timeout=30000")
                conn.execute("SELECT count(*) FROM sqlite_master").fetchall()
                return conn
            except sqlite3.Error as e:
                last = e
        raise UserError(f"cannot read the index {self.url}: {last} — is it a stepscope index?")

    def _connect_sqlite_writable(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(self.url, timeout=30, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA busy_timeout=30000")
            if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                conn.execute("PRAGMA journal_mode=WAL")
        except sqlite3.Error as e:
            raise UserError(self._write_failure(e)) from None
        return conn

    def _write_failure(self, e: BaseException) -> str:
        """One line saying why the index cannot be written (read-only folder or file, full disk, lock)."""
        path = Path(self.url).absolute()
        text = str(e)
        if "full" in text:
            why = "the disk is full"
        elif "locked" in text or "busy" in text:
            why = "another process holds the index's write lock"
        elif not os.access(path.parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
            why = f"{path.parent if not os.access(path.parent, os.W_OK) else path} is read-only"
        else:
            why = text
        return (f"cannot write the index {self.url}: {why} — read commands (ls, show, report) still work; "
                "writing needs a writable store")

    def _ensure_writable(self) -> None:
        if self._writable:
            return
        conn = self._connect_sqlite_writable()
        self._conn.close()
        self._conn, self._writable, self._in_memory = conn, True, False
        self._migrate()

    def close(self) -> None:
        self._conn.close()

    def _sql(self, q: str) -> str:
        return q.replace("?", "%s") if self.is_postgres else q

    @contextmanager
    def transaction(self, *, wait: bool = True) -> Iterator[Any]:
        """One write transaction; SQLite takes its write lock at BEGIN so writers queue, not fail (with
        ``wait=False``: a UserError at once when another process holds the lock)."""
        self._ensure_writable()
        cur = self._conn.cursor()
        if self.is_postgres:
            try:
                yield cur
                self._conn.commit()
            except BaseException:
                self._conn.rollback()
                raise
            return
        if not wait:
            cur.execute("PRAGMA busy_timeout=0")
        try:
            for attempt in range(200 if wait else 1):
                try:
                    cur.execute("BEGIN IMMEDIATE")
                    break
                except sqlite3.OperationalError as e:
                    if attempt == (199 if wait else 0):
                        raise UserError(self._write_failure(e)) from None
                    time.sleep(0.05)
        finally:
            if not wait:
                cur.execute("PRAGMA busy_timeout=30000")
        try:
            yield cur
            cur.execute("COMMIT")
        except BaseException as e:
            try:
                cur.execute("ROLLBACK")
            except sqlite3.Error:
                pass  # the failed statement already ended the transaction
            if isinstance(e, sqlite3.Error):
                raise UserError(self._write_failure(e)) from None
            raise

    def execute(self, cur: Any, q: str, params: Sequence[Any] = ()) -> Any:
        cur.execute(self._sql(q), tuple(params))
        return cur

    def query(self, q: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        cur = self._conn.cursor()
        cur.execute(self._sql(q), tuple(params))
        rows = list(cur.fetchall())
        if self.is_postgres:
            self._conn.commit()  # end the implicit read transaction
        return rows

    # -- schema -----------------------------------------------------------------------------------
    def schema_version(self) -> int:
        try:
            rows = self.query("SELECT value FROM meta WHERE key = 'schema_version'")
        except Exception:
            if self.is_postgres:
                self._conn.rollback()
            return 0
        return int(rows[0][0]) if rows else 0

    def _migrate(self) -> None:
        """Bring the schema to SCHEMA_VERSION in one transaction (all of it or none of it). Concurrent
        openers queue: PostgreSQL on an advisory lock, SQLite on its write lock (BEGIN IMMEDIATE)."""
        version = self.schema_version()
        if version == SCHEMA_VERSION:
            return  # the common case: no write lock taken just to open
        if not self._writable and not self._in_memory:
            try:
                self._ensure_writable()  # migrates
            except UserError as e:
                raise UserError(f"the index {self.url} has schema {version} and this stepscope needs "
                                f"{SCHEMA_VERSION}; it cannot be upgraded here ({e}) — run `stepscope store reindex` "
                                "once with write access") from None
            return
        if self._in_memory:
            cur = self._conn.cursor()
            self.execute(cur, "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            self._apply_migrations(cur)
            return
        with self.transaction() as cur:
            if self.is_postgres:
                cur.execute("SELECT pg_advisory_xact_lock(734201)")
            self.execute(cur, "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            self._apply_migrations(cur)

    def _apply_migrations(self, cur: Any) -> None:
        rows = self.execute(cur, "SELECT value FROM meta WHERE key = 'schema_version'").fetchall()
        version = int(rows[0][0]) if rows else 0
        if version > SCHEMA_VERSION:
            raise UserError(f"the index {_redact(self.url)} has schema {version}, newer than this stepscope "
                            f"({SCHEMA_VERSION}) — upgrade stepscope")
        for v in range(version, SCHEMA_VERSION):
            for stmt in MIGRATIONS[v]:
                self.execute(cur, stmt)
        if version != SCHEMA_VERSION:
            self.execute(cur, "DELETE FROM meta WHERE key = 'schema_version'")
            self.execute(cur, "INSERT INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))

    # -- runs ---------------------------------------------------------------------------------------
    def upsert_run(self, run: Run, path: str, metrics: dict[str, float] | None = None, *, wait: bool = True) -> None:
        """Insert or replace a run's row, labels and (when given) its summary metrics, atomically. With
        ``wait=False`` a SQLite index locked by another writer is a UserError at once, not a wait."""
        g = run.git
        row = (run.id, run.name, run.status.value, run.start_ns, run.end_ns, run.exit_code, run.world_size,
               " ".join(run.command), run.cwd, run.host.hostname,
               g.commit if g else None, g.branch if g else None, (int(g.dirty) if g else None),
               g.commit_time_s if g else None, g.subject if g else None, run.group, path,
               json.dumps(run.params, sort_keys=True), json.dumps(run.tags, sort_keys=True),
               (int(g.shallow) if g else None), self.store_key)
        placeholders = ", ".join("?" * len(RUN_COLUMNS))
        with self.transaction(wait=wait) as cur:
            self.execute(cur, "DELETE FROM runs WHERE id = ?", (run.id,))
            self.execute(cur, f"INSERT INTO runs ({', '.join(RUN_COLUMNS)}) VALUES ({placeholders})", row)
            self.execute(cur, "DELETE FROM run_labels WHERE run_id = ?", (run.id,))
            for kind, labels in (("param", run.params), ("tag", run.tags)):
                for k, v in labels.items():
                    self.execute(cur, "INSERT INTO run_labels (run_id, kind, key, value) VALUES (?, ?, ?, ?)",
                                 (run.id, kind, k, str(v)))
            if metrics is not None:
                self.execute(cur, "DELETE FROM run_metrics WHERE run_id = ?", (run.id,))
                for name, value in sorted(metrics.items()):
                    self.execute(cur, "INSERT INTO run_metrics (run_id, name, value) VALUES (?, ?, ?)",
                                 (run.id, name, None if value != value else float(value)))

    def remove_run(self, run_id: str) -> None:
        """Remove a run's rows; refused (UserError) when the row belongs to another store."""
        owner = self.foreign_owner(run_id)
        if owner is not None:
            raise UserError(f"run {run_id} belongs to another store sharing this index (its directory: {owner}) "
                            "— remove it from that store (--store)")
        with self.transaction() as cur:
            for table, col in (("runs", "id"), ("run_metrics", "run_id"), ("run_labels", "run_id")):
                self.execute(cur, f"DELETE FROM {table} WHERE {col} = ?", (run_id,))

    def _scope(self, where: str, params: Sequence[Any]) -> tuple[str, list[Any]]:
        """``where`` limited to this store's rows (and rows indexed before stores were recorded)."""
        if self.store_key is None:
            return where, list(params)
        scoped = "(store = ? OR store IS NULL)"
        return (f"{scoped} AND ({where})" if where else scoped), [self.store_key, *params]

    def runs(self, where: str = "", params: Sequence[Any] = (), order: str = "start_ns DESC",
             limit: int | None = None) -> list[RunRow]:
        """This store's runs (rows another store wrote to a shared index are left out)."""
        where, args = self._scope(where, params)
        q = f"SELECT {', '.join(RUN_COLUMNS)} FROM runs"
        if where:
            q += f" WHERE {where}"
        q += f" ORDER BY {order}"
        if limit is not None:
            q += f" LIMIT {int(limit)}"
        return [RunRow.from_tuple(t) for t in self.query(q, args)]

    def run_ids(self) -> list[str]:
        where, args = self._scope("", ())
        return [r[0] for r in self.query("SELECT id FROM runs" + (f" WHERE {where}" if where else "")
                                         + " ORDER BY start_ns DESC", args)]

    def foreign_owner(self, run_id: str) -> str | None:
        """Where the other store a run id belongs to in a shared index keeps it (its run directory as
        indexed), or None when the id is not another store's."""
        if self.store_key is None:
            return None
        rows = self.query("SELECT path FROM runs WHERE id = ? AND store IS NOT NULL AND store <> ?",
                          (run_id, self.store_key))
        return str(rows[0][0]) if rows else None

    def metrics(self, run_ids: Sequence[str] | None = None) -> dict[str, dict[str, float | None]]:
        """run id -> metric name -> value (None where stored as not measured)."""
        out: dict[str, dict[str, float | None]] = {}
        if run_ids is None:
            rows = self.query("SELECT run_id, name, value FROM run_metrics")
        else:
            rows = []
            ids = list(run_ids)
            for i in range(0, len(ids), 500):
                chunk = ids[i:i + 500]
                rows += self.query(f"SELECT run_id, name, value FROM run_metrics WHERE run_id IN "
                                   f"({', '.join('?' * len(chunk))})", chunk)
        for run_id, name, value in rows:
            out.setdefault(run_id, {})[name] = value
        return out

    # -- groups (benchmarks, sweeps) ----------------------------------------------------------------
    def add_group(self, group_id: str, kind: str, name: str, created_ns: int, spec: dict[str, Any]) -> None:
        """Record a group (bench, sweep, ...); with ``groups_dir``, also as ``<groups_dir>/<id>.json``, from
        which `store reindex` restores it."""
        doc = {"format": "stepscope-group", "version": 1, "id": group_id, "kind": kind, "name": name,
               "created_ns": created_ns, "spec": spec}
        if self.groups_dir is not None:
            self.groups_dir.mkdir(parents=True, exist_ok=True)
            tmp = self.groups_dir / f".{group_id}.json.{os.getpid()}"
            tmp.write_text(json.dumps(doc, sort_keys=True))
            os.replace(tmp, self.groups_dir / f"{group_id}.json")
        self.put_group(group_id, kind, name, created_ns, spec)

    def put_group(self, group_id: str, kind: str, name: str, created_ns: int, spec: dict[str, Any]) -> None:
        """Insert or replace a group's row (no file written)."""
        with self.transaction() as cur:
            self.execute(cur, "DELETE FROM run_groups WHERE id = ?", (group_id,))
            self.execute(cur, "INSERT INTO run_groups (id, kind, name, created_ns, spec) VALUES (?, ?, ?, ?, ?)",
                         (group_id, kind, name, created_ns, json.dumps(spec, sort_keys=True)))

    def groups(self, kind: str | None = None) -> list[tuple[str, str, str, int, dict[str, Any]]]:
        q = "SELECT id, kind, name, created_ns, spec FROM run_groups"
        rows = self.query(q + " WHERE kind = ? ORDER BY created_ns" if kind else q + " ORDER BY created_ns",
                          (kind,) if kind else ())
        return [(a, b, c, int(d), json.loads(e)) for a, b, c, d, e in rows]


def _redact(url: str) -> str:
    """A database URL without its password, fit for an error message."""
    if "://" in url and "@" in url:
        scheme, rest = url.split("://", 1)
        creds, host = rest.rsplit("@", 1)
        return f"{scheme}://{creds.split(':', 1)[0]}@{host}"
    return url
