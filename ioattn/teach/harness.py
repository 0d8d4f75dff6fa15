"""Calling a submission's function: a time limit, the audit, and whatever it raises.

:func:`call` runs the function once with the grader's arguments and returns a :class:`Call`; it
never raises because of the submission (an exception, a timeout, ``sys.exit``), so the grader can
say what happened. With a :class:`~ioattn.teach.memory.Referee` the memory is armed for the call:
its transfers are audited and timed, and touching slow memory without a transfer is recorded.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from dataclasses import dataclass

from . import session
from .audit import Audit
from .hooks import watching
from .memory import GradingTimeout, class_tampering

__all__ = ["Call", "call", "TIME_LIMIT"]

#: Seconds one call of a submission's function may take.
TIME_LIMIT = 60.0


@dataclass
class Call:
    """What one call of a submission's function did.

    Attributes
    ----------
    name : str
        The function's name, as messages quote it.
    returned : object
        Its return value (``None`` if it raised).
    error : BaseException or None
        What it raised, if anything.
    where : str
        The line of the submission's code the error came from (``"line 12 in f"``), if known.
    timed_out : bool
        Whether it ran past the time limit.
    seconds : float
        Wall-clock time of the call.
    """

    name: str
    returned: object = None
    error: BaseException | None = None
    where: str = ""
    timed_out: bool = False
    seconds: float = 0.0

    def describe_error(self) -> str:
        """``"ValueError: ... (line 3 in f)"`` for the error raised, or ``""``."""
        if self.error is None:
            return ""
        text = f"{type(self.error).__name__}: {self.error}".rstrip(": ")
        return f"{text} ({self.where})" if self.where else text


def _invoke(fn, args, kwargs):
    """The grader's frame around the submission: the audit stops here."""
    return fn(*args, **kwargs)


_BOUNDARY = _invoke.__code__


def call(fn, args=(), kwargs=None, *, name: str, referee=None,
         time_limit: float = TIME_LIMIT) -> Call:
    """Call ``fn(*args, **kwargs)`` as the submission's code and report what it did.

    Parameters
    ----------
    fn : callable
        The submission's function.
    args, kwargs
        Its arguments.
    name : str
        Its name in messages.
    referee : Referee, optional
        The referee of the memory passed in ``args``: armed (audited, timed) for the call.
    time_limit : float
        Seconds before the call is interrupted.
    """
    result = Call(name)
    if referee is not None:
        for what in class_tampering():
            referee.violate("counters", f"{what} was replaced on the grader's memory class")
        referee.audit = Audit(referee, fn, _BOUNDARY)
        referee.deadline = time.monotonic() + time_limit
    alarm = _Alarm(time_limit)
    watch = watching(referee, _BOUNDARY) if referee is not None else contextlib.nullcontext()
    start = time.perf_counter()
    try:
        with session.student_code(), alarm, watch:
            if referee is not None:
                referee.armed = True
            try:
                result.returned = _invoke(fn, args, kwargs or {})
            finally:
                if referee is not None:
                    referee.armed = False
    except GradingTimeout:
        result.timed_out = True
    except KeyboardInterrupt:
        raise
    except BaseException as exc:          # noqa: BLE001 (SystemExit too: it is the submission's)
        result.error = exc
        result.where = _where(exc)
    result.seconds = time.perf_counter() - start
    if referee is not None:
        result.timed_out = result.timed_out or referee.timed_out
        referee.audit.finish()
        referee.check_decoys()
        for what in class_tampering():
            referee.violate("counters", f"{what} was replaced on the grader's memory class")
    return result


def _where(exc: BaseException) -> str:
    """The last frame of the submission's code in ``exc``'s traceback."""
    last = ""
    tb = exc.__traceback__
    while tb is not None:
        module = tb.tb_frame.f_globals.get("__name__", "")
        if module != "ioattn" and not module.startswith("ioattn."):
            last = f"line {tb.tb_lineno} in {tb.tb_frame.f_code.co_name}"
        tb = tb.tb_next
    return last


class _Alarm:
    """A real-time alarm that raises :class:`GradingTimeout` in the main thread (a no-op where
    signals are not available; the memory's own deadline still applies to transfers)."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.active = (hasattr(signal, "setitimer")
                       and threading.current_thread() is threading.main_thread())
        self.previous = None

    def _fire(self, signum, frame):
        raise GradingTimeout(f"ran past the time limit of {self.seconds:g} s")

    def __enter__(self):
        if self.active:
            self.previous = signal.signal(signal.SIGALRM, self._fire)
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
        return self

    def __exit__(self, *exc):
        if self.active:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.previous)
        return False
