"""Notebooks that attack the grader's messages, its machine's arithmetic and its reports.

:data:`EXPECT` says what the grader makes of each ``cheats/protocol_*.py`` notebook (graded by
``tests/teach/test_cheats.py`` with the other cheats); the tests here check the same defences
one function at a time, and end to end where a notebook needs more than a tile program.
"""

from __future__ import annotations

import json
import os
import socket
import time
from multiprocessing.connection import Connection

import numpy as np
import pytest

from ioattn.teach import judge, protocol
from ioattn.teach.answers import Unsendable, connect, decode
from ioattn.teach.grade import grade
from ioattn.teach.referee import Crashed, Submission, TimedOut
from ioattn.tiles import Machine, TileError
from ioattn.tiles import machine as machine_module
from ioattn.tiles.machine import EXP_HIGH, EXP_LOW, STEADY, max_cost, round_bits, steady_exp

from .helpers import CHEATS, notebook, solution

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

ENDED = "The notebook's process ended"


def _zero(reason) -> dict:
    return {"q1": 0, "q2": 0, "q1_reason": reason, "q2_reason": reason}


#: What the grader makes of each ``cheats/protocol_*.py`` (the schema of test_cheats.EXPECT).
EXPECT: dict[str, dict] = {
    "protocol_huge_number": _zero("not within float64's range"),
    "protocol_deep_message": _zero("nested 100,000 deep"),
    "protocol_lone_surrogate": _zero("lone surrogate"),
    "protocol_not_utf8": _zero("not UTF-8"),
    "protocol_write_and_exit": _zero(ENDED),
    "protocol_escape_codes": _zero("ValueError: total 5/5"),
    "protocol_costly_expression": _zero("is too large"),
    "protocol_packed_strips": _zero("C is wrong"),
    "protocol_packed_cache": _zero("C is wrong"),
}


def test_every_protocol_cheat_has_an_expectation():
    stems = {p.stem for p in CHEATS.glob("protocol_*.py")}
    assert stems == set(EXPECT)


# ---------------------------------------------------------------------- messages
def _pair():
    a, b = socket.socketpair()
    return Connection(a.detach()), Connection(b.detach())


def test_a_deeply_nested_message_is_refused_before_it_is_parsed(monkeypatch):
    calls = []
    monkeypatch.setattr(protocol.json, "loads", lambda *a, **k: calls.append(a))
    with pytest.raises(protocol.ProtocolError, match="nested 100,000 deep"):
        protocol.parse(b"[" * 100_000 + b"]" * 100_000)
    assert calls == []


def test_nesting_does_not_count_brackets_inside_strings():
    text = json.dumps({"a": ["[[[[" * 100, '\\"[[[' * 50, [[1]]]}).encode()
    assert protocol.nesting(text) == 4
    assert protocol.parse(text)["a"][2] == [[1]]


@pytest.mark.parametrize("data, match", [
    (json.dumps({"x": "\ud800"}).encode(), "lone surrogate"),
    (json.dumps(["\udc00 after"]).encode(), "lone surrogate"),
    ('{"x": 1}'.encode("utf-16"), "not UTF-8"),
    (b'{"x": "\xed\xa0\x80"}', "not UTF-8"),                 # a surrogate encoded in UTF-8
    (b'{"x": ', "not JSON"),
    (b"1" * 5000, "not JSON"),                                # more digits than Python parses
])
def test_malformed_messages_are_protocol_errors(data, match):
    with pytest.raises(protocol.ProtocolError, match=match):
        protocol.parse(data)


def test_text_that_is_unicode_and_the_floats_json_names_pass():
    assert protocol.parse(json.dumps(["\U0001F600", "é"]).encode()) == ["\U0001F600", "é"]
    got = protocol.parse(b"[-Infinity, NaN]")
    assert got[0] == float("-inf") and got[1] != got[1]


def test_a_message_longer_than_the_limit_is_refused_from_its_length():
    ours, theirs = _pair()
    theirs.send_bytes(b"[" + b"1," * 600 + b"1]")
    with pytest.raises(protocol.ProtocolError, match="more than the 1,000 allowed"):
        protocol.receive(ours, time.monotonic() + 5, limit=1000)


def test_half_a_message_times_out_instead_of_blocking():
    ours, theirs = _pair()
    os.write(theirs.fileno(), (1000).to_bytes(4, "big") + b"[1,")
    start = time.monotonic()
    with pytest.raises(TimeoutError):
        protocol.receive(ours, start + 0.3)


def test_a_send_nobody_reads_times_out_instead_of_blocking():
    ours, _theirs = _pair()
    with pytest.raises(TimeoutError):
        for _ in range(100_000):                              # far more than a socket buffers
            protocol.send(ours, {"ok": "x" * 1000}, time.monotonic() + 0.3)


def test_a_send_to_an_ended_process_is_a_broken_pipe():
    ours, theirs = _pair()
    theirs.close()
    with pytest.raises(OSError):
        protocol.send(ours, {"ok": 1}, time.monotonic() + 5)


def test_messages_with_a_deadline_are_what_connection_sends_and_reads():
    ours, theirs = _pair()
    protocol.send(ours, {"tile": ["io"]}, time.monotonic() + 5)
    assert json.loads(theirs.recv_bytes()) == {"tile": ["io"]}
    theirs.send_bytes(json.dumps({"ok": [1, [2, 3]]}).encode())
    assert protocol.receive(ours, time.monotonic() + 5) == {"ok": [1, [2, 3]]}
    theirs.close()
    with pytest.raises(EOFError):
        protocol.receive(ours, time.monotonic() + 5)


# ---------------------------------------------------------------------- values
@pytest.mark.parametrize("request_", [
    ["set", ["tile", 0], ["num", 10 ** 400]],
    ["set", ["tile", 0], ["add", ["tile", 0], ["num", -(10 ** 400)]]],
    ["alloc", [2], 10 ** 400],
    ["alloc", [10 ** 400], 0.0],
    ["read", "A", [[0, 10 ** 400], [0, 1]]],
    ["set", ["tile", 0], ["rows", 10 ** 400, 2]],
    ["free", [10 ** 400]],
])
def test_integers_beyond_float64_are_refused_by_the_machine(request_):
    machine = Machine(16)
    machine.load("A", np.ones((2, 2)))
    machine.request(["alloc", [2], 0.0])
    with pytest.raises(TileError) as refused:
        machine.request(request_)
    assert "OverflowError" not in str(refused.value)          # refused as a value, not a crash


def test_integers_beyond_float64_in_an_answer_are_unsendable():
    with pytest.raises(Unsendable, match="beyond float64's range"):
        decode([1, 10 ** 400])
    assert decode(2 ** 1000) == 2 ** 1000                     # exact, within range


def test_a_huge_integer_returned_by_a_call_fails_that_question(tmp_path):
    code = ("def crossover(N, d):\n    return 10 ** 400\n"
            "def m_predicted(d, W):\n    return 10 ** 400\n")
    report = grade("crossover", notebook(tmp_path / "c.ipynb", "crossover", "ada", code), seed=4)
    assert report.error is None, report.text()
    q1, q2 = report.questions[:2]
    assert q1.score == 0 and q2.score == 0, report.text()
    assert "beyond float64's range" in " ".join(q2.reasons), report.text()


# ---------------------------------------------------------------------- costs
def test_a_costly_expression_is_refused_before_any_arithmetic(monkeypatch):
    M = 1 << 20                                               # 2048 x 2048 intermediates fit
    machine = Machine(M)
    machine.request(["alloc", [1, 1], 0.0])
    x = ["mul", ["rows", 0, 2048], ["cols", 0, 2048]]
    e = x
    for _ in range(60):
        e = ["matmul", e, x]
    e = ["sum", ["sum", e, 0], 0]
    monkeypatch.setattr(Machine, "_eval", lambda *a, **k: pytest.fail("evaluated"))
    with pytest.raises(TileError, match=f"more than the {max_cost(M):,} operations"):
        machine.request(["set", ["tile", 0], e])


def test_an_honest_product_costs_far_less_than_the_limit():
    M = 290                                                   # b = 16: b^2 + 2b <= M
    cost = [0]
    machine = Machine(M)
    machine.request(["alloc", [16, 16], 0.0])
    machine.request(["alloc", [16, 1], 1.0])
    machine.request(["alloc", [1, 16], 1.0])
    machine._plan(["add", ["tile", 0], ["matmul", ["tile", 1], ["tile", 2]]], cost)
    assert cost[0] == 2 * 16 * 16
    assert cost[0] * 50 < max_cost(M)


def test_intermediates_are_bounded_by_a_multiple_of_the_cache():
    machine = Machine(100)
    machine.request(["alloc", [1, 1], 0.0])
    with pytest.raises(TileError, match="too large"):
        machine.request(["set", ["tile", 0],
                         ["sum", ["sum", ["mul", ["rows", 0, 100], ["cols", 0, 100]], 0], 0]])


def test_a_pipelining_notebook_costs_the_grader_at_most_the_time_limit():
    cells = [(1, "import gc, json\nfrom multiprocessing.connection import Connection\n"
                 "def f(mem, A):\n"
                 "    conn = [o for o in gc.get_objects() if isinstance(o, Connection)][0]\n"
                 "    for _ in range(200_000):\n"
                 "        conn.send_bytes(json.dumps({'tile': ['io']}).encode())\n")]
    with Submission(cells) as sub:
        start = time.monotonic()
        with pytest.raises(TimedOut, match="ran past the time limit"):
            sub.run("f", 16, {"A": np.ones((2, 2))}, {}, time_limit=3.0)
        waited = time.monotonic() - start
    assert waited < 60, waited                                # not for ever: about 3 s


def test_a_process_that_ends_after_writing_is_a_crash_of_that_call():
    cells = [(1, "import gc, os\nfrom multiprocessing.connection import Connection\n"
                 "def f(mem, A):\n"
                 "    conn = [o for o in gc.get_objects() if isinstance(o, Connection)][0]\n"
                 "    conn.send_bytes(b'{\"tile\": [\"io\"]}' * 1)\n"
                 "    os._exit(0)\n")]
    with Submission(cells) as sub:
        try:
            run = sub.run("f", 16, {"A": np.ones((2, 2))}, {}, time_limit=30.0)
        except Crashed as exc:
            assert "ended" in str(exc)
        else:
            pytest.fail(f"no crash: {run}")


def test_only_the_end_of_the_standard_error_is_read_back(tmp_path):
    sub = Submission([])
    sub.errors = sub._stderr()
    sub.errors.file.write(b"\x1b[31m" + b"y" * (10 << 20) + b"\x1b[0mthe end")
    sub.errors.file.flush()
    tail = sub._error_tail()
    assert tail.endswith("the end") and len(tail) <= 500 and "\x1b" not in tail


# ---------------------------------------------------------------------- timing
def _recorded(monkeypatch, machine):
    """Every value the machine's evaluation makes, recorded as it is made."""
    made = []
    real = Machine._eval

    def recording(self, *args, **kwargs):
        value = real(self, *args, **kwargs)
        made.append(np.array(value, dtype=np.float64, copy=True))
        return value

    monkeypatch.setattr(Machine, "_eval", recording)
    return made


def _steady(values) -> bool:
    size = np.abs(values[np.isfinite(values) & (values != 0)])
    return bool(np.all((size >= STEADY[0]) & (size <= STEADY[1])))


def test_exp_never_takes_its_slow_path_on_hidden_values(monkeypatch):
    """The red team's probe, exp(where(x > c, -800, 0.5)): exp only ever sees arguments where
    NumPy takes its fast path, and every value made is steady (so no operation after it is
    slow either)."""
    seen = []
    real = machine_module._exp

    def recording(x):
        seen.append((float(np.min(x)), float(np.max(x))))
        return real(x)

    monkeypatch.setattr(machine_module, "_exp", recording)
    machine = Machine(2 * 4096, graded=True)
    made = _recorded(monkeypatch, machine)
    machine.load("A", np.linspace(-1, 1, 64 * 64).reshape(64, 64))
    tid, _ = machine.request(["read", "A", [[0, 64], [0, 64]]])
    out = machine.request(["alloc", [64, 64], 0.0])[0]
    machine.request(["set", ["tile", out],
                     ["exp", ["where", ["gt", ["tile", tid], ["num", 0.1]],
                              ["num", -800.0], ["num", 0.5]]]])
    assert seen and all(EXP_LOW <= lo and hi <= EXP_HIGH for lo, hi in seen)
    assert made and all(_steady(v) for v in made)
    a, values = machine.tiles[tid], machine.tiles[out]
    assert np.all(values[a > 0.1] == 0) and np.allclose(values[a <= 0.1], np.exp(0.5))


@pytest.mark.parametrize("expr", [
    ["mul", ["mul", ["tile", 0], ["num", 1e-200]], ["num", 1e-120]],   # a subnormal product
    ["div", ["tile", 0], ["num", 1e300]],
    ["mul", ["tile", 0], ["num", 1e-310]],                           # a subnormal number
    ["sub", ["mul", ["tile", 0], ["num", 1e-290]], ["num", 1e-290]],
    ["exp", ["mul", ["tile", 0], ["num", -720.0]]],
    ["exp", ["mul", ["tile", 0], ["num", 709.5]]],
    ["sum", ["mul", ["tile", 0], ["num", 1e-300]], 0],
])
def test_no_value_a_graded_machine_makes_is_outside_the_steady_range(monkeypatch, expr):
    machine = Machine(64, graded=True)
    made = _recorded(monkeypatch, machine)
    machine.load("A", np.array([1.0, 0.5, -0.25, 3.0]))
    machine.request(["read", "A", [[0, 4]]])
    machine.request(["alloc", [4], 0.0])
    machine.request(["set", ["tile", 1], expr])
    assert made and all(_steady(v) for v in made)
    assert _steady(machine.tiles[1])


def test_steady_exp_is_exp_within_its_range():
    x = np.array([-np.inf, -1000.0, -300.0, -200.0, 0.0, 1.0, 200.0, 300.0, np.inf, np.nan])
    got = steady_exp(x)
    assert np.array_equal(got[[0, 1, 2]], [0, 0, 0]) and np.array_equal(got[[7, 8]], [np.inf] * 2)
    assert np.array_equal(got[3:7], np.exp(x[3:7])) and np.isnan(got[-1])


def test_a_machine_that_does_not_grade_computes_as_numpy_does():
    machine = Machine(64)
    machine.request(["alloc", [2], 1e-200])
    machine.request(["set", ["tile", 0], ["mul", ["tile", 0], ["num", 1e-120]]])
    assert np.all(machine.tiles[0] == 1e-200 * 1e-120)


# ---------------------------------------------------------------------- packing
def _run_packing(graded, form="A @ B"):
    ns = {"FORM": form}
    exec((CHEATS / "protocol_packed_strips.py").read_text(), ns)
    rng = np.random.default_rng(1)
    m, k, n, b = 80, 70, 75, 16
    M = b * b + 2 * b + 3
    a, w = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    machine = Machine(M, graded=graded)
    mem, handles = connect(machine, {"A": a, "B": w}, {"C": (m, n)})
    ns["tiled_matmul"](mem, *handles)
    return judge.compare(machine.fetch("C"), a @ w), machine.memory.io, 2 * m * n * k / M ** 0.5


def test_packing_two_values_per_entry_works_on_exact_slow_memory():
    err, io, bound = _run_packing(False)
    assert err < judge.TOLERANCE and io.reads < bound         # the attack, undefended


def test_packing_fails_on_a_graded_machine():
    err, _, _ = _run_packing(True)
    assert err > 1000 * judge.TOLERANCE


def _run_cache_packing(graded, form="A @ B"):
    ns: dict = {"FORM": form}
    exec((CHEATS / "protocol_packed_cache.py").read_text(), ns)
    rng = np.random.default_rng(1)
    m, k, n, b = 80, 70, 75, 16
    M = b * b + 2 * b + 3
    a, w = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    stored = {"A @ B": (a, w), "A.T @ B": (a.T.copy(), w), "A @ B.T": (a, w.T.copy())}[form]
    machine = Machine(M, graded=graded)
    mem, handles = connect(machine, dict(zip("AB", stored)), {"C": (m, n)})
    ns["tiled_matmul"](mem, *handles)
    return judge.compare(machine.fetch("C"), a @ w), machine.memory.io, 2 * m * n * k / M ** 0.5


@pytest.mark.parametrize("form", ["A @ B", "A.T @ B", "A @ B.T"])
def test_packing_two_values_per_cache_entry_beats_the_bound_on_an_exact_machine(form):
    """The block of C held two to an entry: right within the tolerance, with fewer counted
    reads than 2mnk/sqrt(M), and never more than M entries in the cache."""
    err, io, bound = _run_cache_packing(False, form)
    assert err < judge.TOLERANCE and io.reads < bound and io.peak <= 16 * 16 + 2 * 16 + 3


def test_packing_in_the_cache_fails_on_a_graded_machine():
    err, _, _ = _run_cache_packing(True)
    assert err > 1000 * judge.TOLERANCE


def test_a_graded_assignment_keeps_24_bits_of_every_value_it_stores_in_a_tile():
    machine = Machine(8, graded=True)
    machine.load("A", np.full((1, 2), 1 + 2.0 ** -30))
    machine.request(["read", "A", [[0, 1], [0, 2]]])
    assert machine.tiles[0].tolist() == [[1 + 2.0 ** -30] * 2]        # inputs as they are
    machine.request(["set", ["tile", 0], ["add", ["tile", 0], ["num", 2.0 ** -29]]])
    assert machine.tiles[0].tolist() == [[1.0, 1.0]]
    machine.request(["alloc", [1, 1], 3 + 2.0 ** -40])
    assert machine.tiles[1].tolist() == [[3.0]]
    exact = Machine(8)
    exact.request(["alloc", [1, 1], 3 + 2.0 ** -40])
    assert exact.tiles[0].tolist() == [[3 + 2.0 ** -40]]


@pytest.mark.parametrize("assignment", ["matmul", "flash", "backward", "decoding"])
def test_honest_programs_stay_well_within_the_tolerance_when_every_stored_value_is_rounded(
        assignment, monkeypatch):
    """The honest answers on graded machines (every stored value rounded to 24 bits), every
    question with a tile program, three students' data: the largest relative error is under
    half the tolerance (3.6e-7 was the largest measured, against 1e-6)."""
    from ioattn.teach import checks
    from ioattn.teach.assignments import get

    errors: list = []
    compare = judge.compare
    monkeypatch.setattr(judge, "compare", lambda got, want: errors.append(
        compare(got, want)) or errors[-1])
    spec = get(assignment)
    for student in ("ada", "bo", "cy"):
        ns: dict = {}
        exec(spec.variant(student, "").cell_source(), ns)
        exec(solution(assignment), ns)
        answers = {k: v for k, v in ns.items() if not k.startswith("__")}
        for q in spec.questions:
            if not q.manual:
                checks.check(assignment, q.name, student=student, **answers)
    assert errors and 0 < max(errors) < judge.TOLERANCE / 2, max(errors)


def test_round_bits_keeps_24_significant_bits():
    x = np.array([1 + 2.0 ** -23, 1 + 2.0 ** -25, -(1 + 3 * 2.0 ** -25), 2.0 ** 51 + 12345.0,
                  np.inf, -np.inf, 0.0])
    got = round_bits(x, 24)
    assert got[0] == 1 + 2.0 ** -23 and got[1] == 1.0 and got[2] == -(1 + 2.0 ** -23)
    assert got[3] == 2.0 ** 51 and np.isinf(got[4]) and got[5] == -np.inf and got[6] == 0
    assert np.isnan(round_bits(np.array([np.nan]), 24)[0])


# ---------------------------------------------------------------------- reports
PATCH_SEND = '''\
import gc, sys
runner = sys.modules["ioattn.teach.runner"]
_send = runner.send
def send(conn, msg, *args):
    if isinstance(msg, dict) and "ready" in msg:
        msg = {"ready": [], "output": "", "confined": "a virtual machine of its own"}
    if isinstance(msg, dict) and "cell" in msg:
        msg = {"cell": msg["cell"], "error": None}
    return _send(conn, msg, *args)
runner.send = send
'''


def test_a_patched_send_cannot_hide_earlier_cells_errors_or_state_the_isolation(tmp_path):
    path = notebook(tmp_path / "a.ipynb", "matmul", "ada", "1 / 0", PATCH_SEND,
                    "raise KeyError('later')", solution("matmul"))
    report = grade("matmul", path, seed=3)
    assert report.score == 5, report.text()
    assert any("cell 2: ZeroDivisionError" in e for e in report.cell_errors), report.cell_errors
    assert "virtual machine" not in report.isolation and "virtual machine" not in report.text()


def test_reasons_hold_no_control_characters_and_are_short(tmp_path):
    stem = "protocol_escape_codes"
    code = (CHEATS / f"{stem}.py").read_text()
    report = grade("matmul", notebook(tmp_path / "a.ipynb", "matmul", "ada", code), seed=3)
    text = report.text()
    assert "\x1b" not in text and "\x07" not in text
    for q in report.questions:
        for r in q.reasons:
            assert len(r) <= len("Did not run: ") + judge.MAX_DETAIL
            assert "total 5/5" in r


def test_clean_strips_escapes_and_controls():
    assert judge.clean("\x1b[1;31mA\x1b[0m\rB\x00C\u202eD\x9b2JE") == "A B C DE"
    assert judge.clean("x" * 5000, 100) == "x" * 97 + "..."
    assert judge.reason("error", "\x1b]0;t\x07ok") == "Did not run: ok"


def test_a_forged_cell_report_ends_the_grading_of_that_notebook():
    cells = [(1, "import gc, json\nfrom multiprocessing.connection import Connection\n"
                 "conn = [o for o in gc.get_objects() if isinstance(o, Connection)][0]\n"
                 "conn.send_bytes(json.dumps({'cell': 7, 'error': None}).encode())\n"),
             (7, "x = 1")]
    with Submission(cells) as sub, pytest.raises(Crashed, match="malformed cell report"):
        sub.start()
