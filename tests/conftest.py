"""Shared helpers: the plain NumPy reference, random inputs, and one build of the book."""

import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import settings

from ioattn.algorithms import variants

from . import book_build

settings.register_profile("ioattn", deadline=None, max_examples=60, derandomize=True)
settings.load_profile("ioattn")

#: Every attention algorithm with every value of its choices: (name, options), from the registry.
VARIANTS = variants()
VARIANT_IDS = [name + "".join(f"-{v}" for v in opts.values()) for name, opts in VARIANTS]

#: Every backward pass with every value of its choices: (name, options), from the registry.
BACKWARD_VARIANTS = variants(backward=True)
BACKWARD_IDS = [name + "".join(f"-{v}" for v in opts.values())
                for name, opts in BACKWARD_VARIANTS]


def least_M(name, d, options):
    """The smallest cache size at which algorithm ``name`` runs with ``options``."""
    from ioattn.algorithms import get

    algo = get(name)
    return algo.min_M(d, **{**algo.options, **options})


def reference_softmax(Q, K, scale=None, mask=None):
    """``(P, L)``: P = softmax(scale Q K^T) with masked scores -inf and the row maximum
    subtracted, and the row log-sum-exp L, in float64 NumPy. A row with nothing to attend to
    (``mask`` all False on it) has P = 0 and L = +inf, as ioattn defines."""
    scale = 1 / np.sqrt(Q.shape[1]) if scale is None else scale
    S = scale * (Q @ K.T)
    if mask is not None:
        S = np.where(mask, S, -np.inf)
    m = S.max(axis=1, keepdims=True)
    empty = np.isneginf(m)
    m[empty] = 0.0
    P = np.exp(S - m)
    l = P.sum(axis=1, keepdims=True)
    P = np.divide(P, l, out=np.zeros_like(P), where=~empty)
    L = np.where(empty, np.inf, m + np.log(np.where(empty, 1.0, l)))[:, 0]
    return P, L


def reference_attention(Q, K, V, scale=None, mask=None):
    """softmax(scale Q K^T) V with the row maximum subtracted, in float64 NumPy; with ``mask``
    (True = attend) the masked scores are -inf and a row with nothing to attend to is 0."""
    return reference_softmax(Q, K, scale, mask)[0] @ V


def reference_backward(Q, K, V, dO, scale=None, mask=None):
    """The analytic gradients of softmax(scale Q K^T) V for the upstream dO, in float64 NumPy:
    dV = P^T dO, dP = dO V^T, D = rowsum(dO * O), dS = P * (dP - D), dQ = scale dS K,
    dK = scale dS^T Q (with ``mask``, P = 0 on masked entries and on empty rows)."""
    scale = 1 / np.sqrt(Q.shape[1]) if scale is None else scale
    P = reference_softmax(Q, K, scale, mask)[0]
    O = P @ V
    dP = dO @ V.T
    dS = P * (dP - (dO * O).sum(axis=1, keepdims=True))
    return scale * dS @ K, scale * dS.T @ Q, P.T @ dO


def relative_error(x, y):
    return float(np.abs(x - y).max() / np.abs(y).max())


def relative_or_zero(x, y):
    """relative_error, or the largest |x| when y is exactly zero (a fully masked output)."""
    top = np.abs(y).max()
    return float(np.abs(x - y).max() / top) if top > 0 else float(np.abs(x).max())


def random_qkv(N, d, seed=0, magnitude=1.0):
    rng = np.random.default_rng(seed)
    return tuple(magnitude * rng.standard_normal((N, d)) for _ in range(3))


@pytest.fixture(params=VARIANTS, ids=VARIANT_IDS)
def variant(request):
    return request.param


# ------------------------------------------------------------------------------------ the book
ROOT = Path(__file__).resolve().parents[1]


def _reads_the_book(item) -> bool:
    return "built" in getattr(item, "fixturenames", ())


def _shared_basetemp(config) -> Path:
    """The session's base temporary directory, the same for every pytest-xdist worker."""
    base = config._tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def pytest_collection_modifyitems(config, items):
    # The tests that read the built book run last (in their own order), so that the build,
    # started in the background once they are collected, overlaps every other test.
    items.sort(key=_reads_the_book)


def pytest_collection_finish(session):
    if not os.environ.get("IOATTN_BOOK_HTML") and any(map(_reads_the_book, session.items)):
        book_build.start(book_build.folder(_shared_basetemp(session.config)))


def pytest_sessionfinish(session):
    book_build.stop()


@pytest.fixture(scope="session")
def built(request) -> Path:
    """One build of the whole book, from the repository, with the Makefile's flags; the folder
    of its HTML. Started in the background when the session collects a test that needs it,
    built once for all pytest-xdist workers, and fresh each session but for the execution cache
    (``tests/book_build.py``). Shared by test_book.py, the browser tests, the PDF's and the
    notebooks'.

    ``IOATTN_BOOK_HTML=_build/html`` checks an existing build instead (say, after ``make
    book``), to iterate on the pages without building twice.
    """
    given = os.environ.get("IOATTN_BOOK_HTML")
    if given:
        html_dir = Path(given).resolve()
        assert (html_dir / "index.html").is_file(), f"IOATTN_BOOK_HTML={given}: no index.html"
        return html_dir
    place = book_build.folder(_shared_basetemp(request.config))
    book_build.start(place)               # a no-op when the collection hook started it
    return book_build.wait(place)
