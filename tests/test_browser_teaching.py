"""The built book as a student meets it on a phone (390 x 844 CSS pixels) and a desktop, in
Debian's chromium: no page heavier than a megabyte of figures or taller than 25 phone screens
(book/_ext/teaching.py), no inline formula cut off and no table header broken inside a word on a
phone, long proofs folded, and a solution's title that unfolds the solution instead of leaving it.
"""

from __future__ import annotations

import pytest

from .test_browser import PHONE, RESPONSE, Visit, _pages, browser, site  # noqa: F401
from .test_teaching import teaching

pytestmark = pytest.mark.book

#: The words of visible table headers that the browser broke across lines (a word is split at
#: spaces, hyphens, dashes and slashes, where a break is allowed).
BROKEN_HEADER_WORDS = """() => {
  const broken = [];
  for (const th of document.querySelectorAll('article th')) {
    if (!th.offsetParent) continue;
    const walk = document.createTreeWalker(th, NodeFilter.SHOW_TEXT);
    for (let n = walk.nextNode(); n; n = walk.nextNode()) {
      if (n.parentElement.closest('mjx-container')) continue;
      for (const m of n.data.matchAll(/[^\\s\\-\\u2010-\\u2015\\/]+/g)) {
        const r = document.createRange();
        r.setStart(n, m.index);
        r.setEnd(n, m.index + m[0].length);
        const tops = new Set([...r.getClientRects()].filter(x => x.width > 0)
                                                   .map(x => Math.round(x.top)));
        if (tops.size > 1) broken.push(m[0]);
      }
    }
  }
  return broken;
}"""

#: Visible inline formulas cut off: scrolled inside their own box by more than an italic
#: overhang (8 px), or reaching past an ancestor that hides its overflow or, outside any box
#: that scrolls sideways, past the screen's edge. Each as
#: [text, px hidden in its box, px past the clipping ancestor].
CUT_INLINE_FORMULAS = """() => {
  const cut = [];
  for (const s of document.querySelectorAll('article span.math')) {
    if (!s.offsetParent) continue;
    const m = s.querySelector('mjx-container');
    if (!m) continue;
    let clip = Infinity, scrolls = false;
    for (let e = s.parentElement; e && e !== document.body; e = e.parentElement) {
      const o = getComputedStyle(e).overflowX;
      // inside a box that scrolls sideways (a wide table), the reader scrolls to it
      if (o === 'auto' || o === 'scroll') { scrolls = true; break; }
      if (o === 'hidden' || o === 'clip') clip = Math.min(clip, e.getBoundingClientRect().right);
    }
    if (!scrolls) clip = Math.min(clip, window.innerWidth);
    const hidden = s.scrollWidth - s.clientWidth;
    const past = m.getBoundingClientRect().right - clip;
    if (hidden > 8 || past > 2) cut.push([s.textContent.slice(0, 50), hidden, Math.round(past)]);
  }
  return cut;
}"""


def test_no_page_carries_more_than_a_megabyte_of_figures(built):
    heavy = {}
    for name in _pages(built):
        size = teaching.figure_bytes(built / name)
        if size > teaching.MAX_FIGURE_BYTES:
            heavy[name] = size
    assert not heavy, f"pages with more than {teaching.MAX_FIGURE_BYTES} bytes of figures: {heavy}"


def test_on_a_phone_every_page_is_short_its_formulas_whole_and_its_headers_unbroken(
        built, site, browser):
    screens, cut, broken = {}, {}, {}
    for name in _pages(built):
        visit = Visit(browser, site + name, **PHONE)
        try:
            screens[name] = teaching.page_height(visit.page, site + name) / PHONE["height"]
            if found := visit.page.evaluate(CUT_INLINE_FORMULAS):
                cut[name] = found
            if found := visit.page.evaluate(BROKEN_HEADER_WORDS):
                broken[name] = found
        finally:
            visit.close()
    tall = {n: round(h, 1) for n, h in screens.items() if h > teaching.MAX_SCREENS}
    problems = []
    if tall:
        problems.append(f"pages taller than {teaching.MAX_SCREENS} phone screens: {tall}")
    if cut:
        problems.append(f"inline formulas cut off on a phone: {cut}")
    if broken:
        problems.append(f"table headers broken inside a word on a phone: {broken}")
    assert not problems, "\n".join(problems)


def test_a_solutions_title_unfolds_it_and_the_page_stays(built, site, browser):
    visit = Visit(browser, site + "book/io_bound.html", **PHONE)
    try:
        page = visit.page
        solution = page.locator("div.solution.toggle").first
        assert "toggle-hidden" in solution.get_attribute("class"), "the solution is not folded"
        link = solution.locator(".admonition-title a")
        assert link.count() == 1, "the solution's title has no link to its exercise"
        url = page.url
        link.tap()
        page.wait_for_function("s => !s.classList.contains('toggle-hidden')",
                               arg=solution.element_handle(), timeout=RESPONSE)
        assert page.url == url, f"the tap left the page for {page.url}"
        link.tap()
        page.wait_for_function("s => s.classList.contains('toggle-hidden')",
                               arg=solution.element_handle(), timeout=RESPONSE)
        assert not visit.errors, visit.errors
    finally:
        visit.close()


#: How much taller than its title a folded box may be: its border and top padding, not its content.
FOLDED_SLACK = 12

#: The extra height of each folded box over its title's, in px.
FOLDED_EXTRA = """() => [...document.querySelectorAll('.admonition.toggle-hidden')].map(b =>
  b.getBoundingClientRect().height - b.querySelector('.admonition-title').getBoundingClientRect().height)"""


def test_a_folded_box_shows_its_title_and_nothing_else(built, site, browser):
    """A folded proof that holds a block quote (chapter 6) shows no empty band under its title."""
    visit = Visit(browser, site + "book/small_cache_bounds.html", **PHONE)
    try:
        extra = visit.page.evaluate(FOLDED_EXTRA)
        assert len(extra) >= 3, "the page has fewer folded boxes than expected"
        assert max(extra) <= FOLDED_SLACK, f"a folded box shows {max(extra):.0f} px under its title"
    finally:
        visit.close()


def test_long_proofs_fold_and_unfold(built, site, browser):
    """Some chapter has a folded proof; its title unfolds it to the whole proof."""
    for name in _pages(built):
        if 'proof dropdown admonition' in (built / name).read_text(encoding="utf-8"):
            break
    else:
        pytest.fail("no page has a folded proof")
    visit = Visit(browser, site + name)
    try:
        page = visit.page
        proof = page.locator("div.proof.dropdown").first
        title = proof.locator(".admonition-title")
        assert "can be skipped on a first reading" in title.inner_text()
        assert "toggle-hidden" in proof.get_attribute("class")
        folded = proof.bounding_box()["height"]
        title.click()
        page.wait_for_function("p => !p.classList.contains('toggle-hidden')",
                               arg=proof.element_handle(), timeout=RESPONSE)
        page.wait_for_function(f"p => p.getBoundingClientRect().height > {folded} + 50",
                               arg=proof.element_handle(), timeout=RESPONSE)
        assert not visit.errors, visit.errors
    finally:
        visit.close()
