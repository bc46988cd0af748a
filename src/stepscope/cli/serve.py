"""The dashboard served live from the store: `stepscope serve --port 8765` (127.0.0.1, read-only)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

from stepscope.cli.common import add_store_args, store_from
from stepscope.errors import UserError


def make_handler(open_store: Callable[[], Any], name: str | None) -> type[BaseHTTPRequestHandler]:
    """A GET/HEAD-only handler rendering the dashboard's pages from the store on each request
    (``open_store()`` gives a Store; one per request, as index connections belong to their thread)."""
    from stepscope.cli.historydata import render_diff_page, render_report, site_from_store
    from stepscope.report.dashboard import pages

    class Handler(BaseHTTPRequestHandler):
        server_version = "stepscope"

        def _page(self) -> tuple[int, bytes]:
            path = unquote(urlsplit(self.path).path).lstrip("/") or "index.html"
            store = open_store()
            try:
                if path.startswith("diffs/") and path.endswith(".html") and "--" in path:
                    a, _, b = path[len("diffs/"):-len(".html")].partition("--")
                    ids = set(store.index.run_ids())
                    html = render_diff_page(store, a, b) if a in ids and b in ids else None
                    return (200, html.encode()) if html else (404, b"no diff for these runs")
                if path.startswith("runs/") and path.endswith(".html"):
                    run_id = path[len("runs/"):-len(".html")]
                    html = render_report(store, run_id) if run_id in store.index.run_ids() else None
                    return (200, html.encode()) if html else (404, b"no report for this run")
                ids = set(store.index.run_ids())
                site = replace(site_from_store(store, name=name, report_ids=ids), live_diffs=True)
                render = pages(site).get(path)
                return (200, render().encode()) if render else (404, b"not found")
            finally:
                store.close()

        def do_GET(self) -> None:
            self._send(head=False)

        def do_HEAD(self) -> None:
            self._send(head=True)

        def _send(self, *, head: bool) -> None:
            status, body = self._page()
            self.send_response(status)
            self.send_header("Content-Type", "text/html; charset=utf-8" if status == 200 else "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            if not head:
                self.wfile.write(body)

        def log_message(self, fmt: str, *args: Any) -> None:
            pass

    return Handler


class ServeCommand:
    """Serve the dashboard's pages live from the store (read-only: GET and HEAD only; other methods get
    501). Binds to 127.0.0.1 unless --host says otherwise; Ctrl-C stops it."""

    name = "serve"
    help = "serve the dashboard live from the store on 127.0.0.1"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--port", type=int, default=8765, help="port (default: 8765; 0 picks a free one)")
        parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1, this machine)")
        parser.add_argument("--name", help="history of runs of this name (default: the newest run's name)")
        add_store_args(parser)

    def run(self, args: argparse.Namespace) -> int:
        store_from(args).close()  # fail now, with one line, if the store cannot be opened
        try:
            handler = make_handler(lambda: store_from(args), args.name)
            server = ThreadingHTTPServer((args.host, args.port), handler)
        except (OSError, OverflowError) as e:  # OverflowError: a port outside 0-65535
            raise UserError(f"cannot listen on {args.host}:{args.port}: {getattr(e, 'strerror', None) or e} — "
                            "pick another --port") from None
        host, port = server.server_address[:2]
        if isinstance(host, bytes):
            host = host.decode()
        print(f"stepscope dashboard on http://{host}:{port}/  (read-only; Ctrl-C stops)", file=sys.stderr,
              flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
        return 0
