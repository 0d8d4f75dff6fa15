"""Verdicts: a check that fails raises :class:`GradingFailure` with its reasons, one per line.

Each reason has a kind (:data:`KINDS`) and a detail; its line is ``"<headline>: <detail>"``, e.g.
``Over budget: flash_attention moved 9,812 entries ...``.

A detail may quote the notebook (an exception's message, what its process wrote): every detail
goes through :func:`clean`, so a printed reason holds no control characters (no terminal escape
sequences) and at most :data:`MAX_DETAIL` characters.
"""

from __future__ import annotations

import re

import numpy as np

__all__ = ["GradingFailure", "KINDS", "MAX_DETAIL", "TOLERANCE", "clean", "compare", "fail",
           "judge_outputs", "reason"]

#: The kinds of reasons, with the headline each line opens with.
KINDS = {
    "error": "Did not run",
    "wrong": "Wrong answer",
    "budget": "Over budget",
    "time": "Ran past the time limit",
    "crash": "The notebook's process ended",
    "partial": "Partial credit",
}

#: The most characters of one reason's detail.
MAX_DETAIL = 600

#: Terminal escape sequences (CSI and OSC ones whole), then any other control or formatting
#: character (C0, DEL, C1, bidirectional overrides, zero-width ones) and lone surrogates.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]"              # CSI: colours, the cursor
                      r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"       # OSC: titles, links
                      r"|\x9b[0-?]*[ -/]*[@-~]")                # CSI in one byte
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u00ad\u200b-\u200f\u2028-\u202e\u2060-\u206f"
                      "\ufeff\ufff9-\ufffb\ud800-\udfff]")

#: Largest relative error (max |got - want| / max |want|) an output may have.
TOLERANCE = 1e-6


class GradingFailure(AssertionError):
    """A failed check. ``reasons`` is a list of ``(kind, detail)``; ``score`` is the fraction of
    the question's points it still earns (0 unless partial credit is given)."""

    def __init__(self, reasons, score: float = 0.0):
        self.reasons = [(k, clean(d)) for k, d in reasons]
        self.score = float(score)
        super().__init__("\n".join(reason(k, d) for k, d in self.reasons))


def reason(kind: str, detail: str) -> str:
    """One line of a failure message (its detail :func:`clean`)."""
    return f"{KINDS[kind]}: {clean(detail)}"


def clean(text, limit: int = MAX_DETAIL) -> str:
    r"""``text`` safe to print: terminal escape sequences removed, every other control or
    formatting character (newlines and tabs too) a space, at most ``limit`` characters (the
    rest cut, with ``...``).

    >>> clean("\x1b[31mred\x1b[0m\nline")
    'red line'
    """
    text = _CONTROL.sub(" ", _ESCAPES.sub("", str(text)))
    return text if len(text) <= limit else text[:limit - 3] + "..."


def fail(kind: str, detail: str, score: float = 0.0):
    """Raise a :class:`GradingFailure` with one reason."""
    raise GradingFailure([(kind, detail)], score)


def compare(got: np.ndarray, want: np.ndarray) -> float:
    """Relative error ``max |got - want| / max |want|`` (infinite if shapes differ or NaN)."""
    if got.shape != want.shape or not np.isfinite(got).all():
        return float("inf")
    scale = float(np.abs(want).max()) if want.size else 1.0
    return float(np.abs(got - want).max(initial=0.0)) / (scale or 1.0)


def judge_outputs(run, expected: dict, *, where: str = ""):
    """The verdict on one run of a tile program (:class:`ioattn.teach.answers.Run`).

    Parameters
    ----------
    run : Run
        The run, with its machine.
    expected : dict
        Output name -> the array it should hold.
    where : str
        Which inputs it ran on, for messages (e.g. ``"on hidden inputs, N = 40, d = 5"``).

    Returns
    -------
    IOCount
        The run's counts, when every output is right.

    Raises
    ------
    GradingFailure
        If the run raised or ran out of time, or an output is unwritten or wrong.
    """
    on = f" ({where})" if where else ""
    if run.error is not None:
        kind = "time" if run.error.startswith("ran past") else "error"
        fail(kind, f"{run.name}{on}: {run.error}")
    for name, want in expected.items():
        got = run.machine.fetch(name)
        unwritten = int(np.isnan(got).sum())
        if unwritten:
            fail("wrong", f"{unwritten:,} of the {got.size:,} entries of {name} were never "
                 f"written with mem.write{on}")
        err = compare(got, want)
        if err > TOLERANCE:
            fail("wrong", f"{name} is wrong{on}: largest error {err:.2e} relative to its largest "
                 "entry")
    return run.machine.memory.io
