"""What a page must keep whole at any width (issue 43): the checks run in the browser on every table, tile and
bar chart of a page, returning one line per problem.

- a table cell holding a number with its unit, a run id or commit, or a status / verdict word is on one line,
  not cut by its cell (scrollWidth), and visible without scrolling: its right edge within the table's
  scrolling box and within the window. With ``narrow`` (800 px) a table wider than its card may instead
  scroll sideways inside it, the cell within its scrolled width, as long as the row's name stays in view
  while it scrolls (the first column is sticky: checked with the box scrolled to its right end); the page
  itself never scrolls sideways;
- no word of letters in any cell is broken over two lines ("complet / ed", "elementwis / e");
- a header naming a change (delta, change, Δ) is visible without scrolling;
- a tile's texts lie within the tile's content box (inside its padding), and no word in it is broken;
- a bar chart's category labels are shown whole (shortened once, in Python: CSS cuts nothing) and all differ.

Elements that are not rendered are skipped: those without a box (display:none on them or an ancestor, such as
the tiles of a rank not selected) and zero-size boxes under a hidden ancestor (display:none, visibility:hidden,
content-visibility:hidden, the hidden attribute). A zero-size box with every ancestor shown is still checked:
a layout that squeezes a number to nothing is a cut number.
"""

from __future__ import annotations

PAGE_FIT_JS = r"""(narrow) => {
  const out = [];
  const STATUS = new Set(['completed', 'failed', 'running', '● running', 'incomplete', 'faster', 'slower',
    'no change', 'inconclusive', 'regression', 'improvement', 'cannot tell', 'not significant',
    'no significant change']);
  const NUM = /^[-+−±~≈<>]?\s*\d[\d,.]*(e[-+]?\d+)?(\s?[%×x]|\s[A-Za-zµ]+(\/[A-Za-z]+)?(\s[A-Za-z]+)?)?$/;
  const ID = /^[0-9a-z]{6,12}(\+dirty)?$/;
  const view = window.innerWidth;
  function hiddenAbove(e) {
    for (let p = e; p; p = p.parentElement) {
      const cs = getComputedStyle(p);
      if (p.hidden || cs.display === 'none' || cs.visibility === 'hidden' || cs.visibility === 'collapse' ||
          cs.contentVisibility === 'hidden') return true;
    }
    return false;
  }
  function rendered(e) {  // a box on the page (see the module docstring)
    if (!e.getClientRects().length) return false;
    const b = e.getBoundingClientRect();
    return !((b.width === 0 || b.height === 0) && hiddenAbove(e));
  }
  function lines(node) {
    const r = document.createRange(); r.selectNodeContents(node);
    const tops = new Set([...r.getClientRects()].filter(b => b.width > 0).map(b => Math.round(b.top)));
    return tops.size;
  }
  function scroller(e) {
    for (let p = e.parentElement; p; p = p.parentElement) {
      const o = getComputedStyle(p).overflowX;
      if (o === 'auto' || o === 'scroll' || o === 'hidden') return p;
    }
    return document.documentElement;
  }
  function brokenWords(el, where) {
    const walk = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    for (let t = walk.nextNode(); t; t = walk.nextNode()) {
      for (const m of t.textContent.matchAll(/[A-Za-z]{2,}/g)) {
        const r = document.createRange(); r.setStart(t, m.index); r.setEnd(t, m.index + m[0].length);
        const tops = new Set([...r.getClientRects()].filter(b => b.width > 0).map(b => Math.round(b.top)));
        if (tops.size > 1) out.push(where + ': word "' + m[0] + '" broken over ' + tops.size + ' lines');
      }
    }
  }
  function visible(el, where) {
    const b = el.getBoundingClientRect(), s = scroller(el), sb = s === document.documentElement
      ? {left: 0, right: view} : s.getBoundingClientRect();
    const scrolls = s !== document.documentElement && getComputedStyle(s).overflowX !== 'hidden' &&
      s.scrollWidth > s.clientWidth + 1 && b.right <= sb.left + s.scrollWidth + 1;
    if (narrow && scrolls) return;
    if (b.right > Math.min(sb.right, view) + 1 || b.left < Math.max(sb.left, 0) - 1)
      out.push(where + ': not visible without scrolling (' + Math.round(b.left) + '..' + Math.round(b.right) +
               ' in ' + Math.round(sb.left) + '..' + Math.round(Math.min(sb.right, view)) + ')');
  }
  document.querySelectorAll('table').forEach((table, ti) => {
    if (!rendered(table) || table.closest('.ss-heat')) return;
    const tname = '#' + (table.id || ('table' + ti));
    table.querySelectorAll('th').forEach(th => {
      const text = th.textContent.trim();
      if (/delta|change|Δ/i.test(text) && th.closest('thead') && rendered(th))
        visible(th, tname + ' header "' + text + '"');
    });
    table.querySelectorAll('td').forEach(td => {
      const text = td.textContent.replace(/\s+/g, ' ').trim(), where = tname + ' cell "' + text + '"';
      if (!text || !rendered(td)) return;
      brokenWords(td, tname);
      const kind = STATUS.has(text.toLowerCase()) ? 'status' : NUM.test(text) ? 'number' :
                   (ID.test(text) && td.classList.contains('mono')) ? 'id' : null;
      if (!kind) return;
      if (lines(td) !== 1) out.push(where + ' (' + kind + ') on ' + lines(td) + ' lines');
      if (td.scrollWidth > td.clientWidth + 1) out.push(where + ' (' + kind + ') cut by its cell');
      visible(td, where + ' (' + kind + ')');
    });
  });
  if (document.documentElement.scrollWidth > view + 1)
    out.push('the page scrolls sideways: ' + document.documentElement.scrollWidth + ' px in a ' + view + ' px window');
  document.querySelectorAll('table').forEach((table, ti) => {  // rows keep their name in view when scrolled
    const s = scroller(table);
    if (s === document.documentElement || s.scrollWidth <= s.clientWidth + 1 || !rendered(table)) return;
    const keep = s.scrollLeft;
    s.scrollLeft = s.scrollWidth;
    const sb = s.getBoundingClientRect();
    [...table.rows].slice(0, 50).forEach(r => {
      const c = r.cells[0];
      if (!c || !rendered(c)) return;
      const b = c.getBoundingClientRect();
      if (b.left < sb.left - 1 || b.right > sb.right + 1)
        out.push('#' + (table.id || 'table' + ti) + ' scrolled: row name "' + c.textContent.trim() + '" out of view');
    });
    s.scrollLeft = keep;
  });
  document.querySelectorAll('.ss-tile').forEach(tile => {
    if (!rendered(tile)) return;
    const r0 = tile.getBoundingClientRect(), cs = getComputedStyle(tile);  // the tile's content box
    const b = {left: r0.left + parseFloat(cs.paddingLeft) + parseFloat(cs.borderLeftWidth),
               right: r0.right - parseFloat(cs.paddingRight) - parseFloat(cs.borderRightWidth)};
    tile.querySelectorAll('*').forEach(e => {
      if (!e.textContent.trim() || e.children.length || !rendered(e)) return;
      const r = document.createRange(); r.selectNodeContents(e);
      const t = r.getBoundingClientRect();
      if (t.right > b.right + 0.5 || t.left < b.left - 0.5)
        out.push('tile "' + e.textContent.trim() + '" outside its tile (' + Math.round(t.left) + '..' +
                 Math.round(t.right) + ' in ' + Math.round(b.left) + '..' + Math.round(b.right) + ')');
    });
    brokenWords(tile, 'tile');
  });
  document.querySelectorAll('figure.ss-plot[data-kind=bars]').forEach(f => {
    if (!rendered(f)) return;
    const names = [...f.querySelectorAll('.ss-bar-name')].filter(rendered);
    names.forEach(n => {
      if (n.scrollWidth > n.clientWidth + 1) out.push(f.id + ': bar label "' + n.textContent + '" cut');
    });
    const texts = names.map(n => n.textContent);
    if (new Set(texts).size !== texts.length) out.push(f.id + ': bar labels repeat');
  });
  return out;
}"""
