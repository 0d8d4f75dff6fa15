"""The decoding assignment: its grid and budget from ioattn.decoding, its reference, and what
it gives honest, per-head and wrong programs."""

from __future__ import annotations

import numpy as np
import pytest

import ioattn.teach as teach
from ioattn.decoding import decoding_plan, run_decoding
from ioattn.inference import unstack_group
from ioattn.teach.answers import LocalAnswers
from ioattn.teach.assignments import Context, decoding
from ioattn.teach.grade import grade
from ioattn.teach.judge import GradingFailure, judge_outputs

from .helpers import notebook, solution

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

SPEC = teach.get("decoding")
STUDENTS = ["ada", "alan", "grace", "s1234567", "edsger.dijkstra@example.org"]


def program(name: str, p: dict, code: str | None = None):
    """The function ``decode`` of solution ``name`` (or of ``code``), with ``p`` as globals."""
    namespace = dict(p)
    exec(compile(solution(name) if code is None else code, name, "exec"), namespace)  # noqa: S102
    return namespace["decode"]


def counted(name: str, p: dict):
    """The count of solution ``name`` on the example data of ``p``, checked right."""
    inputs, outputs, expected = SPEC.problem(p, None)
    run = LocalAnswers({"decode": program(name, p)}).run(
        "decode", p["M"], inputs, outputs, args=SPEC.extra_args(p))
    return judge_outputs(run, expected)


def graded(question: str, student: str, decode, seed: int = 0):
    """``(score fraction, message)`` of one check as the grader runs it, on hidden data."""
    ctx = Context(SPEC.variant(student), False, np.random.default_rng(seed))
    try:
        return 1.0, SPEC.check(question, LocalAnswers({"decode": decode}), ctx)
    except GradingFailure as failure:
        return failure.score, str(failure)


def test_a_variant_is_the_same_for_the_same_id_and_lies_on_the_grid():
    grid = set(decoding.grid())
    for student in STUDENTS:
        p = teach.variant("decoding", student).params
        assert p == teach.variant("decoding", student).params
        assert decoding.sizes(p) in grid and p["MASK"] in decoding.MASKS
        assert decoding.table_of(p) == decoding.table_of(dict(p))
    drawn = [teach.variant("decoding", f"student{i}").params for i in range(200)]
    assert {p["MASK"] for p in drawn} == set(decoding.MASKS)
    assert len({p["H_q"] // p["H_kv"] for p in drawn}) == 3 and len({p["M"] for p in drawn}) > 50


def test_on_every_grid_point_the_stacked_schedule_fits_and_the_per_head_one_does_not():
    grid = decoding.grid()
    assert len(grid) > 1000
    for s in grid:
        H_q, H_kv, N_q, N_k, d, P_s, M = s
        cap = decoding.budget(*s)
        plan = decoding_plan(H_q, H_kv, N_q, N_k, d, M, P_s=P_s)
        assert cap == 5 * plan.cost().total // 4 and plan.B_c % P_s == 0
        stacked = decoding.program_count(*s)
        assert stacked == 2 * H_q * N_q * d + 2 * d * N_k * H_kv      # every page once
        per_head = decoding.program_count(*s, grouping="per_head")
        assert per_head == 2 * H_q * N_q * d + 2 * d * N_k * H_q      # every page g times
        assert stacked <= cap < per_head, s
        assert decoding.least_cache(H_q, H_kv, N_q, d, P_s) <= M


def test_the_tile_programs_move_exactly_their_schedules_count_at_the_ends_of_the_grid():
    """Honest (stacked) and per-head programs, at the least and greatest M of every sizes of
    the grid with N_k = 45, alternating the mask: right, and each moves exactly
    ``decoding_cost(...).total`` less the table entries of its schedule."""
    ends: dict = {}
    for s in decoding.grid():
        if s[3] == 45:
            key = s[:6]
            lo, hi = ends.get(key, (s[6], s[6]))
            ends[key] = (min(lo, s[6]), max(hi, s[6]))
    runs = 0
    for i, (key, Ms) in enumerate(sorted(ends.items())):
        for M in Ms:
            p = {"MASK": decoding.MASKS[(i + runs) % 2], **dict(zip(decoding.SIZES, (*key, M))),
                 "SEED": i}
            s = decoding.sizes(p)
            io = counted("decoding", p)
            assert io.total == decoding.program_count(*s) and io.peak <= M
            if i % 4 == 0:
                assert counted("decoding_per_head", p).total == decoding.program_count(
                    *s, grouping="per_head")
            runs += 1
    assert len(ends) == 72 and runs == 2 * len(ends)


@pytest.mark.parametrize("student", ["ada", "alan", "grace"])
def test_the_expected_output_is_ioattns_paged_decoding_run(student):
    p = teach.variant("decoding", student).params
    data = decoding.example_inputs(p)
    H_q, H_kv, N_q, N_k, d, P_s, M = decoding.sizes(p)
    g, blocks = H_q // H_kv, data["K"].shape[0] // P_s

    def pool(X):
        return X.reshape(blocks, P_s, H_kv, d).transpose(0, 2, 1, 3)

    run = run_decoding(data["Q_heads"], pool(data["K"]), pool(data["V"]), M,
                       table=data["table"], N_k=N_k, causal=p["MASK"] == "causal")
    want = decoding.outputs_of(p, data)
    for h in range(H_kv):
        got = unstack_group(want[h * g * N_q:(h + 1) * g * N_q], g)
        np.testing.assert_allclose(got, run.output[h * g:(h + 1) * g], rtol=1e-12, atol=1e-12)
    assert run.io == decoding_plan(H_q, H_kv, N_q, N_k, d, M, P_s=P_s).cost()


def test_the_per_head_program_earns_question_1_and_not_question_2():
    for student, seed in (("ada", 1), ("alan", 2)):
        p = teach.variant("decoding", student).params
        decode = program("decoding_per_head", p)
        score, msg = graded("q1", student, decode, seed)
        assert score == 1.0 and "right on hidden sizes" in msg, msg
        score, msg = graded("q2", student, decode, seed)
        assert score == 0 and "Over budget" in msg and "once per query head" in msg, msg


@pytest.mark.parametrize("bug, fix", [
    ("q[...] = tau * q", "q[...] = q"),                                        # no scale
    ("min(P_s, N_k - p * P_s)", "P_s"),                                       # whole last page
    ("start, r = table[p] * P_s", "start, r = p * P_s"),                      # table ignored
    ("o[...] = o / l[:, None]", "o[...] = o / (l[:, None] + 1)"),             # wrong sum
])
def test_a_wrong_program_gets_nothing_for_question_1(bug, fix):
    code = solution("decoding")
    assert bug in code
    for student in ("ada", "alan"):
        p = teach.variant("decoding", student).params
        score, msg = graded("q1", student, program("decoding", p, code.replace(bug, fix, 1)))
        assert score == 0, (bug, msg)


def test_the_mask_is_the_students_own():
    causal = next(s for s in STUDENTS if teach.variant("decoding", s).params["MASK"] == "causal")
    p = {**teach.variant("decoding", causal).params, "MASK": "none"}
    score, msg = graded("q1", causal, program("decoding", p))      # the mask left out
    assert score == 0 and "O is wrong" in msg, msg


def test_an_honest_notebook_with_the_per_head_program_gets_question_1_only(tmp_path):
    path = notebook(tmp_path / "a.ipynb", "decoding", "ada", solution("decoding_per_head"))
    report = grade("decoding", path, seed=3)
    assert report.error is None and not report.cell_errors, report.text()
    q1, q2 = report.questions
    assert (q1.score, q2.score) == (2, 0), report.text()
    assert "Over budget" in q2.reasons[0]
