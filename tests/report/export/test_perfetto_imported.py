"""The Perfetto export of a run carries its imported traces (issue 41, item 7): every slice with its args and
every flow event, also for a rank the run itself did not record."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

from stepscope.report.export import perfetto
from tests.conftest import TRACES

SOURCES = {0: TRACES / "a100_2rank_nccl" / "rank0.json.gz", 1: TRACES / "sampled_128rank" / "rank1.json.gz"}


def _raw(path: Path) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = orjson.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    return events


def _key(e: dict[str, Any]) -> str:
    return json.dumps([e.get("ph"), e.get("name"), e.get("cat"), e.get("dur"), e.get("id"), e.get("args")],
                      sort_keys=True)


def test_export_holds_every_imported_event_with_args_and_flows(tiny_store: Path, cli: Any, tmp_path: Path) -> None:
    for rank, src in SOURCES.items():
        assert cli("import", "latest", str(src), "--rank", str(rank), "--accept-misfit", "--force").rc == 0
    out = tmp_path / "run.json"
    r = cli("export", "latest", "--format", "perfetto", "-o", str(out))
    assert r.rc == 0, r
    doc = json.loads(out.read_text())
    for rank, src in SOURCES.items():
        raw = [e for e in _raw(src) if e.get("ph") in ("X", "s", "t", "f", "i", "I")]
        flows = sum(1 for e in raw if e["ph"] in ("s", "t", "f"))
        got = [e for e in doc["traceEvents"] if e["pid"] == perfetto.WINDOW_PID + rank and e["ph"] != "M"]
        assert (flows > 0 or rank == 1) and sum(1 for e in got if e["ph"] in ("s", "t", "f")) == flows, rank
        assert got, rank
        assert Counter(map(_key, got)) == Counter(map(_key, raw)), rank  # each event whole, args included
        names = [e["args"]["name"] for e in doc["traceEvents"] if e["pid"] == perfetto.WINDOW_PID + rank
                 and e["ph"] == "M" and e["name"] == "process_name"]
        assert names and "imported" in names[0], names
    assert "rank1" in doc["otherData"]["window_clock_alignment"]
