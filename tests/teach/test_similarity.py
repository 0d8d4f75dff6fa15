"""Copying across a class: near-identical answers are reported, honest ones are not."""

from __future__ import annotations

import sys

import nbformat
import pytest

from ioattn.teach.similarity import Pair, answer_code, similar_pairs

# The reference solution of assignment 1 (a C tile in cache, strips of A and B streamed past it).
ADA = '''
def tiled_matmul(mem, A, B, C):
    """C = A @ B through the two-level memory."""
    from math import isqrt

    (m, k), n = A.shape, B.shape[1]
    b = isqrt(mem.M + 1) - 1
    L = (mem.M - b * b) // (2 * b)
    for i0 in range(0, m, b):
        i1 = min(i0 + b, m)
        for j0 in range(0, n, b):
            j1 = min(j0 + b, n)
            acc = mem.allocate((i1 - i0, j1 - j0))
            for l0 in range(0, k, L):
                l1 = min(l0 + L, k)
                a = mem.read(A, slice(i0, i1), slice(l0, l1))
                w = mem.read(B, slice(l0, l1), slice(j0, j1))
                acc += a @ w
                mem.free(a, w)
            mem.write(C, acc, slice(i0, i1), slice(j0, j1))
            mem.free(acc)
'''

# ADA's, every name changed, the import moved, spaces taken out, comments added.
ADA_DISGUISED = '''
from math import isqrt


def tiled_matmul(memory, X, Y, Z):
    # C tile of side t, plus one strip of A and one of B: t*t + 2*t*width <= M
    (rows, inner), cols = X.shape, Y.shape[1]
    t = isqrt(memory.M+1)-1
    width = (memory.M-t*t)//(2*t)   # the strips' width

    for r in range(0, rows, t):
        r_end = min(r+t, rows)
        for c in range(0, cols, t):
            c_end = min(c+t, cols)
            # the accumulator stays in cache for the whole sum
            total = memory.allocate((r_end-r, c_end-c))
            for s in range(0, inner, width):
                s_end = min(s+width, inner)
                left = memory.read(X, slice(r, r_end), slice(s, s_end))
                right = memory.read(Y, slice(s, s_end), slice(c, c_end))
                total += left @ right
                memory.free(left, right)
            memory.write(Z, total, slice(r, r_end), slice(c, c_end))
            memory.free(total)
'''

# Honest: the tile side found by search, the blocks listed first, one outer product per step.
GRACE = '''
def tiled_matmul(mem, A, B, C):
    m, k = A.shape
    _, n = B.shape
    side = 1
    while (side + 1) ** 2 + 2 * (side + 1) <= mem.M:
        side += 1

    def blocks(size):
        edges = list(range(0, size, side)) + [size]
        return list(zip(edges[:-1], edges[1:]))

    for top, bottom in blocks(m):
        for left, right in blocks(n):
            block = mem.allocate((bottom - top, right - left))
            for p in range(k):
                column = mem.read(A, slice(top, bottom), slice(p, p + 1))
                row = mem.read(B, slice(p, p + 1), slice(left, right))
                block += column @ row
                mem.free(column, row)
            mem.write(C, block, slice(top, bottom), slice(left, right))
            mem.free(block)
'''

# Honest: square tiles of a third of the cache each, a range generator, columns of C outermost.
ALAN = '''
import math


def _ranges(total, step):
    start = 0
    while start < total:
        yield start, min(total, start + step)
        start += step


def tiled_matmul(mem, A, B, C):
    m, k = A.shape
    n = B.shape[1]
    tile = max(1, int(math.sqrt(mem.M / 3)))
    for j0, j1 in _ranges(n, tile):
        for i0, i1 in _ranges(m, tile):
            out = mem.allocate((i1 - i0, j1 - j0))
            for p0, p1 in _ranges(k, tile):
                a_tile = mem.read(A, slice(i0, i1), slice(p0, p1))
                b_tile = mem.read(B, slice(p0, p1), slice(j0, j1))
                out += a_tile @ b_tile
                mem.free(a_tile)
                mem.free(b_tile)
            mem.write(C, out, slice(i0, i1), slice(j0, j1))
            mem.free(out)
'''

# What every student gets: the example inputs, two helpers, and the cells that try the answer.
STARTER = '''
import numpy as np

import ioattn
from ioattn import TwoLevelMemory

rng = np.random.default_rng(SEED)
A = rng.standard_normal((m, k))
B = rng.standard_normal((k, n))
print(f"m, k, n = {m}, {k}, {n};  M = {M}")


def budget(m, k, n, M):
    """The most entries a schedule may move for full marks."""
    return 1.1 * (2 * m * n * k / M**0.5 + m * n)


def run(schedule, A, B, M):
    """Run a schedule on a fresh memory; its result, its transfers and its largest error."""
    mem = TwoLevelMemory(M)
    hA, hB = mem.load("A", A), mem.load("B", B)
    hC = mem.allocate_slow("C", (A.shape[0], B.shape[1]))
    schedule(mem, hA, hB, hC)
    result = mem.fetch(hC)
    return result, mem.io, np.abs(result - A @ B).max()


result, io, error = run(tiled_matmul, A, B, M)
print(io)
print("largest error:", error)
print("budget:", budget(m, k, n, M), "moved:", io.reads + io.writes)
for size in (40, 100, 400):
    print(size, run(tiled_matmul, A, B, size)[1])
'''

# Two honest answers to a small question: the tile side and the strip width for a cache of M.
SIZES_SEARCH = '''
def tile_sizes(M):
    """The largest b with b * b + 2 * b <= M, and the strip width that fills the rest."""
    b = 1
    while (b + 1) ** 2 + 2 * (b + 1) <= M:
        b += 1
    return b, (M - b * b) // (2 * b)
'''

SIZES_FORMULA = '''
from math import isqrt


def tile_sizes(M):
    side = isqrt(M + 1) - 1          # (side + 1)^2 <= M + 1
    width = max(1, (M - side ** 2) // (2 * side))
    return side, width
'''

HONEST = {"ada": ADA, "alan": ALAN, "grace": GRACE}


def ids(pairs):
    return [(p.first, p.second) for p in pairs]


def test_a_disguised_copy_is_reported():
    pairs = similar_pairs({**HONEST, "edsger": ADA_DISGUISED})
    assert ids(pairs) == [("ada", "edsger")]
    assert 0.8 <= pairs[0].similarity <= 1
    assert "mem.read(" in pairs[0].shared or "isqrt" in pairs[0].shared
    assert pairs[0].text() == f"ada and edsger: {pairs[0].similarity:.0%} similar"


def test_an_exact_copy_is_100_percent_similar():
    pairs = similar_pairs({"ada": ADA, "bob": "# mine\n" + ADA, "grace": GRACE}, threshold=1.0)
    assert ids(pairs) == [("ada", "bob")]
    assert pairs[0].similarity == pytest.approx(1.0)


def test_honest_solutions_of_the_same_task_are_not_reported():
    assert similar_pairs(HONEST) == []
    assert similar_pairs({"one": SIZES_SEARCH, "two": SIZES_FORMULA}) == []
    # They do share the API's idioms (mem.read(X, slice(...), slice(...))), but well below copies.
    pairs = similar_pairs(HONEST, threshold=0.01)
    assert len(pairs) == 3 and all(p.similarity < 0.6 for p in pairs)


def test_the_starter_code_does_not_count_as_shared():
    codes = {"one": STARTER + SIZES_SEARCH, "two": SIZES_FORMULA + STARTER}
    # Without being told, the starter makes them look alike: the test below could fail.
    assert ids(similar_pairs(codes)) == [("one", "two")]
    assert similar_pairs(codes, starter=STARTER) == []
    # A copy is still a copy with the starter around it.
    copied = {"one": STARTER + ADA, "two": ADA_DISGUISED + STARTER, "three": STARTER + GRACE}
    assert ids(similar_pairs(copied, starter=STARTER)) == [("one", "two")]


def test_students_with_too_little_code_of_their_own_are_skipped():
    assert similar_pairs({"ada": "", "alan": "", "grace": GRACE}) == []
    assert similar_pairs({"ada": "\n\n# TODO\n", "alan": "  # nothing yet\n"}) == []
    assert similar_pairs({"ada": "return A @ B", "alan": "return A @ B"}) == []
    # Two lines alike are a coincidence, not a copy (copydetect alone would call them 100%).
    stub = "acc = mem.allocate((2, 2))\nmem.write(C, acc, slice(0, 2), slice(0, 2))\n"
    assert similar_pairs({"ada": stub, "alan": stub}) == []
    assert similar_pairs({"ada": STARTER + stub, "alan": stub + STARTER}, starter=STARTER) == []
    untouched = {"ada": STARTER, "alan": STARTER, "grace": STARTER + GRACE}
    assert similar_pairs(untouched, starter=STARTER) == []
    # ... and only those: enough code of one's own is compared, however short.
    assert ids(similar_pairs({"one": SIZES_SEARCH, "two": SIZES_SEARCH})) == [("one", "two")]


def test_pairs_are_symmetric():
    forward = similar_pairs({"ada": ADA, "bob": ADA_DISGUISED}, threshold=0.5)
    backward = similar_pairs({"bob": ADA, "ada": ADA_DISGUISED}, threshold=0.5)
    assert len(forward) == len(backward) == 1
    assert forward[0].similarity == pytest.approx(backward[0].similarity)
    assert (forward[0].first, forward[0].second) == (backward[0].first, backward[0].second)


def test_similarity_is_the_larger_containment():
    # All of ada's answer is in bob's, padded with as much code again: still a copy, reported
    # at the larger share (all of ada's code is in bob's), with both directions in the text.
    padded = ADA + STARTER
    (pair,) = similar_pairs({"ada": ADA, "bob": padded})
    assert pair.similarity == pair.first_in_second == pytest.approx(1.0)
    assert 0.35 < pair.second_in_first < 0.6
    assert "100% of ada's code is in bob's" in pair.text()


def test_pairs_are_sorted_most_similar_first_and_unordered():
    codes = {"zoe": ADA, "bob": ADA_DISGUISED, "ann": "# mine\n" + ADA, **HONEST}
    pairs = similar_pairs(codes, threshold=0.01)
    assert len(pairs) == len(codes) * (len(codes) - 1) // 2
    keys = [(-p.similarity, p.first, p.second) for p in pairs]
    assert keys == sorted(keys)
    assert all(p.first < p.second for p in pairs)
    assert ids(pairs[:3]) == [("ada", "ann"), ("ada", "zoe"), ("ann", "zoe")]
    assert all(p.similarity == pytest.approx(1.0) for p in pairs[:3])
    assert all(0 <= p.similarity <= 1 for p in pairs)


def test_pair_text():
    assert Pair("ada", "alan", 0.968, "").text() == "ada and alan: 97% similar"


@pytest.mark.parametrize("codes, kind, message", [
    ([("ada", ADA)], TypeError, "codes must be a dict"),
    ({1: ADA}, TypeError, "keys must be student ids"),
    ({"ada": None}, TypeError, "codes['ada'] must be the answer code"),
    ({"ada": ADA.encode()}, TypeError, "codes['ada'] must be the answer code"),
])
def test_bad_codes_raise(codes, kind, message):
    with pytest.raises(kind, match=message.replace("[", r"\[").replace("]", r"\]")):
        similar_pairs(codes)


@pytest.mark.parametrize("threshold, kind", [
    (0, ValueError), (-0.5, ValueError), (1.01, ValueError), (80, ValueError),
    (float("nan"), ValueError), ("0.8", TypeError), (None, TypeError), (True, TypeError),
])
def test_bad_thresholds_raise(threshold, kind):
    with pytest.raises(kind, match=r"threshold must be .*\(0, 1\]"):
        similar_pairs(HONEST, threshold=threshold)


def test_a_bad_starter_raises():
    with pytest.raises(TypeError, match="starter must be the starter code as a str"):
        similar_pairs(HONEST, starter=None)


def test_a_missing_library_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "copydetect", None)     # import copydetect fails
    with pytest.raises(RuntimeError, match=r"needs copydetect: pip install 'ioattn\[teach\]'"):
        similar_pairs(HONEST)


def notebook(path, *cells):
    """Write a notebook of markdown (str starting with '#'), code, and ('variant', code) cells."""
    nb = nbformat.v4.new_notebook()
    for cell in cells:
        if isinstance(cell, tuple):
            nb.cells.append(nbformat.v4.new_code_cell(cell[1], metadata={"tags": ["variant"]}))
        elif cell.startswith("#"):
            nb.cells.append(nbformat.v4.new_markdown_cell(cell))
        else:
            nb.cells.append(nbformat.v4.new_code_cell(cell))
    nbformat.write(nb, path)
    return path


SKELETON = 'def tiled_matmul(mem, A, B, C):\n    """C = A @ B through the two-level memory."""\n'


def test_answer_code_keeps_the_students_own_code(tmp_path):
    path = notebook(tmp_path / "ada.ipynb", "# Assignment 1", "import numpy as np",
                    ("variant", 'STUDENT = "ada"\nm, k, n, M = 30, 20, 10, 64'), ADA)
    code = answer_code(path)
    assert "import numpy as np" in code and "mem.read(A" in code
    assert "STUDENT" not in code and "Assignment" not in code
    assert answer_code(str(path)) == code


def test_answer_code_leaves_out_the_starters_lines(tmp_path):
    starter = notebook(tmp_path / "matmul.ipynb", "# Assignment 1", STARTER.split("\n\n\n")[0],
                       ("variant", 'STUDENT = "example"'), SKELETON + "    ...\n",
                       STARTER.split("\n\n\n", 1)[1])
    submission = notebook(tmp_path / "ada.ipynb", "# Assignment 1", STARTER.split("\n\n\n")[0],
                          ("variant", 'STUDENT = "ada"'), SKELETON + ADA.split('"""\n', 1)[1],
                          STARTER.split("\n\n\n", 1)[1])
    code = answer_code(submission, starter=starter)
    assert answer_code(submission, starter=answer_code(starter)) == code
    assert "mem.read(A" in code
    assert "TwoLevelMemory" not in code and "def budget" not in code and "def tiled_m" not in code
    # The whole pipeline: students who share only the starter are not reported, copies are.
    other = notebook(tmp_path / "alan.ipynb", STARTER.split("\n\n\n")[0],
                     ("variant", 'STUDENT = "alan"'), SKELETON + ADA_DISGUISED.split("):\n", 1)[1],
                     STARTER.split("\n\n\n", 1)[1])
    honest = notebook(tmp_path / "grace.ipynb", STARTER, ("variant", 'STUDENT = "grace"'), GRACE)
    codes = {s: answer_code(p, starter=starter) for s, p in
             [("ada", submission), ("alan", other), ("grace", honest)]}
    pairs = similar_pairs(codes, starter=answer_code(starter))
    assert ids(pairs) == [("ada", "alan")]


def test_answer_code_rejects_what_is_not_a_notebook(tmp_path):
    with pytest.raises(FileNotFoundError, match="no notebook at"):
        answer_code(tmp_path / "missing.ipynb")
    with pytest.raises(TypeError, match="notebook_path must be a path"):
        answer_code(42)
    path = notebook(tmp_path / "ada.ipynb", ADA)
    with pytest.raises(TypeError, match="starter must be a notebook path or its code"):
        answer_code(path, starter=b"import numpy")


def test_code_taken_from_the_graders_answers_is_reported():
    """A student who pastes part of the grader's heuristic (renamed) is paired with the key;
    honest students are not, and the key is never paired with itself."""
    import inspect
    import re

    from ioattn.teach.keys import pebbling as key

    source = inspect.getsource(key)
    play = inspect.getsource(key._play)                   # one function of a longer module
    pasted = re.sub(r"\bmoves\b", "steps", play).replace("victim", "out")
    codes = {"ada": pasted, "alan": HONEST["alan"], "grace": HONEST["grace"]}
    pairs = similar_pairs(codes, known={"ioattn.teach.keys.pebbling": source})
    assert [(p.first, p.second) for p in pairs] == [("ada", "ioattn.teach.keys.pebbling")]
    assert pairs[0].similarity >= 0.9
