"""`stepscope serve` renders the diff page of two commits' groups (the link the regressions page gives,
`diffs/a,b--c,d.html`), not only of two single runs."""

from __future__ import annotations

import http.client
import os
import re
import subprocess
import sys
from pathlib import Path

from stepscope.cli import main

SCRIPT = """\
import time
import stepscope

for i in stepscope.steps(range(8)):
    time.sleep(0.01)
"""


def test_a_groups_diff_page_is_served(tmp_path: Path, monkeypatch) -> None:
    store = tmp_path / "store"
    (tmp_path / "train.py").write_text(SCRIPT)
    monkeypatch.chdir(tmp_path)
    assert main(["bench", "--store", str(store), "--repeat", "3", "--sample-interval", "0", "--name", "tiny", "--",
                 sys.executable, "train.py"]) == 0
    from stepscope.store import open_store

    st = open_store(store)
    try:
        ids = [r.id for r in st.index.runs(order="start_ns")]
    finally:
        st.close()
    env = {k: v for k, v in os.environ.items() if k not in ("STEPSCOPE_HOME", "STEPSCOPE_DB")}
    proc = subprocess.Popen([sys.executable, "-m", "stepscope", "serve", "--store", str(store), "--port", "0"],
                            stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stderr is not None
    try:
        first = ""
        for _ in range(3):
            first += proc.stderr.readline()
            if "dashboard on http://" in first:
                break
        port = re.search(r"127\.0\.0\.1:(\d+)/", first)
        assert port, first
        conn = http.client.HTTPConnection("127.0.0.1", int(port.group(1)), timeout=60)
        conn.request("GET", f"/diffs/{ids[0]},{ids[1]}--{ids[2]}.html")
        resp = conn.getresponse()
        body = resp.read().decode()
        conn.close()
        assert resp.status == 200, body[:300]
        assert ids[0] in body and ids[2] in body
        conn = http.client.HTTPConnection("127.0.0.1", int(port.group(1)), timeout=60)
        conn.request("GET", f"/diffs/{ids[0]},nosuchrun--{ids[2]}.html")
        assert conn.getresponse().status == 404
        conn.close()
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
