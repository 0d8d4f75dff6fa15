"""The book's figure rules (ioattn.plotting), and that every figure of the chapters follows them."""

import re
from pathlib import Path

import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from ioattn import plotting  # noqa: E402
from ioattn.plotting import (  # noqa: E402
    BOUNDS,
    FONT,
    MIN_FONT,
    MIN_SCRIPT_FONT,
    RC,
    SCRIPT,
    TITLES,
    WIDTH,
    label,
    legend_below,
    plot_sweep,
    problems,
    show,
    subplots,
)
from ioattn.sweep import powers_of_two, sweep  # noqa: E402

BOOK = Path(__file__).resolve().parent.parent / "book"
#: The book's content column at a 1280 px window, in CSS px (figures wider are scaled down).
COLUMN_PX = 672
#: A phone's content column (390 px window), in CSS px.
PHONE_PX = 342


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def test_text_is_at_least_10_px_on_a_desktop_and_7_5_px_on_a_phone():
    natural = WIDTH * 96                         # CSS px: an SVG of WIDTH inches
    assert natural <= COLUMN_PX                  # shown at its natural size, not scaled down
    px = 4 / 3                                   # CSS px per pt
    assert MIN_FONT * px >= 10 and MIN_SCRIPT_FONT * px >= 10
    sizes = [v for k, v in RC.items() if k.endswith("size") and k.split(".")[0] != "lines"
             and k != "figure.figsize"]
    assert sizes and min(sizes) == FONT >= MIN_FONT
    assert FONT * SCRIPT >= MIN_SCRIPT_FONT      # an exponent of a tick label too
    assert FONT * px * PHONE_PX / natural >= 10  # scaled to the phone's column
    assert FONT * SCRIPT * px * PHONE_PX / natural >= 7.5


def test_prose_names_not_code_names():
    assert label("flash") == "FlashAttention"
    assert label("flash", variant="fa1") == "FlashAttention (FA1 order)"
    assert label("square_tiling", schedule="outer") == "square tiling (outer schedule)"
    for name in list(TITLES.values()) + list(BOUNDS.values()):
        assert "_" not in name and not re.search(r"\w\(", name)        # no function calls
    s = sweep(256, 16, [64, 256, 1024], options={"square_tiling": {"schedule": "outer"}})
    ax = plot_sweep(s)
    (legend,) = ax.figure.legends
    names = [t.get_text() for t in legend.get_texts()]
    assert "square tiling (outer schedule)" in names and "FlashAttention" in names
    assert not any("_" in n for n in names)


def test_subplots_stacks_panels_at_the_books_width():
    fig, axes = subplots(3)
    assert fig.get_size_inches()[0] == pytest.approx(WIDTH)
    fig.draw_without_rendering()
    boxes = [ax.get_position() for ax in axes]
    assert len({round(b.x0, 6) for b in boxes}) == 1                     # one column
    assert boxes[0].y0 > boxes[1].y0 > boxes[2].y0                      # top to bottom


def test_a_book_figure_has_no_problems():
    s = sweep(4096, 64, powers_of_two(8, 32 * 64 * 64),
              options={"square_tiling": {"schedule": "outer"}})
    ax = plot_sweep(s)
    assert problems(ax.figure) == []
    fig, (top, bottom) = subplots(2)
    top.plot([1, 2], [1, 2], label="one")
    bottom.plot([1, 2], [2, 1], label="two")
    legend_below(fig, ncol=2)
    assert problems(fig) == []


def test_problems_finds_each_broken_rule():
    fig, ax = plt.subplots(figsize=(10, 4))
    ax.plot([1, 2, 3], [1, 2, 3], label="a line")
    ax.legend(fontsize=7)
    ax.set_title("x" * 400)
    found = " | ".join(problems(fig))
    assert "10 in wide" in found
    assert "7 pt" in found
    assert "legend lies over the data" in found
    assert "runs past the figure's edge" in found
    with pytest.raises(ValueError, match="not in the book's style"):
        show(fig)
    fig, ax = subplots()
    ax.set_xlabel("$10^6$ entries", fontsize=10)         # 10 pt, but its exponent is 7 pt
    ax.set_ylabel("$M$ entries", fontsize=10)            # no script: fine
    (found,) = problems(fig)
    assert "scripts of '$10^6$ entries' are 7 pt" in found


def test_legend_below_lists_each_label_once():
    fig, (a, b) = subplots(2)
    a.plot([1, 2], label="FlashAttention")
    b.plot([2, 1], label="FlashAttention")
    b.plot([1, 1], label="bound")
    leg = legend_below(fig)
    assert [t.get_text() for t in leg.get_texts()] == ["FlashAttention", "bound"]


def test_use_style_makes_the_inline_backend_emit_svg_only():
    pytest.importorskip("matplotlib_inline")
    from IPython.core.interactiveshell import InteractiveShell
    from matplotlib.figure import Figure

    shell = InteractiveShell.instance()
    backend = matplotlib.get_backend()
    try:
        from matplotlib_inline.backend_inline import set_matplotlib_formats

        matplotlib.use("module://matplotlib_inline.backend_inline")
        set_matplotlib_formats("png")
        plotting.use_style()
        printers = shell.display_formatter.formatters
        assert Figure in printers["image/svg+xml"].type_printers
        assert Figure not in printers["image/png"].type_printers
    finally:
        matplotlib.use(backend)
        InteractiveShell.clear_instance()


# ------------------------------------------------------------------ the chapters' figures
def _cells(text):
    """(metadata, source) of every code cell of a MyST chapter."""
    pattern = re.compile(r"```\{code-cell\}[^\n]*\n(?:---\n(.*?)\n---\n)?(.*?)\n```", re.S)
    return [(m.group(1) or "", m.group(2)) for m in pattern.finditer(text)]


def _figure_cells():
    out = []
    for path in sorted(BOOK.glob("*.md")):
        for meta, source in _cells(path.read_text()):
            if "figure:" in meta:
                out.append((path.name, meta, source))
    return out


def test_every_figure_cell_follows_the_rules():
    cells = _figure_cells()
    assert len(cells) >= 13
    for name, meta, source in cells:
        figure = re.search(r"name: (\S+)", meta).group(1)
        where = f"{name}: {figure}"
        alt = re.search(r"  image:\n    alt: \|\n((?:      .*\n?)+)", meta + "\n")
        assert alt and len(alt.group(1).split()) >= 8, f"{where}: no alt text"
        assert "show(" in source, f"{where}: not shown by ioattn.plotting.show"
        assert "plt.subplots(" not in source and "figsize" not in source, where
        assert "fontsize=" not in source, where
        assert ".legend(" not in source, f"{where}: legend inside the data"


def test_no_chapter_prints_a_mask_as_zeros_and_ones():
    for path in sorted(BOOK.glob("*.md")):
        for _, source in _cells(path.read_text()):
            assert not re.search(r"print\(.*astype\(int\)", source), path.name
