"""`stepscope report` and `stepscope advise` from the command line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from stepscope.cli import main


def test_report_default_path_and_output(profiled_store: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    store = tmp_path / "store"  # the default path is inside the store: a copy, the shared run stays as recorded
    shutil.copytree(profiled_store, store)
    assert main(["report", "--store", str(store)]) == 0
    printed = Path(capsys.readouterr().out.strip())
    assert printed.name == "report.html" and printed.parent.name == "artifacts" and printed.is_file()
    assert printed.read_text().startswith("<!DOCTYPE html>")
    out = tmp_path / "sub" / "r.html"
    assert main(["report", "--store", str(store), "-o", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out) and out.is_file()


def test_report_unwritable_path_is_one_line(profiled_store: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "f").write_text("")
    assert main(["report", "--store", str(profiled_store), "-o", str(tmp_path / "f" / "r.html")]) != 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("stepscope: error: cannot write the report")


def test_advise_json_and_terminal(profiled_store: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["advise", "--store", str(profiled_store), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "stepscope.advice/1" and len(doc["checked"]) == 10
    ids = [f["rule_id"] for f in doc["findings"]]
    assert "input-bound" in ids
    fd = doc["findings"][ids.index("input-bound")]
    assert fd["evidence"]["data_wait_share"] >= 0.1 and fd["threshold"] and fd["suggestion"]
    assert main(["advise", "--store", str(profiled_store), "--width", "100"]) == 0
    text = capsys.readouterr().out
    assert "Training waits for input data" in text and "evidence (from" in text
    assert main(["show", "--store", str(profiled_store), "--width", "100"]) == 0
    assert "Recommendations" in capsys.readouterr().out


def test_export_unknown_format_is_one_line_before_loading(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    # the store does not exist: the format is refused first, before the run is loaded
    assert main(["export", "latest", "-f", "xml", "--store", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("stepscope: error: unknown format 'xml'") and "perfetto" in err
