"""Issue 44, item 2: `stepscope serve` against slow and hostile clients, all on loopback addresses (127.0.0.0/8: no
other machine is reached). A client that trickles its headers one byte at a time, never idle, is cut at the request
deadline; one client address holds at most its share of the slots; a request with two Host headers is refused.
64 dribbling clients never keep a legitimate request from being answered within the deadline."""

from __future__ import annotations

import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.store_kit import make_runs
from tests.faults.test_serve_faults import Served, _serve

IDLE_S, DEADLINE_S = 2.0, 4.0


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    store = tmp_path / "store"
    make_runs(store, ["web"])
    proc, first = _serve(store, "--idle-timeout", str(IDLE_S), "--request-deadline", str(DEADLINE_S),
                         "--max-connections", "32", "--max-per-client", "8")
    m = re.search(r"http://127\.0\.0\.1:(\d+)/", first)
    assert m, first
    yield Served(proc, int(m.group(1)))
    proc.terminate()
    _, err = proc.communicate(timeout=30)
    assert "Traceback" not in err, err


def _raw_status(port: int, request: bytes) -> int:
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        s.sendall(request)
        head = b""
        while b"\r\n" not in head and (more := s.recv(4096)):
            head += more
    return int(head.split()[1])


def test_two_host_headers_are_refused(served: Served) -> None:
    """Ours first, then another: before, 200."""
    ours = f"Host: 127.0.0.1:{served.port}\r\n".encode()
    assert _raw_status(served.port, b"GET / HTTP/1.1\r\n" + ours + b"Connection: close\r\n\r\n") == 200
    twice = b"GET / HTTP/1.1\r\n" + ours + b"Host: evil.example\r\nConnection: close\r\n\r\n"
    assert _raw_status(served.port, twice) == 400
    assert _raw_status(served.port, b"GET / HTTP/1.1\r\nHost: evil.example\r\n" + ours + b"\r\n") == 400


class Dribblers:
    """Connections from ``sources`` that send their request's headers one byte every ``every_s`` and never end
    them; with ``reconnect``, a connection the server closes is opened again at once (a persistent attacker)."""

    def __init__(self, port: int, sources: list[str], every_s: float, reconnect: bool) -> None:
        self.port, self.sources, self.every_s, self.reconnect = port, sources, every_s, reconnect
        self.closed_at: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.t0 = time.monotonic()

    def _connect(self, source: str) -> socket.socket | None:
        try:
            s = socket.create_connection(("127.0.0.1", self.port), timeout=5, source_address=(source, 0))
            s.sendall(f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\nX-Slow: ".encode())
            s.setblocking(False)
            return s
        except OSError:
            return None

    def _run(self) -> None:
        socks = {i: self._connect(src) for i, src in enumerate(self.sources)}
        while not self._stop.wait(self.every_s):
            for i, s in list(socks.items()):
                if s is None:
                    continue
                try:
                    s.recv(4096)  # a 503, or the end of a closed connection
                    gone = True
                except BlockingIOError:
                    gone = False
                except OSError:
                    gone = True
                if not gone:
                    try:
                        s.send(b"a")
                    except OSError:
                        gone = True
                if gone:
                    self.closed_at.append(time.monotonic() - self.t0)
                    s.close()
                    socks[i] = self._connect(self.sources[i]) if self.reconnect else None
        for s in socks.values():
            if s is not None:
                s.close()

    def __enter__(self) -> Dribblers:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


def _answered_within(served: Served, seconds: float) -> float | None:
    """Seconds until a plain GET from 127.0.0.1 got a 200 (retrying after each 503), or None."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        try:
            if served.get("/")[0] == 200:
                return time.monotonic() - t0
        except OSError:
            pass
        time.sleep(0.2)
    return None


def test_a_client_that_trickles_its_headers_is_cut_at_the_deadline(served: Served) -> None:
    """One byte every 0.5 s is never idle for the 2 s idle timeout; the 4 s deadline cuts it (before: held until
    it stopped)."""
    with Dribblers(served.port, ["127.0.0.1"], 0.5, reconnect=False) as d:
        time.sleep(DEADLINE_S + 3)
    assert d.closed_at and DEADLINE_S - 0.5 <= d.closed_at[0] <= DEADLINE_S + 2, d.closed_at


def test_64_dribbling_clients_from_many_addresses_leave_a_request_answered_within_the_deadline(
        served: Served) -> None:
    """64 clients, each from its own loopback address, dribble one byte a second: 32 take every slot. A request
    from 127.0.0.1 is answered once the deadline frees them (before: 503 for as long as they dribbled)."""
    sources = [f"127.0.1.{i}" for i in range(1, 65)]
    with Dribblers(served.port, sources, 1.0, reconnect=False):
        time.sleep(0.5)
        took = _answered_within(served, DEADLINE_S + 4)
    assert took is not None and took <= DEADLINE_S + 4, took


def test_64_persistent_dribblers_from_one_address_leave_slots_for_others(served: Served) -> None:
    """64 connections from one address that reconnect whenever closed hold at most 8 slots: a request from
    another address is answered at once, all the time."""
    with Dribblers(served.port, ["127.0.0.2"] * 64, 1.0, reconnect=True):
        time.sleep(1.0)
        for _ in range(3):
            took = _answered_within(served, 2.0)
            assert took is not None and took < 2.0, took
            time.sleep(DEADLINE_S / 2)
