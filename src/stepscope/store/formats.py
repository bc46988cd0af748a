"""Stored format versions, the (de)serialisation of run records, and migrations.

Every JSON file the store writes carries ``{"format": NAME, "version": N}``. Readers refuse versions
newer than they know with a one-line message, and migrate older ones through named functions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from stepscope.errors import StoreFormatError
from stepscope.model.run import GitInfo, GpuInfo, HostInfo, RankStream, Run, RunStatus, SoftwareInfo

RUN_FORMAT = "stepscope-run"
RUN_VERSION = 1
RECORDS_VERSION = 1
"""Version of the per-rank JSON-lines record files (carried by their 'stream' header line)."""

Migration = Callable[[dict[str, Any]], dict[str, Any]]
RUN_MIGRATIONS: dict[int, Migration] = {}
"""version N -> function turning a version-N manifest dict into version N+1."""


def check_version(doc: dict[str, Any], *, fmt: str, current: int, what: str,
                  migrations: dict[int, Migration]) -> dict[str, Any]:
    """Return ``doc`` at the current version, migrating older ones; refuse unknown ones."""
    if not isinstance(doc, dict):
        raise StoreFormatError(f"{what}: not a {fmt} file (a JSON {_json_type(doc)}, not an object) — the file is "
                               "damaged")
    if doc.get("format") != fmt:
        raise StoreFormatError(f"{what}: not a {fmt} file (format={doc.get('format')!r}) — is this a stepscope store?")
    version = doc.get("version")
    if not isinstance(version, int):
        raise StoreFormatError(f"{what}: no format version — the file is damaged; remove the run with `stepscope rm`")
    if version > current:
        raise StoreFormatError(
            f"{what}: format version {version} is newer than this stepscope understands ({current}) — upgrade stepscope"
        )
    while version < current:
        doc = migrations[version](doc)
        version += 1
        doc["version"] = version
    return doc


def git_to_dict(g: GitInfo | None) -> dict[str, Any] | None:
    return None if g is None else asdict(g)


def git_from_dict(d: dict[str, Any] | None) -> GitInfo | None:
    return None if d is None else GitInfo(**d)


def host_from_dict(d: dict[str, Any]) -> HostInfo:
    gpus = tuple(GpuInfo(**g) for g in d.get("gpus", ()))
    return HostInfo(**{**d, "gpus": gpus})


def software_from_dict(d: dict[str, Any] | None) -> SoftwareInfo | None:
    return None if d is None else SoftwareInfo(**d)


def stream_to_dict(s: RankStream) -> dict[str, Any]:
    return asdict(s)


def stream_from_dict(d: dict[str, Any]) -> RankStream:
    known = {f for f in RankStream.__dataclass_fields__}
    d = {k: v for k, v in d.items() if k in known}
    d["software"] = software_from_dict(d.get("software"))
    d["gpus"] = tuple(GpuInfo(**g) for g in d.get("gpus", ()))
    return RankStream(**d)


def run_to_dict(run: Run) -> dict[str, Any]:
    d = asdict(run)
    d["status"] = run.status.value
    d["command"] = list(run.command)
    d.pop("streams")
    return {"format": RUN_FORMAT, "version": RUN_VERSION, "run": d}


_RUN_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "id": (str,), "name": (str,), "status": (str,), "start_ns": (int,), "end_ns": (int, type(None)),
    "command": (list,), "cwd": (str,), "exit_code": (int, type(None)), "git": (dict, type(None)), "host": (dict,),
    "software": (dict,), "world_size": (int,), "params": (dict,), "tags": (dict,), "options": (dict,),
    "group": (str, type(None)), "extra": (dict,),
}
_REQUIRED = ("id", "name", "status", "start_ns", "command", "cwd", "host", "software", "world_size")
_INT_LIMIT = 2**63
"""Integers are stored as SQL BIGINT: anything beyond is damage, not a time or a count."""


def _json_type(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number")


def _check_run_fields(d: dict[str, Any], what: str) -> None:
    """One line naming the first field of a manifest's run record that has the wrong shape."""
    for key in _REQUIRED:
        if key not in d:
            raise StoreFormatError(f"{what}: the run record has no {key!r} — the file is damaged")
    for key, types in _RUN_FIELD_TYPES.items():
        value = d.get(key)
        if key not in d or (value is None and type(None) in types):
            continue
        ok = isinstance(value, types) and not isinstance(value, bool)
        if ok and isinstance(value, int) and not -_INT_LIMIT <= value < _INT_LIMIT:
            ok = False
        if not ok:
            raise StoreFormatError(f"{what}: field {key!r} is a JSON {_json_type(value)} of the wrong kind or size "
                                   "— the file is damaged")
    if not all(isinstance(c, str) for c in d["command"]):
        raise StoreFormatError(f"{what}: field 'command' holds something other than strings — the file is damaged")
    if d["status"] not in {s.value for s in RunStatus}:
        raise StoreFormatError(f"{what}: unknown status {str(d['status'])[:40]!r} — the file is damaged")


def run_from_dict(doc: dict[str, Any], *, what: str, streams: tuple[RankStream, ...] = ()) -> Run:
    """The Run of a manifest; a one-line StoreFormatError for anything structurally wrong in it."""
    doc = check_version(doc, fmt=RUN_FORMAT, current=RUN_VERSION, what=what, migrations=RUN_MIGRATIONS)
    d = doc.get("run")
    if not isinstance(d, dict):
        raise StoreFormatError(f"{what}: no run record (found a JSON {_json_type(d)}) — the file is damaged")
    d = dict(d)
    d.pop("streams", None)
    _check_run_fields(d, what)
    try:
        return _run_from_fields(d, streams)
    except (TypeError, ValueError, KeyError, AttributeError) as e:
        detail = str(e).splitlines()[0][:120] if str(e) else type(e).__name__
        raise StoreFormatError(f"{what}: the run record does not fit ({detail}) — the file is damaged") from None


def _run_from_fields(d: dict[str, Any], streams: tuple[RankStream, ...]) -> Run:
    software = software_from_dict(d["software"])
    assert software is not None
    known = set(Run.__dataclass_fields__)
    d = {k: v for k, v in d.items() if k in known}  # fields a newer writer added are ignored
    return Run(
        **{
            **d,
            "status": RunStatus(d["status"]),
            "command": tuple(d["command"]),
            "git": git_from_dict(d.get("git")),
            "host": host_from_dict(d["host"]),
            "software": software,
            "streams": streams,
        }
    )
