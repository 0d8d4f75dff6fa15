"""The live explorer's layout: laid out once by matplotlib's constrained layout engine, then
reused; the axes where a new layout would put them after every change."""

import itertools
import math

import pytest

pytest.importorskip("ipywidgets")

from matplotlib.layout_engine import ConstrainedLayoutEngine  # noqa: E402

from ioattn.widgets import decoding_explorer, explorer, parallel_explorer  # noqa: E402

#: How far (pixels) the axes may be from where a new layout puts them.
TOL = 0.5


def _pixels(fig, bbox):
    return [v * s for v, s in zip(bbox.extents, (fig.bbox.width, fig.bbox.height) * 2)]


def fresh_layout(w):
    """Where the constrained layout engine puts the explorer's axes in a new figure in the
    widget's current state (from the axes' first position); the widget is left as it was."""
    fig = w.figure
    ax = fig.axes[0]
    here = ax.get_position().frozen()
    ax.set_position(ax.get_subplotspec().get_position(fig))
    ax.set_in_layout(True)
    ConstrainedLayoutEngine().execute(fig)
    there = ax.get_position().frozen()
    ax.set_position(here)
    ax.set_in_layout(True)
    return _pixels(fig, there)


def here(w):
    return _pixels(w.figure, w.figure.axes[0].get_position())


@pytest.fixture
def layouts(monkeypatch):
    """Counts the constrained layouts run."""
    runs = []
    run = ConstrainedLayoutEngine.execute

    def counted(self, fig):
        runs.append(fig)
        return run(self, fig)

    monkeypatch.setattr(ConstrainedLayoutEngine, "execute", counted)
    return runs


def test_full_redraw_does_not_lay_out_again(layouts):
    w = explorer(N=4096, d=64, log2_M=12)
    assert len(layouts) == 1                                   # the first layout
    first = here(w)
    changes = [dict(d=128), dict(N=1024), dict(backward=True), dict(causal=True),
               dict(names=["flash", "standard"]), dict(d=32, N=256), dict(d=256, log2_M=22),
               dict(backward=False, causal=False, names=None), dict(N=4096, d=64, log2_M=12)]
    for change in changes:
        before = w.image.value
        w.update(**change)
        assert w.image.value != before                         # each is a full redraw
    assert len(layouts) == 1
    w.update(names=["flash", "square_tiling", "standard"])
    assert here(w) == pytest.approx(first, abs=0.01)           # back where it started


def test_axes_where_a_new_layout_puts_them():
    """Every d (and so every range of M and of the GPU marks), both passes, both masks, M at
    the low end, at d^2 and at the top (where its label needs room to the right), reached one
    after another in one widget: the axes within TOL pixels of where the constrained layout
    engine puts them in a new figure, and of a new widget's."""
    w = explorer(N=1024, d=64)
    ds = [16, 32, 64, 128, 256]
    for k, (d, backward, causal) in enumerate(itertools.product(ds, [False, True],
                                                                [False, True])):
        log2_M = [math.log2(d * d) - 4, math.log2(d * d), math.log2(64 * d * d)][k % 3]
        w.update(N=[256, 1024][k % 2], d=d, backward=backward, causal=causal,
                 log2_M=log2_M)
        assert here(w) == pytest.approx(fresh_layout(w), abs=TOL), (d, backward, causal, k)
        if k in (5, 18):
            new = explorer(N=[256, 1024][k % 2], d=d, backward=backward, causal=causal,
                           log2_M=log2_M)
            assert here(w) == pytest.approx(here(new), abs=TOL)


def test_layout_follows_the_tick_labels():
    """Wider tick labels (10^10 against 10^9) move the axes right; back, they return."""
    w = explorer(N=256, d=16)
    first = here(w)
    w.update(N=65536, d=256)                       # I/O up to 10^11
    moved = here(w)
    assert moved[0] > first[0] + 1
    assert moved == pytest.approx(fresh_layout(w), abs=TOL)
    w.update(N=256, d=16)
    assert here(w) == pytest.approx(first, abs=TOL)


def test_M_far_below_d2_leaves_the_axes_alone():
    """With M far left of d^2 (its label at the axes' left end), the axes are where they are
    at M = d^2."""
    w = explorer(N=4096, d=256)
    at_d2 = here(w)
    w.update(log2_M=5)
    assert w.state["M"] == 32
    w.update(backward=True)                        # a full redraw at that M
    assert here(w) == pytest.approx(at_d2, abs=TOL)
    assert here(w) == pytest.approx(fresh_layout(w), abs=TOL)


@pytest.mark.parametrize("kwargs, error, match", [
    ({"N": "4096"}, TypeError, "N must be an integer, got '4096'"),
    ({"N": 4096.7}, TypeError, "N must be an integer, got 4096.7"),
    ({"N": True}, TypeError, "N must be an integer"),
    ({"N": 0}, ValueError, "N must be at least 1, got 0"),
    ({"N": 10**9}, ValueError, "N = 1,000,000,000 is more than the explorer draws "
                               "\\(N <= 65,536\\)"),
    ({"d": 512}, ValueError, "d = 512 is more than the explorer draws \\(d <= 256\\)"),
    ({"d": 64.0}, TypeError, "d must be an integer"),
    ({"names": ["flsh"]}, ValueError, "unknown algorithm 'flsh' \\(did you mean 'flash'\\?\\)"),
    ({"names": "flash"}, TypeError, "names must be a list of algorithm names"),
    ({"log2_M": 100}, ValueError, "log2_M = 100 is outside the slider's range at d = 64: "
                                  "from 4 to 18"),
    ({"log2_M": 3}, ValueError, "log2_M = 3 is outside the slider's range"),
    ({"log2_M": math.nan}, ValueError, "log2_M must be a finite number, got nan"),
    ({"log2_M": "12"}, TypeError, "log2_M must be a number, got '12'"),
    ({"backward": "yes"}, TypeError, "backward must be True or False, got 'yes'"),
    ({"causal": 1}, TypeError, "causal must be True or False, got 1"),
    ({"options": {"flsh": {}}}, ValueError, "unknown algorithm 'flsh'"),
    ({"options": {"flash": {"colour": 1}}}, TypeError, "unknown option\\(s\\) colour"),
    ({"N_sim_max": 0}, ValueError, "N_sim_max must be at least 1"),
    ({"dpi": 10**5}, ValueError, "dpi must be at most 600"),
])
def test_explorer_refuses_bad_input_up_front(kwargs, error, match, monkeypatch):
    import ioattn.widgets

    def computed(*args, **kw):
        raise AssertionError("computed before the arguments were checked")

    monkeypatch.setattr(ioattn.widgets, "curves", computed)
    with pytest.raises(error, match=match):
        explorer(**kwargs)


def test_explorer_update_refuses_bad_input_and_changes_nothing():
    w = explorer(N=1024, d=32, log2_M=10)
    before = dict(w.state), w.readout.value, {k: c.value for k, c in w.controls.items()
                                              if k != "simulate"}
    for kwargs, error, match in [
        ({"N": "4096"}, TypeError, "N must be an integer"),
        ({"N": 1000}, ValueError, "N = 1000 is not one of the explorer's N"),
        ({"d": 32, "log2_M": 17}, ValueError, "outside the slider's range at d = 32: from 4 to 16"),
        ({"log2_M": 4, "names": ["flsh"]}, ValueError, "did you mean 'flash'"),
        ({"log2_M": 12, "backward": "no"}, TypeError, "backward must be True or False"),
    ]:
        with pytest.raises(error, match=match):
            w.update(**kwargs)
        after = dict(w.state), w.readout.value, {k: c.value for k, c in w.controls.items()
                                                 if k != "simulate"}
        assert after == before                         # no control moved
    w.update(d=128, log2_M=20)                         # 20 = log2(64 * 128^2): the end
    assert w.state["M"] == 1 << 20


@pytest.mark.parametrize("kwargs, error, match", [
    ({"P": 3}, ValueError, "P = 3 is not one of \\[1, 2, 4"),
    ({"P": 16.0}, TypeError, "P must be an integer, got 16.0"),
    ({"heads": "16"}, TypeError, "heads must be an integer"),
    ({"N": 10**9}, ValueError, "N = 1,000,000,000 is more than the explorer draws"),
    ({"d": 512}, ValueError, "d = 512 is more than the explorer draws"),
    ({"causal": 1}, TypeError, "causal must be True or False, got 1"),
])
def test_parallel_explorer_refuses_bad_input_up_front(kwargs, error, match, monkeypatch):
    import ioattn.widgets

    def computed(*args, **kw):
        raise AssertionError("computed before the arguments were checked")

    monkeypatch.setattr(ioattn.widgets, "across", computed)
    with pytest.raises(error, match=match):
        parallel_explorer(**kwargs)


def test_parallel_explorer_of_a_few_rows_offers_the_processors_it_can_share():
    w = parallel_explorer(N=3, d=4)
    assert list(w.controls["P"].options) == [1, 2] and w.state["P"] == 2
    assert w.state["N"] == 3
    assert parallel_explorer(N=1, d=4).state["P"] == 1             # nothing to share: P = 1


def test_explorer_with_none_checked():
    assert explorer(N=4096, d=64, names=[]).state["shown"] == []    # none checked, as asked


def test_explorer_axis_is_the_same_for_every_d():
    """The live explorer's M axis does not change with d, so M = d^2 and the line where
    FlashAttention takes over move on the screen: M = d^2 by 6 octaves (a factor 64 in M) from
    d = 32 to d = 256, in the figure's pixels; the picture comes first, the M slider directly
    under it, the legend folded last."""
    w = explorer(N=4096, d=32, log2_M=10)
    ax = w.figure.axes[0]
    lim = ax.get_xlim()
    assert lim == pytest.approx(w.xlim)
    x = {}
    for d in (32, 64, 128, 256):
        w.update(d=d)
        assert ax.get_xlim() == pytest.approx(lim)
        # where M = d^2 is along the axes (a fraction of their width: the axes themselves may
        # move a little when the width of the I/O tick labels changes)
        x[d] = (ax.transScale + ax.transLimits).transform((d * d, 1))[0]
        assert w.state["M"] == 1024                       # M stays the same number of entries
    octave = 1 / math.log2(lim[1] / lim[0])
    for a, b in ((32, 64), (64, 128), (128, 256)):
        assert x[b] - x[a] == pytest.approx(2 * octave, abs=1e-6)
    assert x[256] - x[32] == pytest.approx(6 * octave, abs=1e-6)       # log2(64) octaves
    assert w.children[0] is w.image and w.children[1] is w.controls["log2_M"]
    assert w.children[-1] is w.legend and "<summary" in w.legend.value
    assert "FlashAttention" in w.legend.value and not w.figure.legends


def test_decoding_explorer_says_what_the_static_one_says():
    """The live decoding explorer draws the static one's picture at each slider position and
    writes its sentence; M, N_q and g come directly under the picture."""
    import html

    from ioattn.decode_explorer import (
        _svg,
        decoding_curves,
        decoding_grid,
        decoding_readout,
        decoding_words,
    )

    w = decoding_explorer()
    grid = decoding_grid()
    Ms = grid["Ms"]
    assert w.children[0] is w.picture and w.children[1:4] == (w.controls["M"],
                                                              w.controls["N_q"],
                                                              w.controls["g"])
    assert (w.state["N_q"], w.state["g"], w.state["M"]) == (1, 8, 1 << 16)
    for N_q, g, M in ((1, 8, 1 << 16), (7, 4, Ms[0]), (64, 32, Ms[-1]), (2, 1, Ms[10])):
        w.update(N_q=N_q, g=g, M=M)
        c = decoding_curves(N_q, g, Ms=Ms)
        assert w.state["curves"] == c and w.state["M"] == M
        k = Ms.index(M)
        assert html.escape(decoding_words(c, k), quote=False) in w.panel.value
        assert html.escape(decoding_readout(c, k), quote=False) in w.panel.value
        assert _svg(c, k, grid["dom"]) in w.picture.value
    w.controls["g"].value = 2                       # a slider itself redraws
    assert w.state["g"] == 2 and w.state["curves"] == decoding_curves(2, 2, Ms=Ms)
    before = dict(w.state)
    for kwargs, error, match in (({"g": 3}, ValueError, "g = 3 is not one of"),
                                 ({"N_q": 1.0}, TypeError, "N_q must be an integer"),
                                 ({"M": 4097, "g": 8}, ValueError, "M = 4097 is not one of")):
        with pytest.raises(error, match=match):
            w.update(**kwargs)
        assert w.state == before                    # no control moved
    with pytest.raises(ValueError, match="g = 3 does not divide H_q = 32"):
        decoding_explorer(gs=(1, 3))
