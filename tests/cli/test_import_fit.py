"""`stepscope import` checks that a trace fits the run (issue 41, item 7): world size, rank, GPU presence and
wall-clock time; a misfit is refused with exit status 3 unless --accept-misfit stores it with a note, and the
advice drawn from it never promises more time than the run measured."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import orjson

from tests.conftest import TRACES, load

NCCL = TRACES / "a100_2rank_nccl" / "rank0.json.gz"


def _attached(store: Path) -> list[str]:
    return [a for a in load(store).artifacts if a.startswith("artifacts/traces")]


def _one_line(err: str) -> str:
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def _cpu_trace(tmp_path: Path, name: str, *, shift_to_ns: int | None) -> Path:
    """The cpu_only fixture as rank 0 of a world of 1; its timestamps moved to start at ``shift_to_ns``
    (wall clock) or left on the fixture's own clock (None)."""
    doc: dict[str, Any] = orjson.loads(gzip.decompress((TRACES / "cpu_only" / "rank34.json.gz").read_bytes()))
    doc["distributedInfo"] = {**doc.get("distributedInfo", {}), "rank": 0, "world_size": 1}
    if shift_to_ns is not None:
        first = min(e["ts"] for e in doc["traceEvents"] if isinstance(e.get("ts"), (int, float)))
        for e in doc["traceEvents"]:
            if isinstance(e.get("ts"), (int, float)):
                e["ts"] = e["ts"] - first + shift_to_ns / 1e3
    out = tmp_path / name
    out.write_bytes(orjson.dumps(doc))
    return out


def test_misfits_are_refused_with_one_line_and_status_3(tiny_store: Path, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    run = load(tiny_store).run
    assert run.world_size == 1 and not run.host.gpus
    r = cli("import", "latest", str(NCCL))
    line = _one_line(r.err)
    assert r.rc == 3 and "world size 2" in line and "no GPU" in line and "--accept-misfit" in line, r
    r = cli("import", "latest", str(TRACES / "sampled_128rank" / "rank1.json.gz"))
    assert r.rc == 3 and "rank 1 is not a rank of the run" in _one_line(r.err), r
    years_ago = _cpu_trace(tmp_path, "rank0.json", shift_to_ns=run.start_ns - 400 * 86_400 * 10**9)
    r = cli("import", "latest", str(years_ago))
    assert r.rc == 3 and "400.0 days before the run started" in _one_line(r.err), r
    assert _attached(tiny_store) == []


def test_a_trace_that_fits_is_attached_without_a_flag(tiny_store: Path, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    run = load(tiny_store).run
    during = _cpu_trace(tmp_path, "rank0.json", shift_to_ns=run.start_ns + 10**8)
    r = cli("import", "latest", str(during))
    assert r.rc == 0 and "does not fit" not in r.err, r
    own_clock = _cpu_trace(tmp_path, "other.json", shift_to_ns=None)  # a process-local clock: not checked
    assert cli("import", "latest", str(own_clock), "--rank", "0", "--force").rc == 0


def test_accepted_misfit_carries_a_note_and_capped_savings(tiny_store: Path, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    r = cli("import", "latest", str(NCCL), "--accept-misfit")
    assert r.rc == 0, r
    assert "does not fit the run" in r.err and "world size 2" in r.err
    data = load(tiny_store)
    note = Path(data.path) / "artifacts" / "traces" / "rank0.misfit.txt"
    assert "does not fit the run" in note.read_text()
    shown = cli("show", "latest")
    assert "does not fit the run" in shown.out + shown.err
    adv = cli("advise", "latest", "--json")
    assert adv.rc == 0, adv
    steps = data.ranks[0].steps
    durations = [(e - s) / 1e9 for s, e in zip(steps["start_ns"].tolist(), steps["end_ns"].tolist())]
    findings = json.loads(adv.out)["findings"]
    estimated = [f for f in findings if f["saving_s_per_step"] is not None]
    assert estimated, findings  # the trace's GPU idle makes the advisor estimate savings
    for f in estimated:
        assert f["saving_s_per_step"] <= max(durations) + 1e-9, f
        assert f["saving_s_total"] <= (data.run.end_ns - data.run.start_ns) / 1e9 + 1e-9, f
    assert any("capped at the run's" in f["saving_basis"] for f in estimated), findings  # its window was longer
    # a fitting trace replacing it removes the note
    run = data.run
    fits = _cpu_trace(tmp_path, "rank0.json", shift_to_ns=run.start_ns + 10**8)
    assert cli("import", "latest", str(fits), "--force").rc == 0
    assert not note.exists()
