"""How fast the crossover explorer responds. Prints a table.

- one live slider move of :func:`ioattn.widgets.explorer` at N = 4096, d = 64 (the exact counts
  at the new M, the marker moved and the figure redrawn to PNG), median over many moves (the
  target is under 100 ms), in the forward and in the backward pass, dense and under the causal
  mask (the exact masked counts, equal to ``io_cost(..., mask=ioattn.masks.causal(4096))``);
- a change of d in the live widget (a new sweep, cached afterwards), of the pass and of the mask;
- the generation time and the size of :func:`ioattn.explorer.static_explorer` as the book
  makes it (N in 1024, 4096, 16384, d in 32, 64, 128, 256, both passes, dense and causal);
- with Playwright and chromium installed, the static explorer's redraw in the browser: one
  move of the M slider and one change of d (the script's work for one input event);
- side by side with the package as it was before the layout was reused (``--before``, default
  :data:`sides.BEFORE`; ``benchmarks/sides.py``): a full redraw of the live widget at
  N = 4096, d = 64, M = 4096 (a change of d, N or the pass, in a cycle of eight: d = 128, 64,
  N = 1024, 4096, backward, forward, d = 32, 64; the curves cached by a first cycle), timed
  alternately on the two sides, each sample the mean of one cycle; with the constrained layouts
  each side runs per redraw.

Run ``python benchmarks/explorer.py`` from a clone (a few minutes: the static explorer's exact
crossovers cost every M of each range).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

from ioattn.explorer import static_explorer
from ioattn.widgets import explorer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sides import BEFORE, Side, interleaved, table  # noqa: E402


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


#: A full redraw on each side: the widget, a cycle of changes of d, N and the pass (its curves
#: cached by a first run through it), and counts of the redraws and of the constrained layouts.
_FULL_SETUP = """
import itertools
import matplotlib.layout_engine as le
from ioattn.widgets import explorer
layouts = [0]
_execute = le.ConstrainedLayoutEngine.execute
def _counted(self, fig):
    layouts[0] += 1
    return _execute(self, fig)
le.ConstrainedLayoutEngine.execute = _counted
w = explorer(N=4096, d=64, log2_M=12)
changes = itertools.cycle([dict(d=128), dict(d=64), dict(N=1024), dict(N=4096),
                           dict(backward=True), dict(backward=False), dict(d=32), dict(d=64)])
for _ in range(8):
    w.update(**next(changes))
layouts, redraws = [0], [0]
"""
_FULL = "w.update(**next(changes))\nredraws[0] += 1"


def side_by_side(before: str = BEFORE, repeats: int = 9, out=sys.stdout):
    """A full redraw of the live widget (a change of d, N or the pass) before and now, timed
    alternately; prints and returns the row."""
    with Side(before) as old, Side() as new:
        sides = [old, new]
        for side in sides:
            side.exec(_FULL_SETUP)
        medians = interleaved(sides, _FULL, repeats=repeats, number=8)
        per = [side.eval("layouts[0] / redraws[0]") for side in sides]
    row = ("full redraw (change of d / N / pass)", f"{medians[0] * 1e3:.1f}",
           f"{medians[1] * 1e3:.1f}", f"{medians[0] / medians[1]:.2f}x",
           f"{per[0]:.2f}", f"{per[1]:.2f}")
    print(f"\nlive widget, N=4096 d=64 M=4096, side by side: before ({before}) and now", file=out)
    print(table([row], ("what", "before ms", "now ms", "before/now", "layouts/redraw before",
                        "now")), file=out)
    return row


def main(out=sys.stdout, before: str = BEFORE):
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
    side_by_side(before, out=out)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default=BEFORE, help=f"the commit to compare with ({BEFORE})")
    parser.add_argument("--only-side-by-side", action="store_true",
                        help="only the full redraw, before and now")
    args = parser.parse_args()
    if args.only_side_by_side:
        side_by_side(args.before)
    else:
        main(before=args.before)
