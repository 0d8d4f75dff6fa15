"""How fast the crossover explorer responds. Prints a table.

- one live slider move of :func:`ioattn.widgets.explorer` at N = 4096, d = 64 (the exact counts
  at the new M, the marker moved and the figure redrawn to PNG), median over many moves (the
  target is under 100 ms), in the forward and in the backward pass, dense and under the causal
  mask (the exact masked counts, equal to ``io_cost(..., mask=ioattn.masks.causal(4096))``);
- a change of d in the live widget (a new sweep, cached afterwards), of the pass and of the mask;
- the generation time and the size of :func:`ioattn.explorer.static_explorer` as the book
  makes it (N in 1024, 4096, 16384, d in 32, 64, 128, 256, both passes, dense and causal);
- with Playwright and chromium installed, the static explorer's redraw in the browser: one
  move of the M slider and one change of d (the script's work for one input event).

Run ``python benchmarks/explorer.py`` (a few minutes: the static explorer's exact crossovers
cost every M of each range).
"""

from __future__ import annotations

import platform
import statistics
import sys
import time

from ioattn.explorer import static_explorer
from ioattn.widgets import explorer


def timed(f, repeat):
    times = []
    for i in range(repeat):
        t = time.perf_counter()
        f(i)
        times.append(time.perf_counter() - t)
    return statistics.median(times), min(times), max(times)


_REDRAW = """(sel) => { const s = document.querySelector(sel); const n = +s.max + 1, ts = [];
  for (let r = 0; r < 5; r++) for (let k = 0; k < n; k++) { const t = performance.now();
    s.value = String(k); s.dispatchEvent(new Event('input')); ts.push(performance.now() - t); }
  ts.sort((a, b) => a - b);
  return [ts[ts.length >> 1] / 1000, ts[0] / 1000, ts[ts.length - 1] / 1000]; }"""


def _in_browser(page: str):
    """(median, min, max) seconds of the static script's redraw for a move of M and a change
    of d, in headless chromium; None without Playwright or chromium."""
    import shutil

    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        return None
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-gpu"])
        try:
            tab = b.new_page()
            tab.set_content("<!doctype html><body>" + page + "</body>")
            tab.evaluate(_REDRAW, "input.ioe-M")                    # warm up
            return tab.evaluate(_REDRAW, "input.ioe-M"), tab.evaluate(_REDRAW, "input.ioe-d")
        finally:
            b.close()


def main(out=sys.stdout):
    w = explorer(N=4096, d=64)
    positions = [4 + 12 * (i % 25) / 24 for i in range(50)]      # log2 M from 4 to 16
    slider = timed(lambda i: w.update(log2_M=positions[i]), 50)
    ds = [32, 128, 256, 64] * 2
    d_change = timed(lambda i: w.update(d=ds[i]), len(ds))
    passes = [True, False] * 4
    pass_change = timed(lambda i: w.update(backward=passes[i]), len(passes))
    w.update(backward=True)
    slider_back = timed(lambda i: w.update(log2_M=positions[i]), 50)
    masks = [True, False] * 4
    mask_change = timed(lambda i: w.update(causal=masks[i]), len(masks))
    w.update(backward=False, causal=True)
    slider_causal = timed(lambda i: w.update(log2_M=positions[i]), 50)
    w.update(backward=True)
    slider_causal_back = timed(lambda i: w.update(log2_M=positions[i]), 50)
    html = []
    static = timed(lambda i: html.append(static_explorer(N=4096, Ns=(1024, 4096, 16384))), 1)
    size = len(html[-1].encode())
    browser = _in_browser(html[-1])
    rows = [
        ("live slider move (M), N=4096 d=64", slider, "target < 100 ms"),
        ("  the same, backward pass", slider_back, "target < 100 ms"),
        ("  the same, causal mask, forward", slider_causal, "target < 100 ms"),
        ("  the same, causal mask, backward", slider_causal_back, "target < 100 ms"),
        ("live d change (sweep cached after 1st)", d_change, ""),
        ("live pass change (cached after 1st)", pass_change, ""),
        ("live mask change (cached after 1st)", mask_change, ""),
        ("static_explorer() generation", static, f"{size / 1024:.1f} KiB HTML"),
    ]
    if browser:
        rows += [("static script: one M slider move", browser[0], "in chromium"),
                 ("static script: one d change", browser[1], "in chromium")]
    print(f"crossover explorer, Python {platform.python_version()}, {platform.machine()}",
          file=out)
    print(f"{'what':<42}{'median ms':>10}{'min ms':>9}{'max ms':>9}  note", file=out)
    print("-" * 88, file=out)
    for what, (med, lo, hi), note in rows:
        print(f"{what:<42}{med * 1e3:>10.1f}{lo * 1e3:>9.1f}{hi * 1e3:>9.1f}  {note}", file=out)


if __name__ == "__main__":
    main()
