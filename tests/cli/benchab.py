"""One `stepscope bench --ab` study run in-process for a test module: its store and its JSON document."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

from stepscope.cli import main
from tests.conftest import PY


def bench_ab(store: Path, script: str, a: list[str], b: list[str], *, repeat: int, warmup: int,
             metric: str) -> dict[str, Any]:
    """``bench --ab --repeat repeat --metric metric`` of ``python script *a`` against ``python script *b``."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["bench", "--store", str(store), "--ab", "--repeat", str(repeat), "--sample-interval", "0",
                   "--warmup-steps", str(warmup), "--metric", metric, "--json", "--",
                   PY, script, *a, "--", PY, script, *b])
    assert rc == 0
    doc: dict[str, Any] = json.loads(out.getvalue())
    return doc
