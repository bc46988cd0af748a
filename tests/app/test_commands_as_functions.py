"""Commands are plain typed functions: called from code (no argparse), they print what the CLI prints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stepscope.app import RunAnalysis
from stepscope.cli.advise import advise
from stepscope.cli.export import export
from stepscope.cli.show import show
from stepscope.cli.store import store_command
from stepscope.errors import UserError
from stepscope.store import open_store


def test_show_advise_export_as_functions(store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    opened = open_store(str(store))
    assert show("plain", store=opened, json=True) == 0  # an open Store
    doc = json.loads(capsys.readouterr().out)
    assert doc["headline"]["steps"] == 3  # tiny_train.py --steps 3
    assert show("profiled", store=store, view="traces", json=True) == 0  # a store folder
    ranks = {r["rank"]: r for r in json.loads(capsys.readouterr().out)["ranks"]}
    assert set(ranks) == {0, 1} and ranks[0]["steps"]["count"] == 2  # --profile-steps 2, and the imported rank 1
    assert ranks[1] == RunAnalysis.from_store(opened, "profiled").trace_analyses[1].to_dict()
    assert advise("profiled", json=True) == 0  # STEPSCOPE_HOME
    advice = json.loads(capsys.readouterr().out)
    assert advice["run"] == opened.load("profiled").run.id and advice["schema"] == "stepscope.advice/1"
    assert export("plain", store=store, format="json", output=tmp_path / "out") == 0
    written = capsys.readouterr().out.split()
    assert written and all(Path(p).is_file() for p in written)
    assert store_command("info", store=store) == 0
    assert "runs: 2" in capsys.readouterr().out


def test_a_function_raises_the_one_line_error(store: Path) -> None:
    with pytest.raises(UserError, match="unknown format 'xls'"):
        export("plain", store=store, format="xls")
    with pytest.raises(UserError, match="unknown view"):
        show("plain", store=store, view="flames")
