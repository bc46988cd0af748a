"""The dashboard served live from the store: `stepscope serve --port 8765` (127.0.0.1, read-only)."""

from __future__ import annotations

import argparse
import io
import ipaddress
import math
import socket
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from stepscope.cli.common import add_store_args, store_from
from stepscope.errors import UserError
from stepscope.store import Store
from stepscope.store.index import RunRow
from stepscope.store.tail import RunTail

IDLE_TIMEOUT_S = 10.0
"""A connection that sends nothing for this long is closed (half-open connections do not pile up)."""
MAX_CONNECTIONS = 32
"""Connections served at once; more get a 503 at once instead of a thread each."""
REQUEST_DEADLINE_S = 20.0
"""A request's line and headers must arrive within this of the connection's turn to speak, however they trickle in:
a client that sends a byte just before each idle timeout would otherwise hold its slot for ever."""
MAX_PER_CLIENT = 8
"""Connections served at once for one client address; more get a 503 at once (one client cannot take every slot)."""
_WILDCARDS = ("0.0.0.0", "::", "")
LIVE_POLL_MS = 3000
"""How often a served page asks for a running run's figures."""
MAX_LIVE_RUNS = 8
"""Running runs whose record files are followed at once (the least recently asked is dropped)."""
RECENTLY_ENDED_S = 600.0
"""/live/status.json also lists runs that ended this recently, so an open page shows how they ended."""
LIVE_LOCK_TIMEOUT_S = 10.0
"""A live request that cannot start within this (others computing) gets 503."""
_CSP_FROM = "default-src 'none';"
_CSP_TO = "default-src 'none'; connect-src 'self';"


def is_loopback(host: str) -> bool:
    if host in ("localhost", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def allowed_hosts(bound: str, extra: Iterable[str] = ()) -> frozenset[str]:
    """Host names accepted (lower case, no port) for a server bound to ``bound`` (a wildcard bind also
    accepts any IP literal, see :func:`host_ok`). A name outside the set is how a DNS-rebinding page would
    reach the server, so it gets 421."""
    names = {bound.strip("[]").lower(), *(e.lower() for e in extra)}
    if is_loopback(bound) or bound in _WILDCARDS:
        names |= {"localhost", "127.0.0.1", "::1"}
    if bound in _WILDCARDS:
        names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
    return frozenset(n for n in names if n)


def _host_of(header: str) -> str:
    """The host part of a Host header (``[::1]:80`` -> ``::1``, ``a:80`` -> ``a``), lower case."""
    h = header.strip().lower()
    if h.startswith("["):
        return h[1:h.find("]")] if "]" in h else h
    return h.rsplit(":", 1)[0] if h.count(":") == 1 else h


def host_ok(header: str | None, names: frozenset[str], wildcard: bool) -> bool:
    if not header:
        return False
    host = _host_of(header)
    if host in names:
        return True
    if wildcard:
        try:
            ipaddress.ip_address(host)
            return True
        except ValueError:
            return False
    return False


class PageCache:
    """What `serve` built for one state of the store: the Site and the pages rendered from it, reused until
    the store's stamp (stepscope.cli.dashboardstamp.site_stamp: every indexed row and metric, a running run's
    state in its directory) changes; and the newest full reports and diffs by their runs' stamps. One build at
    a time: requests arriving meanwhile wait for it and are answered from it."""

    REPORTS = 16
    """Report and diff pages kept (the least recently asked is dropped)."""

    def __init__(self, name: str | None) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._stamp: str | None = None
        self._pages: dict[str, Callable[[], str]] = {}
        self._html: dict[str, bytes] = {}
        self._runs: OrderedDict[tuple[str, ...], bytes | None] = OrderedDict()
        self.builds = 0
        """Sites built so far (a test reads it: one per change of the store, not one per request)."""

    def page(self, store: Store, path: str) -> bytes | None:
        """A dashboard page (index, regressions, compare, run, history) of the store as it is now; None when
        the site has no such page."""
        from stepscope.cli.dashboarddata import build_site
        from stepscope.cli.dashboardstamp import site_stamp

        stamp = site_stamp(store, self.name)
        with self._lock:
            if stamp != self._stamp:
                from stepscope.report.dashboard import pages

                ids = set(store.index.run_ids())
                site = replace(build_site(store, name=self.name, report_ids=ids, live=True), live_diffs=True)
                self._stamp, self._pages, self._html = stamp, pages(site), {}
                self.builds += 1
            if path not in self._html:
                render = self._pages.get(path)
                if render is None:
                    return None
                self._html[path] = with_live(render(), None).encode()
            return self._html[path]

    def run_page(self, key: tuple[str, ...], render: Callable[[], bytes | None]) -> bytes | None:
        """A report or diff page by its runs' stamps (``key``), rendered on the first request."""
        with self._lock:
            if key in self._runs:
                self._runs.move_to_end(key)
                return self._runs[key]
        body = render()  # outside the lock: a slow report does not hold the runs list up
        with self._lock:
            self._runs[key] = body
            while len(self._runs) > self.REPORTS:
                self._runs.popitem(last=False)
        return body


class _DeadlineReader(io.RawIOBase):
    """The connection's bytes, each read bounded by the idle timeout and all of them by ``deadline`` (a monotonic
    time; past it a read raises TimeoutError, which the handler answers by closing the connection)."""

    def __init__(self, sock: socket.socket, idle_s: float) -> None:
        super().__init__()
        self._sock, self._idle = sock, idle_s
        self.deadline = math.inf

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("request deadline passed")
        self._sock.settimeout(min(self._idle, left))
        return self._sock.recv_into(buffer)


def make_handler(open_store: Callable[[], Any], name: str | None, *, extra_hosts: Iterable[str] = (),
                 idle_timeout_s: float = IDLE_TIMEOUT_S,
                 request_deadline_s: float = REQUEST_DEADLINE_S) -> type[BaseHTTPRequestHandler]:
    """A GET/HEAD-only handler answering the dashboard's pages from the store (``open_store()`` gives a
    Store; one per request, as index connections belong to their thread). A page is built from the store as
    it is at the request, but only when the store changed since the last build (PageCache). It answers only
    requests with one Host header naming the address the server is bound to (or ``extra_hosts``), closes
    connections idle for ``idle_timeout_s`` or whose request is not in within ``request_deadline_s``, and never
    follows a link out of the store."""
    from stepscope.cli.dashboarddata import render_diff_page, render_report
    from stepscope.cli.dashboardstamp import run_stamps

    extra = tuple(extra_hosts)
    live = LiveRuns()
    cache = PageCache(name)

    def stamp_of(store: Store, *ids: str) -> tuple[str, ...]:
        stamps = run_stamps(store, ids)
        return (*ids, *(stamps[i] for i in ids))

    class Handler(BaseHTTPRequestHandler):
        server_version = "stepscope"
        timeout = idle_timeout_s
        pages = cache
        _reader: _DeadlineReader

        def setup(self) -> None:
            super().setup()
            self._reader = _DeadlineReader(self.connection, idle_timeout_s)
            self.rfile = io.BufferedReader(self._reader)

        def handle_one_request(self) -> None:
            self._reader.deadline = time.monotonic() + request_deadline_s  # this request's line and headers
            super().handle_one_request()

        def _page(self) -> tuple[int, bytes]:
            path = unquote(urlsplit(self.path).path).lstrip("/") or "index.html"
            store = open_store()
            try:
                if path.startswith("live/"):
                    return live.answer(store, path, urlsplit(self.path).query)
                if path.startswith("diffs/") and path.endswith(".html") and "--" in path:
                    a, _, b = path[len("diffs/"):-len(".html")].partition("--")
                    ids = set(store.index.run_ids())
                    runs = [*a.split(","), *b.split(",")]  # a side is a run or a commit's group of runs
                    if not all(i in ids for i in runs):
                        return 404, b"no diff for these runs"
                    if any(store.links_leaving(i) for i in runs):
                        return 403, b"this run has links leaving the store: not served"
                    body = cache.run_page((a, b, *stamp_of(store, *runs)), lambda: (html.encode() if (
                        html := render_diff_page(store, a, b)) else None))
                    return (200, body) if body else (404, b"no diff for these runs")
                if path.startswith("runs/") and path.endswith(".html"):
                    run_id = path[len("runs/"):-len(".html")]
                    if run_id not in store.index.run_ids():
                        return 404, b"no report for this run"
                    if store.links_leaving(run_id):
                        return 403, b"this run has links leaving the store: not served"
                    running = run_id in live.running_ids(store)
                    body = cache.run_page(("report", str(running), *stamp_of(store, run_id)), lambda: (
                        with_live(html, run_id if running else None).encode() if (
                            html := render_report(store, run_id)) else None))
                    return (200, body) if body else (404, b"no report for this run")
                body = cache.page(store, path)
                return (200, body) if body is not None else (404, b"not found")
            finally:
                store.close()

        def do_GET(self) -> None:
            self._send(head=False)

        def do_HEAD(self) -> None:
            self._send(head=True)

        def _send(self, *, head: bool) -> None:
            address: Any = self.server.server_address
            bound = address[0].decode() if isinstance(address[0], bytes) else str(address[0])
            hosts = self.headers.get_all("Host") or []
            if len(hosts) > 1:  # which one a proxy or a cache would take is anyone's guess
                status, body = 400, b"more than one Host header"
                self.close_connection = True
            elif not host_ok(self.headers.get("Host"), allowed_hosts(bound, extra), bound in _WILDCARDS):
                status, body = 421, b"this server answers only to its own address (Host header refused)"
            else:
                try:
                    status, body = self._page()
                except UserError as e:
                    status, body = 404, str(e).encode()
                except Exception as e:  # a page that cannot be rendered is a 500, never a dead server
                    print(f"stepscope serve: {self.path[:200]}: {type(e).__name__}: {str(e)[:200]}",
                          file=sys.stderr, flush=True)
                    status, body = 500, b"internal error: this page could not be rendered"
            try:
                self.send_response(status)
                ctype = "text/html; charset=utf-8" if status == 200 else "text/plain"
                if status == 200 and urlsplit(self.path).path.startswith("/live/"):
                    ctype = "application/json"
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.send_header("X-Content-Type-Options", "nosniff")
                self.end_headers()
                if not head:
                    self.wfile.write(body)
            except OSError:  # the client went away (BrokenPipe, reset, timeout): nothing to tell anyone
                self.close_connection = True

        def log_message(self, fmt: str, *args: Any) -> None:
            pass

    return Handler


def with_live(html: str, run_id: str | None) -> str:
    """A served page with the live script (report/dashboard/assets/live.js) and a CSP that lets it ask this
    server (connect-src 'self'; everything else as strict as the written page)."""
    from stepscope.report.html.escape import json_script

    asset = (Path(__file__).resolve().parents[1] / "report" / "dashboard" / "assets" / "live.js").read_text()
    tail = (json_script({"run": run_id, "poll_ms": LIVE_POLL_MS}, element_id="ss-live")
            + f"<script>{asset}</script>")
    html = html.replace(_CSP_FROM, _CSP_TO, 1)
    at = html.rfind("</body>")
    return html[:at] + tail + html[at:] if at >= 0 else html + tail


class LiveRuns:
    """The live figures of running runs, read incrementally (store/tail.py) and computed one request at a
    time: at most MAX_LIVE_RUNS runs followed, the least recently asked dropped first."""

    def __init__(self) -> None:
        self._tails: OrderedDict[str, RunTail] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def rows(store: Store, where: str, params: list[Any]) -> list[RunRow]:
        """The index rows matching ``where``, a row still ``running`` checked against its run directory as
        Store.rows does (a killed launcher never updated it), without reading every row of a large store: the
        pages poll this every few seconds."""
        from stepscope.store.rundir import live_status

        out = []
        for r in store.index.runs(where, params):
            if r.status == "running":
                try:
                    live = live_status(store.run_path(r.id))
                except UserError:  # not a plain id, or a link out of the store: as the index says
                    live = None
                if live is not None and live[0].value != r.status:
                    r = replace(r, status=live[0].value, end_ns=live[1], exit_code=live[2])
            out.append(r)
        return out

    def running_ids(self, store: Store) -> set[str]:
        return {r.id for r in self.rows(store, "status = ?", ["running"]) if r.status == "running"}

    def answer(self, store: Store, path: str, query: str = "") -> tuple[int, bytes]:
        if path == "live/status.json":  # running runs, and those that ended lately (a page turns them final)
            import time

            recent = time.time_ns() - int(RECENTLY_ENDED_S * 1e9)
            return 200, _json({"runs": {r.id: r.status for r in self.rows(store, "status = ? OR end_ns >= ?",
                                                                           ["running", recent])
                                        if r.status == "running" or (r.end_ns or 0) >= recent}})
        if not (path.startswith("live/runs/") and path.endswith(".json")):
            return 404, b"not found"
        run_id = path[len("live/runs/"):-len(".json")]
        cursor = None
        if run_id.endswith("/records"):  # a page's charts: the records after its cursor (liverecords.py)
            from stepscope.cli.liverecords import CursorError, parse_cursor

            run_id = run_id[:-len("/records")]
            try:
                cursor = parse_cursor(parse_qs(query, keep_blank_values=True))
            except CursorError as e:
                return 400, str(e).encode()
        if run_id not in store.index.run_ids():
            return 404, b"no such run"
        run_dir = store.run_path(run_id)
        if not self._lock.acquire(timeout=LIVE_LOCK_TIMEOUT_S):
            return 503, b"busy: try again"
        try:
            tail = self._tails.pop(run_id, None) or RunTail(run_dir)
            self._tails[run_id] = tail
            while len(self._tails) > MAX_LIVE_RUNS:
                self._tails.popitem(last=False)
            if cursor is not None:
                from stepscope.cli.liverecords import records_after

                return 200, _json(records_after(tail.poll(), cursor))
            return 200, _json(live_figures(tail))
        finally:
            self._lock.release()


def live_figures(tail: RunTail) -> dict[str, Any]:
    """What a page shows of a running run: analyze/run/live.py's figures, the summary's headline and the
    advisor's findings on the records read so far (the same functions as `stepscope top`)."""
    import time

    from stepscope.analyze.run.live import live_state
    from stepscope.app import RunAnalysis

    data = tail.poll()
    ra = RunAnalysis(data, read_traces=False)  # the records so far; traces come after the run
    summary = ra.summary
    state = live_state(data, now_ns=data.run.end_ns or time.time_ns())
    h = summary.headline
    return {
        "id": data.run.id, "status": data.run.status.value, "steps": state.steps,
        "recent_steps": state.recent_steps, "recent_steps_per_s": state.recent_steps_per_s,
        "last_step_ns": state.last_step_ns, "recent_step_median_ns": state.recent_step_median_ns,
        "run_step_median_ns": h.step_time_median_ns, "samples_per_s": h.samples_per_s,
        "data_wait_share": h.data_wait_share,
        "ranks": [{"rank": r.rank, "steps": r.steps, "recent_step_median_ns": r.recent_step_median_ns,
                   "recent_useful_median_ns": r.recent_useful_median_ns, "straggler": r.straggler}
                  for r in state.ranks],
        "stragglers": [{"rank": r.rank, "why": r.straggler} for r in state.ranks if r.straggler],
        "findings": [f.title for f in ra.advice.findings],
    }


def _json(doc: Any) -> bytes:
    import json
    import math

    def clean(v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        if isinstance(v, list):
            return [clean(x) for x in v]
        return v

    return json.dumps(clean(doc), sort_keys=True).encode()


class DashboardServer(ThreadingHTTPServer):
    """ThreadingHTTPServer with at most ``max_connections`` handler threads, at most ``max_per_client`` of them
    for one client address (more get 503 at once), and silence for clients that disconnect (no BrokenPipe
    tracebacks)."""

    daemon_threads = True
    request_queue_size = 128  # a burst of connections waits in the backlog instead of SYN retries

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler],
                 max_connections: int = MAX_CONNECTIONS, max_per_client: int = MAX_PER_CLIENT) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, handler)
        self._slots = threading.BoundedSemaphore(max_connections)
        self._per_client: dict[str, int] = {}
        self._per_client_lock = threading.Lock()
        self._max_per_client = max_per_client

    def _take(self, client: str) -> bool:
        """A slot for ``client``, if it has fewer than its share and one is free."""
        with self._per_client_lock:
            if self._per_client.get(client, 0) >= self._max_per_client:
                return False
            if not self._slots.acquire(blocking=False):
                return False
            self._per_client[client] = self._per_client.get(client, 0) + 1
            return True

    def _give(self, client: str) -> None:
        with self._per_client_lock:
            left = self._per_client.get(client, 1) - 1
            if left:
                self._per_client[client] = left
            else:
                self._per_client.pop(client, None)
            self._slots.release()

    def process_request(self, request: Any, client_address: Any) -> None:
        client = str(client_address[0])
        if not self._take(client):
            try:
                request.sendall(b"HTTP/1.0 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            except OSError:
                pass
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._give(client)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._give(str(client_address[0]))

    def handle_error(self, request: Any, client_address: Any) -> None:
        err = sys.exc_info()[1]
        if isinstance(err, (OSError, TimeoutError)):
            return  # a client that went away or stayed silent past the idle timeout
        print(f"stepscope serve: {type(err).__name__}: {str(err)[:200]}", file=sys.stderr, flush=True)


class ServeCommand:
    """Serve the dashboard's pages live from the store (read-only: GET and HEAD only; other methods get 501). Binds to
    127.0.0.1 unless --host says otherwise, and then warns: the pages show commands, paths and host names, with no
    authentication. Requests must name the bound address in their Host header (DNS rebinding), and only one Host
    header; --allow-host adds a name. Idle connections close after 10 s, and a request's line and headers must be in
    within 20 s however they trickle; at most 32 connections are served at once, 8 of them for one client address.
    Links inside a run directory that leave the store are never followed. Running runs are marked in the runs list
    and their report pages show live figures and redraw their charts (step time, stacked phases, throughput with
    the rolling-median window a report of the run so far would use, logged metrics) as records arrive, every 3 s
    without a reload (/live/status.json, /live/runs/ID.json,
    /live/runs/ID/records.json?after=STEP&metrics=ROWS). Pages show the store as it is when asked, but are built
    once per change of the store: a request compares a stamp of the index (every run row and metric, and the state
    of runs still running) with the one the pages were built from, and rebuilds them only when it differs; a run's
    report and a diff are kept by the stamps of their runs (index row and run directory). Ctrl-C stops it."""

    name = "serve"
    help = "serve the dashboard live from the store on 127.0.0.1"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--port", type=int, default=8765, help="port (default: 8765; 0 picks a free one)")
        parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1, this machine)")
        parser.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                            help="also answer requests for this host name (e.g. a DNS name of this machine)")
        parser.add_argument("--idle-timeout", type=float, default=IDLE_TIMEOUT_S, metavar="S",
                            help=f"close a connection idle this many seconds (default: {IDLE_TIMEOUT_S:g})")
        parser.add_argument("--max-connections", type=int, default=MAX_CONNECTIONS, metavar="N",
                            help=f"connections served at once; more get 503 (default: {MAX_CONNECTIONS})")
        parser.add_argument("--max-per-client", type=int, default=MAX_PER_CLIENT, metavar="N",
                            help=f"connections served at once for one client address (default: {MAX_PER_CLIENT})")
        parser.add_argument("--request-deadline", type=float, default=REQUEST_DEADLINE_S, metavar="S",
                            help="close a connection whose request line and headers are not in within this many "
                                 f"seconds, however they trickle (default: {REQUEST_DEADLINE_S:g})")
        parser.add_argument("--name", help="history of runs of this name (default: the newest run's name)")
        add_store_args(parser)

    def run(self, args: argparse.Namespace) -> int:
        if not 0 < args.idle_timeout <= 3600:
            raise UserError(f"--idle-timeout {args.idle_timeout:g}: give seconds between 0 and 3600")
        if not 1 <= args.max_connections <= 1024:
            raise UserError(f"--max-connections {args.max_connections}: give 1 to 1024")
        if not 1 <= args.max_per_client <= 1024:
            raise UserError(f"--max-per-client {args.max_per_client}: give 1 to 1024")
        if not 0 < args.request_deadline <= 3600:
            raise UserError(f"--request-deadline {args.request_deadline:g}: give seconds between 0 and 3600")
        store_from(args).close()  # fail now, with one line, if the store cannot be opened
        try:
            handler = make_handler(lambda: store_from(args), args.name, extra_hosts=args.allow_host,
                                   idle_timeout_s=args.idle_timeout, request_deadline_s=args.request_deadline)
            server = DashboardServer((args.host, args.port), handler, args.max_connections, args.max_per_client)
        except (OSError, OverflowError) as e:  # OverflowError: a port outside 0-65535
            raise UserError(f"cannot listen on {args.host}:{args.port}: {getattr(e, 'strerror', None) or e} — "
                            "pick another --port") from None
        host, port = server.server_address[:2]
        if isinstance(host, bytes):
            host = host.decode()
        if not is_loopback(str(host)):
            print(f"WARNING: serving on {host}, reachable from other machines: every run's command, paths, "
                  "host names and parameters are shown to anyone who can connect, without authentication. "
                  "Use the default 127.0.0.1 (and an SSH tunnel) unless this network is trusted.",
                  file=sys.stderr, flush=True)
        shown_host = f"[{host}]" if ":" in str(host) else host
        print(f"stepscope dashboard on http://{shown_host}:{port}/  (read-only; Ctrl-C stops)", file=sys.stderr,
              flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
        return 0
