"""Issue 19, item 12: `stepscope serve` in a real process, over real HTTP connections to 127.0.0.1. Host headers
other than the bound address are refused (DNS rebinding), idle connections are closed, threads are capped,
clients that disconnect leave no traceback, links out of the store are not followed, and a non-loopback bind
warns loudly."""

from __future__ import annotations

import http.client
import os
import re
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.store_kit import ROOT, make_runs


class Served:
    def __init__(self, proc: subprocess.Popen[str], port: int) -> None:
        self.proc, self.port = proc, port

    def get(self, path: str, host: str | None = None) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        conn.putrequest("GET", path, skip_host=True)
        conn.putheader("Host", host if host is not None else f"127.0.0.1:{self.port}")
        conn.endheaders()
        resp = conn.getresponse()
        body = resp.read()
        conn.close()
        return resp.status, body

    def threads(self) -> int:
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        return int(re.search(r"^Threads:\s+(\d+)", status, re.M).group(1))  # type: ignore[union-attr]


def _serve(store: Path, *extra: str) -> tuple[subprocess.Popen[str], str]:
    env = {k: v for k, v in os.environ.items() if k not in ("STEPSCOPE_HOME", "STEPSCOPE_DB")}
    env["PYTHONPATH"] = str(ROOT / "src")
    proc = subprocess.Popen([sys.executable, "-m", "stepscope", "serve", "--store", str(store), "--port", "0",
                             *extra], stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stderr is not None
    first = ""
    for _ in range(3):
        line = proc.stderr.readline()
        first += line
        if "dashboard on http://" in line:
            break
    return proc, first


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    store = tmp_path / "store"
    make_runs(store, ["web", "web"])
    proc, first = _serve(store, "--idle-timeout", "1", "--max-connections", "8")
    m = re.search(r"http://127\.0\.0\.1:(\d+)/", first)
    assert m, first
    yield Served(proc, int(m.group(1)))
    proc.terminate()
    _, err = proc.communicate(timeout=30)
    assert "Traceback" not in err, err


def test_host_header_must_name_the_bound_address(served: Served) -> None:
    assert served.get("/")[0] == 200
    assert served.get("/", host=f"localhost:{served.port}")[0] == 200
    status, body = served.get("/", host=f"attacker.example:{served.port}")
    assert status == 421 and b"<html" not in body.lower()
    assert served.get("/", host="")[0] == 421
    assert served.get("/", host=f"127.0.0.1.attacker.example:{served.port}")[0] == 421


def test_half_open_connections_are_closed_and_threads_capped(served: Served) -> None:
    base = served.threads()
    socks = []
    for _ in range(300):
        s = socket.create_connection(("127.0.0.1", served.port), timeout=10)
        socks.append(s)
    time.sleep(0.5)
    assert served.threads() <= base + 8 + 1, served.threads()
    deadline = time.monotonic() + 20
    closed = 0
    for s in socks:  # the server closes each idle one after 1 s (or refuses it at once with 503)
        s.settimeout(max(0.1, deadline - time.monotonic()))
        try:
            data = s.recv(1024)
            closed += data == b"" or data.startswith(b"HTTP/1.0 503")
        except TimeoutError:
            pass
        s.close()
    assert closed == 300
    assert served.get("/")[0] == 200  # and it still serves


def test_clients_that_disconnect_leave_no_traceback(served: Served) -> None:
    for _ in range(30):
        s = socket.create_connection(("127.0.0.1", served.port))
        s.sendall(f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\n\r\n".encode())
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # reset, not FIN
        s.close()
    deadline = time.monotonic() + 30  # the 8 slots may still be rendering pages for the vanished clients
    while (status := served.get("/")[0]) == 503 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert status == 200
    # the fixture asserts the server's stderr holds no traceback


def test_links_leaving_the_store_are_not_followed(tmp_path: Path) -> None:
    store = tmp_path / "store"
    run_id, other = make_runs(store, ["web", "web"])
    secret = tmp_path / "secret.txt"
    secret.write_text("root:x:0:0:TOPSECRET\n")
    traces = store / "runs" / run_id / "artifacts" / "traces"
    traces.mkdir(parents=True)
    (traces / "rank0.json.gz").symlink_to(secret)
    proc, first = _serve(store)
    m = re.search(r":(\d+)/", first)
    assert m, first
    srv = Served(proc, int(m.group(1)))
    try:
        status, body = srv.get(f"/runs/{run_id}.html")
        assert status == 403 and b"TOPSECRET" not in body
        status, body = srv.get(f"/diffs/{other}--{run_id}.html")
        assert status in (403, 404) and b"TOPSECRET" not in body
        status, body = srv.get("/index.html")
        assert status == 200 and b"TOPSECRET" not in body
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def test_a_non_loopback_bind_warns_loudly(tmp_path: Path) -> None:
    """Bound to all interfaces for a moment (no connection is made): the warning comes before the address."""
    store = tmp_path / "store"
    make_runs(store, ["web"])
    proc, first = _serve(store, "--host", "0.0.0.0")
    try:
        assert "WARNING" in first and "without authentication" in first, first
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    proc, first = _serve(store)
    try:
        assert "WARNING" not in first, first
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
