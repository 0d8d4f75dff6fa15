"""Verdicts: turning what a submission did into a pass or a failure with its reasons.

A check that fails raises :class:`GradingFailure`, an ``AssertionError`` (what otter-grader's
tests expect) whose message is one line per reason, each opening with the headline of its kind
(:data:`~ioattn.teach.memory.KINDS`), e.g. ``Exceeded the cache: ...``.
"""

from __future__ import annotations

import numpy as np

from . import session
from .harness import Call
from .memory import KINDS, Referee

__all__ = ["GradingFailure", "compare", "fail", "judge_run", "need_callable", "reason"]

#: Largest relative error (max |got - want| / max |want|) an output may have.
TOLERANCE = 1e-6


class GradingFailure(AssertionError):
    """A failed check. ``reasons`` is a list of ``(kind, detail)``; the message has one line per
    reason: ``"<headline of kind>: <detail>"``."""

    def __init__(self, reasons):
        self.reasons = list(reasons)
        super().__init__("\n".join(reason(k, d) for k, d in self.reasons))


def reason(kind: str, detail: str) -> str:
    """One line of a failure message."""
    return f"{KINDS[kind]}: {detail}"


def fail(kind: str, detail: str):
    """Raise a :class:`GradingFailure` with one reason."""
    raise GradingFailure([(kind, detail)])


def need_callable(fn, name: str):
    """``fn``, or a failure saying the submission does not define ``name``."""
    if fn is None:
        fail("error", f"{name} is not defined: run the cell that defines it, and keep its name")
    if not callable(fn):
        fail("error", f"{name} should be a function, got {type(fn).__name__}")
    return fn


def _blocked() -> list:
    s = session.current()
    return [("blocked", b) for b in s.blocked] if s is not None else []


def _subject(name: str, message: str) -> str:
    return f"{name} {message[3:]}" if message.startswith("it ") else message


def compare(got: np.ndarray, want: np.ndarray) -> float:
    """Relative error ``max |got - want| / max |want|`` (infinite if shapes differ or NaN)."""
    if got.shape != want.shape or not np.isfinite(got).all():
        return float("inf")
    scale = float(np.abs(want).max()) or 1.0
    return float(np.abs(got - want).max()) / scale


def judge_run(call: Call, referee: Referee, outputs, *, lower: int | None = None):
    """The verdict on one run of a submission's function through the grader's memory.

    Parameters
    ----------
    call : Call
        What :func:`ioattn.teach.harness.call` reported.
    referee : Referee
        The memory's referee.
    outputs : list of (SlowArray, dict)
        Each output handle with the values it should hold, ``{"expected": array}``, and
        optionally ``"decoy"`` (what it would hold if computed from the decoy values behind the
        handles) and ``"public"`` (the answer for the notebook's own example inputs).
    lower : int, optional
        A lower bound on the I/O of every algorithm in the model for this problem.

    Returns
    -------
    IOCount
        The I/O recounted from the referee's trace, when nothing is wrong.

    Raises
    ------
    GradingFailure
        With every reason found: violations first (cheating is named as such), then errors,
        then wrong or missing values, then a count below the lower bound.
    """
    name = call.name
    reasons = [(v.kind, _subject(name, v.message)) for v in referee.violations] + _blocked()
    if isinstance(call.returned, np.ndarray) and call.returned.dtype.kind in "fc":
        reasons.append(("outside", f"{name} returned an array: results count only when written "
                        "to slow memory with mem.write"))
    if reasons:
        raise GradingFailure(reasons)
    if call.timed_out:
        fail("error", f"{name} ran past its time limit")
    if call.error is not None:
        fail("error", f"{name} raised {call.describe_error()}")
    for handle, want in outputs:
        got = referee.value(handle)
        written = referee.written(handle)
        unwritten = int((~written).sum())
        if unwritten:
            fail("wrong", f"{unwritten:,} of the {got.size:,} entries of {handle.name} were "
                 "never written (with mem.write)")
        nan = int(np.isnan(got).sum())
        if nan and referee.frees:
            fail("cache", f"{name} wrote NaN to {nan:,} entries of {handle.name}; freed cache "
                 "buffers hold NaN, so it used a buffer after mem.free released it (values kept "
                 "after freeing them are outside the cache)")
        err = compare(got, want["expected"])
        if err <= TOLERANCE:
            continue
        if "decoy" in want and compare(got, want["decoy"]) <= TOLERANCE:
            fail("uncounted", f"{handle.name} holds what the decoy values behind the handles "
                 "give: they are visible only to code that reads slow memory directly")
        if "public" in want and compare(got, want["public"]) <= TOLERANCE:
            fail("hard-coded", f"{handle.name} holds the answer for the notebook's example "
                 "inputs, not for the inputs the grader gave")
        fail("wrong", f"{handle.name} is wrong: largest error {err:.2e} relative to its "
             f"largest entry")
    io = referee.recount()
    if (referee.reads, referee.writes) != (io.reads, io.writes):
        fail("counters", f"the memory's counts ({referee.reads:,} reads, {referee.writes:,} "
             f"writes) differ from its trace ({io.reads:,}, {io.writes:,})")
    if lower is not None and io.total < lower:
        fail("outside", f"{name} moved {io.total:,} entries, fewer than the {lower:,} that every "
             "algorithm in the model must move for this problem: it kept values outside the "
             "cache")
    return io
