"""Shared real-browser fixtures: headless Chromium via Playwright and a page that records what went wrong."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture
def browser() -> Iterator[Any]:
    """A headless Chromium (skips when chromium or playwright is missing)."""
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install chromium) — the real-browser test needs it")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (python) is not installed")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu",
                                                              "--disable-background-networking"])
        yield b
        b.close()


class OfflinePage:
    """A page that records console errors, page errors, dialogs and every request outside file:/data:."""

    def __init__(self, browser: Any, width: int = 1366, height: int = 900) -> None:
        self.page = browser.new_page(viewport={"width": width, "height": height})
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request",
                     lambda r: self.requests.append(r.url) if not r.url.startswith(("file:", "data:")) else None)
        self.page.on("dialog", lambda d: self.errors.append("dialog opened: " + d.message))
