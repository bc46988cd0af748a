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


def run_from_dict(doc: dict[str, Any], *, what: str, streams: tuple[RankStream, ...] = ()) -> Run:
    doc = check_version(doc, fmt=RUN_FORMAT, current=RUN_VERSION, what=what, migrations=RUN_MIGRATIONS)
    d = dict(doc["run"])
    d.pop("streams", None)
    software = software_from_dict(d["software"])
    assert software is not None
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
