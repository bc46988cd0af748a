"""Looking at a page as a person does, in headless Chromium: offline (every request but the page itself and
data: URLs refused and recorded), console errors recorded, screenshots kept, and the checks on drawn
charts: text boxes that overlap, tick labels that are not round."""

from __future__ import annotations

import itertools
import math
import os
import re
from pathlib import Path
from typing import Any

from tests.integration.conftest import OfflinePage

OVERLAPS_JS = """() => {
  const out = [];
  document.querySelectorAll('figure.ss-plot').forEach(f => {
    const els = [...f.querySelectorAll('.ss-axis-layer span, .ss-bars-axis .ss-tick, .ss-bars-axis .ss-axis-title, '
                                     + 'figcaption, .ss-reset:not([hidden])')]
      .filter(e => e.textContent.trim() && e.getClientRects().length);
    const boxes = els.map(e => [e.textContent, e.getBoundingClientRect()]);
    for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
      const [ta, a] = boxes[i], [tb, b] = boxes[j];
      if (a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5)
        out.push(f.id + ': "' + ta + '" overlaps "' + tb + '"');
    }
  });
  return out;
}"""

TICKS_JS = """() => [...document.querySelectorAll('figure.ss-plot[data-kind=xy]')].map(f => {
  const spec = JSON.parse(f.querySelector('script.ss-spec').textContent);
  const t = sel => [...f.querySelectorAll(sel)].map(e => e.textContent);
  return {id: f.id, xlog: !!spec.xAxis.log || spec.xAxis.unit === 'date' || !!spec.xAxis.labels,
          ylog: !!spec.yAxis.log, x: t('.ss-tick-x'), y: t('.ss-tick-y'),
          xtitle: t('.ss-axis-x')[0], ytitle: t('.ss-axis-y')[0]};
})"""

SUFFIX = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9}


def screenshots_dir(tmp_path: Path) -> Path:
    """Where screenshots go: $STEPSCOPE_SCREENSHOTS, else the test's own tmp dir."""
    d = Path(os.environ.get("STEPSCOPE_SCREENSHOTS") or tmp_path / "screenshots")
    d.mkdir(parents=True, exist_ok=True)
    return d


class Viewer(OfflinePage):
    """An OfflinePage whose every request other than the page's own file and data: URLs is refused."""

    def __init__(self, browser: Any, width: int) -> None:
        super().__init__(browser, width=width, height=900)
        self.refused: list[str] = []
        self.page.route("**/*", self._route)

    def _route(self, route: Any) -> None:
        url = route.request.url
        if url.startswith("data:") or url == self.url:
            route.continue_()
        else:
            self.refused.append(url)
            route.abort()

    def open(self, path: Path) -> Any:
        self.url = path.as_uri()
        self.page.goto(self.url)
        self.page.wait_for_load_state("load")
        return self.page


def round_ticks_problems(charts: list[dict[str, Any]]) -> list[str]:
    """Tick sequences that are not round: linear ticks must be equally spaced by 1, 2 or 5 × 10^k in the
    axis's display unit (a k/M/G suffix read back), start at a multiple of that step, and never repeat.
    Log, date and named (commit) axes are skipped here ("xlog")."""
    bad = []
    for c in charts:
        for axis, log in (("x", c["xlog"]), ("y", c["ylog"])):
            texts = c[axis]
            if log or len(texts) < 2:
                continue
            vals = []
            for t in texts:
                m = re.fullmatch(r"(-?\d+(?:\.\d+)?)([kMG]?)", t)
                if m is None:
                    bad.append(f"{c['id']} {axis}: tick {t!r} is not a number")
                    break
                vals.append(float(m.group(1)) * SUFFIX[m.group(2)])
            else:
                vals.sort()
                steps = {round(b - a, 9) for a, b in itertools.pairwise(vals)}
                if len(set(texts)) != len(texts):
                    bad.append(f"{c['id']} {axis}: repeated ticks {texts}")
                step = min(steps)
                mant = step / 10 ** math.floor(math.log10(step))
                if any(abs(s / step - round(s / step)) > 1e-6 for s in steps) or \
                        min(abs(mant - m) for m in (1, 2, 5, 10)) > 1e-6 or \
                        abs(vals[0] / step - round(vals[0] / step)) > 1e-6:
                    bad.append(f"{c['id']} {axis}: ticks {texts} are not round")
    return bad
