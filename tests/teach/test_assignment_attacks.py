"""The assignments against notebooks that game them, and honest ones that are merely unusual.

FlashAttention-1's loop order (a correct program the budget does not admit, and a message that
says why), bounded partition and game checks, pebbling scored against a reference an
independent heuristic reaches, crossover instances no table carries, and messages that say
what to fix.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import ioattn
import ioattn.teach as teach
from ioattn.teach.answers import LocalAnswers
from ioattn.teach.assignments.base import Context, get
from ioattn.teach.assignments.flash import mask_of
from ioattn.teach.judge import KINDS, GradingFailure
from ioattn.tiles import Memory

from .helpers import SOLUTIONS, solution


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
    exec(compile(code, "<solution>", "exec"), namespace)      # noqa: S102 (the tests' own code)
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
