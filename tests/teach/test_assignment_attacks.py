"""The assignments against notebooks that game them, and honest ones that are merely unusual.

FlashAttention-1's loop order (a correct program the budget does not admit, and a message that
says why), bounded partition and game checks, pebbling scored against a reference an
independent heuristic reaches, crossover instances no table carries, and messages that say
what to fix.
"""

from __future__ import annotations

import base64
import re
import zlib
from pathlib import Path

import jupytext
import numpy as np
import pytest

import ioattn
import ioattn.teach as teach
import ioattn.teach.similarity as similarity
from ioattn.pebble import Graph, PebbleGame
from ioattn.teach.answers import LocalAnswers
from ioattn.teach.assignments import crossover as cx
from ioattn.teach.assignments import matmul as mm
from ioattn.teach.assignments import pebbling as pb
from ioattn.teach.assignments.base import Context, get
from ioattn.teach.assignments.flash import mask_of
from ioattn.teach.build import notebook_source
from ioattn.teach.flags import flags, notebook_flags
from ioattn.teach.judge import KINDS, GradingFailure
from ioattn.teach.keys import crossover as ckey
from ioattn.teach.keys import pebbling as kp
from ioattn.teach.similarity import handout_code, public_sources, similar_in_class, similar_pairs
from ioattn.tiles import Memory

from .helpers import CHEATS, SOLUTIONS, notebook, solution


def graded(assignment, question, student, names, seed=0, public=False):
    """``(score fraction, message, kinds)`` of one check, as the grader runs it (hidden mode
    unless ``public``)."""
    spec = get(assignment)
    ctx = Context(spec.variant(student), public, np.random.default_rng(seed))
    try:
        return 1.0, spec.check(question, LocalAnswers(names), ctx), []
    except GradingFailure as f:
        assert all(kind in KINDS for kind, _ in f.reasons)
        return f.score, str(f), [kind for kind, _ in f.reasons]


def defined(code: str, params: dict, name: str):
    """The function ``name`` of a solution file, run with the variant's parameters as globals."""
    namespace = dict(params)
    exec(compile(code, "<solution>", "exec"), namespace)
    return namespace[name]


# ====================================================================== flash: the loop order
def fa1_order(student: str):
    return defined((SOLUTIONS / "flash_fa1.py").read_text(), get("flash").variant(student).params,
                   "flash_attention")


def test_flashattention_1s_order_is_right_and_earns_question_1():
    for student, seed in (("dee", 1), ("ada", 2)):
        score, msg, _ = graded("flash", "q1", student, {"flash_attention": fa1_order(student)},
                               seed=seed)
        assert score == 1.0 and "right on hidden sizes" in msg, msg


def test_flashattention_1s_order_is_over_the_budget_and_the_message_names_the_order():
    student = "dee"                                  # a causal mask
    assert get("flash").variant(student).params["MASK"] == "causal"
    score, msg, kinds = graded("flash", "q2", student, {"flash_attention": fa1_order(student)},
                               seed=1)
    assert score == 0 and kinds == ["budget"]
    assert "FlashAttention-2's loop order" in msg and "K/V blocks outside" in msg


def statement(name: str) -> str:
    """The student notebook's text of assignment ``name``."""
    return (Path(teach.__file__).parent / "notebooks" / f"{name}.md").read_text()


def test_the_notebook_states_the_loop_order_question_2_asks_for():
    text = statement("flash")
    assert "**The loop order is part of this question**" in text
    assert "FlashAttention-1's order" in text and "1.2 to 1.6 times" in text


def test_flashattention_1s_order_costs_what_the_notebook_says():
    """At its best blocks, 1.2 to 1.6 times the reference (the notebook's figure), on the
    variants of many ids; the honest FlashAttention-2 solution is within the budget."""
    spec = get("flash")
    ratios = []
    for k in range(12):
        p = spec.variant(f"student{k:03d}").params
        rng = np.random.default_rng(k)
        Q, K, V = (rng.standard_normal((p["N"], p["d"])) for _ in range(3))
        mask = mask_of(p)
        counts = []
        for code in ((SOLUTIONS / "flash_fa1.py").read_text(), solution("flash")):
            mem = Memory(p["M"], inspect=True)
            hQ, hK, hV = mem.load("Q", Q), mem.load("K", K), mem.load("V", V)
            hO = mem.output("O", (p["N"], p["d"]))
            defined(code, p, "flash_attention")(mem, hQ, hK, hV, hO)
            want = ioattn.run("flash", Q, K, V, p["M"], mask=mask).output
            assert np.abs(mem.fetch(hO) - want).max() < 1e-9
            counts.append(mem.io.total)
        reference = ioattn.io_cost("flash", p["N"], p["d"], p["M"], mask=mask).total
        assert counts[1] <= spec.budget(p)
        ratios.append(counts[0] / reference)
    assert 1.15 < min(ratios) and max(ratios) < 1.6


# ====================================================================== pebbling

STUDENTS = [f"student{i:03d}" for i in range(8)]


def independent_pebble():
    """A schedule of its own (random depth-first orders, Belady's eviction, neighbour swaps):
    no code of the grader's key."""
    return defined(solution("pebbling"), {}, "pebble")


def key_game(edges, M):
    return [list(m) for m in kp.best_game(edges, M)]


def test_an_independent_good_heuristic_gets_full_marks():
    pebble = independent_pebble()
    differs = 0
    for k, student in enumerate(STUDENTS[:4]):
        score, msg, _ = graded("pebbling", "q1", student, {"pebble": pebble}, seed=k)
        assert score == 1.0, msg
        p = get("pebbling").variant(student).params
        own = PebbleGame.replay(Graph(p["EDGES"]), p["M"], pebble(p["EDGES"], p["M"])).io
        differs += own != kp.best_known(p["EDGES"], p["M"])
        assert "full marks up to" in msg
    assert differs                                   # it does not merely reproduce the key


def test_the_key_and_an_independent_schedule_earn_the_same():
    student = STUDENTS[5]
    mine = graded("pebbling", "q1", student, {"pebble": independent_pebble()}, seed=9)[0]
    pasted = graded("pebbling", "q1", student, {"pebble": key_game}, seed=9)[0]
    assert mine == pasted == 1.0


def _no_check(*args, **kwargs):
    raise AssertionError("check_partition ran on an answer that should have been refused")


def _plain_parts(student):
    p = get("pebbling").variant(student).params
    moves = kp.plain_game(p["EDGES"], p["M"])
    return p, [sorted(s) for s in kp.segment_parts(moves, p["T"])]


def test_a_partition_larger_than_the_graph_is_refused_before_it_is_built(monkeypatch):
    """Every vertex its own part, 250 times over: refused by its size, with no flow network
    built (the check that builds them is not even called)."""
    student = STUDENTS[2]
    p, parts = _plain_parts(student)
    g = Graph(p["EDGES"])
    ops = [v for v in g.order if not g.is_input(v)]
    monkeypatch.setattr(pb, "check_partition", _no_check)
    answers = {
        "parts": [[v] for v in ops] * 250,
        "vertices": [ops * 250],
        "a huge part": [list(ops) + ["x"] * 10 ** 5],
    }
    for label, answer in answers.items():
        score, msg, kinds = graded("pebbling", "q2", student,
                                   {"partition": lambda m, M, T, a=answer: a}, public=True)
        assert score == 0 and kinds == ["wrong"] and "refused unchecked" in msg, (label, msg)
        assert f"{len(ops)} operations" in msg


@pytest.mark.parametrize("change,says", [
    (lambda parts, g: parts + [[g.inputs[0]]], "an input"),
    (lambda parts, g: parts + [["zz"]], "not a vertex of the graph"),
    (lambda parts, g: parts[1:], "no part for"),
    (lambda parts, g: [parts[0] + parts[1][:1]] + parts[1:], "in two parts"),
    (lambda parts, g: [[]] + parts[:-1], "an empty part"),
])
def test_a_partition_that_is_not_one_of_the_operations_says_why(monkeypatch, change, says):
    student = STUDENTS[2]
    p, parts = _plain_parts(student)
    monkeypatch.setattr(pb, "check_partition", _no_check)
    answer = change(parts, Graph(p["EDGES"]))
    score, msg, kinds = graded("pebbling", "q2", student,
                               {"partition": lambda m, M, T: answer}, public=True)
    assert score == 0 and kinds == ["wrong"] and says in msg, msg


def test_a_partition_of_the_right_size_is_still_checked_in_full(monkeypatch):
    student = STUDENTS[2]
    p, parts = _plain_parts(student)
    calls = []
    real = pb.check_partition
    monkeypatch.setattr(pb, "check_partition", lambda *a: calls.append(1) or real(*a))
    assert graded("pebbling", "q2", student, {"partition": lambda m, M, T: parts},
                  public=True)[0] == 1.0
    assert calls


def test_a_game_far_too_long_is_refused_unplayed(monkeypatch):
    student = STUDENTS[3]
    p = get("pebbling").variant(student).params
    a = Graph(p["EDGES"]).inputs[0]
    padded = key_game(p["EDGES"], p["M"]) + [["read", a], ["delete", a]] * 5_000

    class Unplayable:
        def __init__(self, *args):
            raise AssertionError("a game that should have been refused was played")

    monkeypatch.setattr(pb, "PebbleGame", Unplayable)
    score, msg, kinds = graded("pebbling", "q1", student, {"pebble": lambda e, M: padded},
                               public=True)
    assert score == 0 and "refused unplayed" in msg and "10,0" in msg, msg
    assert pb.max_moves(Graph(p["EDGES"])) == pb.MOVES_PER_VERTEX * len(Graph(p["EDGES"]))


# ====================================================================== crossover: no table


def honest_totals(N, d, W):
    """An honest scan: totals over the range plus W - 1 times the writes (which do not depend
    on M for these two schedules)."""
    Ms = np.arange(4 * d + 4, 4 * d * d + 1, dtype=np.int64)
    costs = []
    for name, opts in (("flash", {}), ("square_tiling", {"schedule": "outer"})):
        writes = ioattn.io_cost(name, N, d, int(Ms[-1]), **opts).writes
        costs.append(ioattn.totals(name, N, d, Ms, **opts) + (W - 1) * writes)
    dearer = np.flatnonzero(costs[0] >= costs[1])
    return int(Ms[0]) if dearer.size == 0 else int(Ms[dearer[-1]]) + 1


def public_table():
    """What a notebook can carry, tabulated at home with the shipped key: every variant's
    answer, and every d of the variants' range at a long sequence, for each variant weight."""
    exact = {(N, d, W): ckey.exact_crossover(N, d, W)
             for N in cx.NS for d in cx.DS for W in cx.WEIGHTS}
    by_d = {(d, W): ckey.exact_crossover(4096, d, W)
            for d in range(min(cx.DS), max(cx.DS) + 1) for W in cx.WEIGHTS}
    return exact, by_d


def table_answer(exact, by_d):
    def crossover(N, d, W):
        if (N, d, W) in exact:
            return exact[N, d, W]
        near = min(by_d, key=lambda k: (abs(k[0] - d), abs(k[1] - W)))
        return by_d[near]
    return crossover


def test_a_table_of_the_public_range_fails_the_hidden_instances_and_a_scan_passes():
    exact, by_d = public_table()
    lookup = table_answer(exact, by_d)
    # the weakness: the crossover hardly depends on N, so the table answers other long
    # sequences of the variants' d and W exactly
    assert all(lookup(N, d, W) == ckey.exact_crossover(N, d, W)
               for N, d, W in [(1000, 20, 3), (3000, 37, 2), (700, 44, 4)])
    for k in range(8):
        student = f"student{k:03d}"
        score, msg, kinds = graded("crossover", "q1", student, {"crossover": lookup}, seed=k)
        assert score == 0.0 and kinds == ["wrong"], msg
        assert graded("crossover", "q1", student, {"crossover": lookup}, public=True)[0] == 1
        score, msg, _ = graded("crossover", "q1", student, {"crossover": honest_totals}, seed=k)
        assert score == 1.0 and "hidden sizes and weights" in msg, msg


def test_hidden_instances_vary_d_w_and_short_sequences():
    spec = get("crossover")
    drawn = [x for k in range(30)
             for x in spec.hidden(spec.variant(f"student{k:03d}").params,
                                  np.random.default_rng(k))]
    Ws, ds, Ns = ({x[i] for x in drawn} for i in (2, 1, 0))
    assert Ws - set(cx.WEIGHTS) and ds - set(range(min(cx.DS), max(cx.DS) + 1))
    assert min(Ns) < min(cx.NS)
    # where a whole sequence fits in a query block, the crossover moves with N
    assert len({ckey.exact_crossover(N, 64, 1) for N in (16, 32, 128, 4096)}) >= 3


# ================================================================= messages that say what to fix


def form_ignored(params):
    """A matmul program written for A @ B whatever the FORM: a buggy notebook."""
    code = solution("matmul").replace('FORM == "A.T @ B"', "False") \
        .replace('FORM == "A @ B.T"', "False")
    return defined(code, params, "tiled_matmul")


@pytest.mark.parametrize("student,form", [("student006", "A @ B.T"), ("student001", "A @ B.T"),
                                          ("student002", "A.T @ B"), ("student004", "A @ B.T")])
def test_a_program_that_ignores_the_form_is_told_how_a_and_b_are_stored(student, form):
    p = get("matmul").variant(student).params
    assert p["FORM"] == form
    score, msg, kinds = graded("matmul", "q1", student, {"tiled_matmul": form_ignored(p)},
                               public=True)
    assert score == 0 and kinds in (["error"], ["wrong"]), msg
    which = "B" if form == "A @ B.T" else "A"
    stored = "n x k" if form == "A @ B.T" else "k x m"
    assert f"for FORM = {form!r}" in msg and f"is stored {stored}" in msg, msg
    assert f"a tile of {which} is used transposed" in msg, msg


def test_the_storage_of_every_form_in_words():
    p = {"m": 40, "k": 50, "n": 30}
    assert mm.storage({**p, "FORM": "A @ B"}) == \
        "for FORM = 'A @ B', A is stored m x k = 40 x 50 and B is stored k x n = 50 x 30"
    assert mm.storage({**p, "FORM": "A @ B.T"}).startswith(
        "for FORM = 'A @ B.T', A is stored m x k = 40 x 50 and B is stored n x k = 30 x 50")
    assert "A is stored k x m = 50 x 40" in mm.storage({**p, "FORM": "A.T @ B"})


def test_an_honest_product_with_a_wrong_scale_gets_no_storage_hint_for_a_at_b():
    student = next(s for s in (f"student{i:03d}" for i in range(40))
                   if get("matmul").variant(s).params["FORM"] == "A @ B")
    p = get("matmul").variant(student).params
    code = solution("matmul").replace("acc += col @ row", "acc += 2 * (col @ row)")
    score, msg, _ = graded("matmul", "q1", student,
                           {"tiled_matmul": defined(code, p, "tiled_matmul")}, public=True)
    assert score == 0 and "C is wrong" in msg and "is stored" not in msg


@pytest.mark.parametrize("bug,wrong,right", [
    ("dq += tau * (P @ K_j)", "dQ", "dK and dV are right"),          # the scale forgotten in dQ
    ("dV_j += P.T @ do", "dV", "dQ and dK are right"),               # dV summed twice
])
def test_a_wrong_gradient_message_says_which_gradients_are_right(bug, wrong, right):
    student = "student001"
    p = get("backward").variant(student).params
    code = solution("backward")
    assert bug in code
    broken = bug.replace("tau * (P @ K_j)", "(P @ K_j)") if wrong == "dQ" else \
        bug + "\n            " + bug
    program = defined(code.replace(bug, broken, 1), p, "flash_backward")
    score, msg, kinds = graded("backward", "q1", student, {"flash_backward": program},
                               public=True)
    assert score == 0 and kinds == ["wrong"], msg
    assert f"{wrong} is wrong" in msg and right in msg, msg
    assert msg.count("is wrong") == 1


# ====================================================================== --similar


RENAMES = [("allowed", "permitted"), ("needed", "useful"), ("mem", "cache"), ("B_r", "rows"),
           ("B_c", "cols"), ("tau", "scale"), ("Q_i", "q_blk"), ("O_i", "acc"), ("m_i", "mx"),
           ("l_i", "total"), ("i0", "start"), ("j0", "k_start"), ("m_new", "peak")]

PADDING = "\n".join(
    f"def check_{k}(N, d):\n"
    f"    \"\"\"A try-out of my own, number {k}.\"\"\"\n"
    f"    sizes = [(N + t, d * {k} + t) for t in range({k} + 2)]\n"
    f"    best = min(sizes, key=lambda s: abs(s[0] - s[1] * {k}))\n"
    f"    return best, len(sizes) % {k + 3}\n" for k in range(60))


def renamed(code: str) -> str:
    for old, new in RENAMES:
        code = re.sub(rf"\b{old}\b", new, code)
    return code


def test_the_public_sources_are_the_keys_and_the_repositorys_solutions():
    flash = public_sources("flash")
    assert {"tests/teach/solutions/flash.py", "tests/teach/solutions/flash_fa1.py"} <= set(flash)
    assert "ioattn.teach.keys.pebbling" in public_sources("pebbling")
    assert "tests/teach/solutions/pebbling.py" in public_sources("pebbling")
    hints = handout_code("flash")
    assert "maximum(m, S.max(axis=1))" in hints and "def row_sums" in hints


def test_a_renamed_and_a_padded_paste_of_a_public_solution_are_caught(tmp_path):
    source = solution("flash")
    paste = renamed(source)
    assert paste != source and "cache.read" in paste
    class_ = [(s, notebook(tmp_path / f"{s}.ipynb", "flash", s, code))
              for s, code in (("ren", paste),
                              ("pad", PADDING + "\n\n" + source + "\n\n" + PADDING))]
    pairs = similar_in_class("flash", class_)
    found = {(p.first, p.second): p for p in pairs}
    ren = found[("ren", "tests/teach/solutions/flash.py")]
    assert ren.similarity >= 0.95
    pad = found[("pad", "tests/teach/solutions/flash.py")]
    assert pad.similarity >= 0.95 and pad.first_in_second < 0.5     # the source whole inside
    assert "of pad's code is in" in pad.text()
    # the two pastes are of one source: they are a pair too
    assert ("pad", "ren") in found


def test_two_independent_honest_solutions_from_the_same_hints_are_not_flagged():
    codes = {"ada": solution("flash"), "bob": solution("flash_helpers")}
    starter = handout_code("flash")
    assert similar_pairs(codes, starter=starter) == []
    (pair,) = similar_pairs(codes, starter=starter, threshold=0.01)
    assert pair.similarity < 0.6
    # the handout and its hints are discounted: less in common than without them
    (plain,) = similar_pairs(codes, threshold=0.01)
    assert pair.similarity <= plain.similarity


def test_the_docstring_says_it_is_an_aid_not_a_security_boundary():
    assert "aid to the\ninstructor, not a security boundary" in similarity.__doc__


# ====================================================================== flags


def encoded_paste() -> str:
    """A notebook cell that hides a public solution: compressed, base64, run with exec."""
    blob = base64.b64encode(zlib.compress(solution("flash").encode())).decode()
    return (f"import base64, zlib\n\nBLOB = '{blob}'\n"
            "exec(zlib.decompress(base64.b64decode(BLOB)).decode(), globals())\n")


def test_code_hidden_in_an_encoded_blob_is_flagged_with_its_cell_and_line(tmp_path):
    path = notebook(tmp_path / "a.ipynb", "flash", "ada", "import numpy as np", encoded_paste())
    found = notebook_flags(path)
    # cell 1 is the parameters, cell 2 numpy, cell 3 the blob
    assert "cell 3, line 1: imports base64 (decodes text: often hidden code)" in found
    assert "cell 3, line 1: imports zlib (decompresses data: often hidden code)" in found
    assert any(f.startswith("cell 3, line 3: a ") and "base64 string" in f for f in found)
    assert "cell 3, line 4: calls exec (runs code made at run time)" in found
    assert not any(f.startswith(("cell 1,", "cell 2,")) for f in found)


@pytest.mark.parametrize("code,line,says", [
    ("import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect('/tmp/agent')", 1, "socket"),
    ("from ctypes import CDLL\nlibc = CDLL(None)", 1, "ctypes"),
    ("import gc\nobjs = gc.get_objects()", 2, ".get_objects"),
    ("import sys\nf = sys._getframe(1)\ng = f.f_back.f_globals", 3, ".f_globals"),
    ("import inspect\nstack = inspect.stack()", 1, "inspect"),
    ("import importlib\nm = importlib.import_module('ioattn.teach.' + 'keys')", 1, "importlib"),
    ("run = getattr(__builtins__, 'ex' + 'ec')", 1, "__builtins__"),
    ("f = eval('lambda: 1')", 1, "calls eval"),
    ("code = compile(src, 'x', 'exec')", 1, "calls compile"),
    ("mod = __import__('o' + 's')", 1, "calls __import__"),
    ("import os\nos._exit(0)", 2, "._exit"),
    ("data = open('/proc/self/maps').read()", 1, "/proc"),
    ("x = 1\n%time y = 2\n!curl http://example.org", 3, "shell command"),
    ("def broken(:\n    import socket", 2, "does not parse"),
])
def test_what_reaches_past_the_notebook_is_flagged(code, line, says):
    found = flags([code])
    assert any(f.startswith(f"cell 1, line {line}: ") and says in f for f in found), found


def test_honest_code_and_the_handouts_are_not_flagged():
    for name in ("matmul", "flash", "flash_fa1", "flash_helpers", "backward", "decoding",
                 "decoding_per_head", "pebbling"):
        assert flags([solution(name)]) == [], name
    for stem in ("honest_reference", "honest_helper_class", "honest_print_logging",
                 "honest_progress_log", "honest_split_cells"):
        assert flags([(CHEATS / f"{stem}.py").read_text()]) == [], stem
    for assignment in ("matmul", "flash", "crossover", "pebbling", "backward", "decoding"):
        cells = jupytext.read(notebook_source(assignment)).cells
        assert flags([c.source for c in cells if c.cell_type == "code"]) == [], assignment
    # long text is not a blob: prose, and a docstring of words
    assert flags(["'''" + "word " * 40 + "'''", "x = '" + "-" * 100 + "'"]) == []


def test_flags_number_cells_as_given_and_refuse_what_is_not_code():
    assert flags([(7, "import gc")]) == ["cell 7, line 1: imports gc (walks the interpreter's "
                                         "objects)"]
    with pytest.raises(TypeError, match="a cell's source must be a str"):
        flags([b"import gc"])
    with pytest.raises(FileNotFoundError, match="no notebook at"):
        notebook_flags("/nonexistent/a.ipynb")
