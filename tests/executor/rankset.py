"""Synthetic trace sets: one fixture trace made into N ranks (rank set, times shifted, durations stretched).

Rank r's events are the fixture's with every duration multiplied by ``1 + r / 100`` and timestamps
shifted by ``r`` ms, so each rank's figures are the fixture's scaled by a known factor (rank N-1 is the
slowest) and tests can derive expected numbers without the code under test.
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import orjson

from tests.conftest import TRACES

FIXTURE = TRACES / "sampled_128rank" / "rank0.json.gz"


def stretch(rank: int) -> float:
    return 1.0 + rank / 100


def small(doc: dict[str, Any], seconds: float = 0.25) -> dict[str, Any]:
    """The fixture cut to the events starting in the first ``seconds`` of its first profiler step (and the
    step annotations and metadata events): about a fifth of it, so a 16-rank set analyses in seconds."""
    events = doc["traceEvents"]
    start = min(e["ts"] for e in events if e.get("name", "").startswith("ProfilerStep#"))
    keep = [e for e in events if "ts" not in e or e.get("ph") == "M" or e["name"].startswith("ProfilerStep#")
            or start <= e["ts"] < start + seconds * 1e6]
    return {**doc, "traceEvents": keep}


def rank_doc(doc: dict[str, Any], rank: int, world: int, *, k: float | None = None) -> dict[str, Any]:
    """Rank ``rank`` of ``world``: durations times ``k`` (default :func:`stretch` of the rank), times shifted."""
    k, shift = stretch(rank) if k is None else k, 1000.0 * rank
    events = []
    for e in doc["traceEvents"]:
        e = dict(e)
        if "ts" in e:
            e["ts"] = e["ts"] + shift
        if "dur" in e:
            e["dur"] = e["dur"] * k
        events.append(e)
    return {**doc, "traceEvents": events, "distributedInfo": {**doc.get("distributedInfo", {}), "rank": rank,
                                                              "world_size": world}}


def write_rank_set(out: Path, ranks: int, *, source: Path = FIXTURE, slow: dict[int, float] | None = None,
                   seconds: float = 0.25) -> list[Path]:
    """``ranks`` files ``rank{r}.json.gz`` in ``out``, built from ``source`` cut to ``seconds`` (:func:`small`);
    ``slow``: rank -> the factor its durations are multiplied by instead of :func:`stretch` of the rank."""
    doc = small(orjson.loads(gzip.decompress(source.read_bytes())), seconds)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for r in range(ranks):
        p = out / f"rank{r}.json.gz"
        doc_r = rank_doc(doc, r, ranks, k=(slow or {}).get(r))
        p.write_bytes(gzip.compress(orjson.dumps(doc_r), compresslevel=1))
        paths.append(p)
    return paths
