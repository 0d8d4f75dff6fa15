"""The book's teaching devices and weight, page by page: ``python benchmarks/teaching.py [HTML]``.

For every page of _toc.yml, from its MyST source: worked examples, checks of understanding (and
the main sections still without one), takeaways, exercises and how many carry a difficulty; from
the built site (``HTML``, default ``_build/html``, when it exists): the bytes of figures the page
carries and its height in phone screens (390 x 844 CSS pixels, in Debian's chromium). The
conventions and limits are those of ``book/_ext/teaching.py``.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _teaching():
    spec = importlib.util.spec_from_file_location("teaching", ROOT / "book/_ext/teaching.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def heights(html: Path, names: list[str]) -> dict[str, int]:
    """Each page's height on a phone in CSS pixels (empty without chromium)."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        return {}
    from playwright.sync_api import sync_playwright

    teaching = _teaching()
    out = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, headless=True,
                                    args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        for name in names:
            out[name] = teaching.page_height(page, (html / name).as_uri())
        browser.close()
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    html = Path(argv[0] if argv else ROOT / "_build/html").resolve()
    teaching = _teaching()
    chapters = set(teaching.chapters())
    built = (html / "index.html").is_file()
    rows = []
    for path in teaching.pages():
        page = teaching.read_page(path)
        name = path.relative_to(ROOT).with_suffix(".html").as_posix()
        figures = teaching.figure_bytes(html / name) if built and (html / name).is_file() else None
        rows.append((name, path in chapters, page, figures))
    tall = heights(html, [r[0] for r in rows]) if built else {}
    screen = teaching.PHONE["height"]
    head = (f"{'page':34} {'chapter':>7} {'worked':>6} {'checks':>6} {'unchecked':>9} "
            f"{'takeaways':>9} {'exercises':>9} {'rated':>5} {'figures kB':>10} {'screens':>7}")
    print(head)
    print("-" * len(head))
    for name, chapter, page, figures in rows:
        kb = "" if figures is None else f"{figures / 1000:.0f}"
        screens = f"{tall[name] / screen:.1f}" if name in tall else ""
        print(f"{name:34} {'yes' if chapter else '':>7} {page.worked:>6} {page.checks:>6} "
              f"{len(page.unchecked):>9} {page.takeaways:>9} {len(page.exercises):>9} "
              f"{page.rated:>5} {kb:>10} {screens:>7}")
    print()
    print(f"limits: every chapter >= 1 worked example and a check in each main section; every "
          f"exercise rated; figures <= {teaching.MAX_FIGURE_BYTES / 1e6:g} MB and height <= "
          f"{teaching.MAX_SCREENS} screens of {teaching.PHONE['width']} x {screen} px per page")
    if not built:
        print(f"(no built site at {html}: run `make book` for the figures and heights)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
