"""Python's audit hooks (PEP 578), watching the ways around opaque handles while a submission runs.

A submission could try to reach the true values, or the referee, without asking the memory: by
searching the garbage collector or walking up the stack into the grader's frames; or keep values
outside the cache in files. Each of these raises an audit event; while a
:class:`~ioattn.teach.memory.Referee` is armed, :func:`watching` records it as a violation (events
from other threads, and the grader's own, are ignored). An audit hook cannot be removed, so one is
installed per process, the first time it is needed, and does nothing when no referee is armed.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading

__all__ = ["watching"]

_STATE: list = [None]          # (referee, thread id, boundary code) while a call is watched
_INSTALLED = [False]
_CODE_SUFFIXES = (".py", ".pyc", ".pyi", ".so", ".pyd", ".pth", ".json", ".mo", ".dll", ".dylib")


@contextlib.contextmanager
def watching(referee, boundary):
    """Record the submission's audit events on ``referee`` during the block."""
    if not _INSTALLED[0]:
        sys.addaudithook(_hook)
        _INSTALLED[0] = True
    before = _STATE[0]
    _STATE[0] = (referee, threading.get_ident(), boundary)
    try:
        yield
    finally:
        _STATE[0] = before


def _hook(event: str, args) -> None:
    state = _STATE[0]
    if state is None or not event.startswith(("gc.", "sys._", "open")):
        return
    referee, thread, boundary = state
    if threading.get_ident() != thread:
        return
    _STATE[0] = None                         # no events from the hook's own work
    try:
        _judge(referee, boundary, event, args)
    finally:
        _STATE[0] = state


def _judge(referee, boundary, event: str, args) -> None:
    if event in ("gc.get_objects", "gc.get_referrers", "gc.get_referents"):
        referee.violate("uncounted", f"it searched the garbage collector ({event}): the values "
                        "in slow memory reach the cache only through mem.read")
    elif event == "sys._current_frames":
        referee.violate("uncounted", "it looked at every thread's stack (sys._current_frames)")
    elif event == "sys._getframe" and args and not _own_frame(args[0], boundary):
        referee.violate("uncounted", "it looked at the grader's frames (sys._getframe): only "
                        "its own are its business")
    elif event == "open" and args and _data_file(args[0]):
        referee.violate("cache", f"it opened the file {args[0]!r}: values kept in files are "
                        "outside the cache")


def _own_frame(frame, boundary) -> bool:
    """Whether ``frame`` is the submission's: below the grader's call, and not ioattn's."""
    f, steps = frame, 0
    while f is not None and steps < 500:
        if f.f_code is boundary:
            return f is not frame
        if f.f_globals.get("__name__", "").startswith("ioattn.teach") and f is frame:
            return False
        f, steps = f.f_back, steps + 1
    return False


def _data_file(path) -> bool:
    if isinstance(path, int):                # an open file descriptor
        return True
    try:
        name = os.fsdecode(path)
    except TypeError:
        return False
    return not name.endswith(_CODE_SUFFIXES) and not name.startswith("/dev/")
