"""The grading session inside the kernel that runs a submission.

``ioattn grade`` puts one cell before the submission's own cells::

    import ioattn.teach.session
    ioattn.teach.session.start("matmul", "ada", seed=..., course="")

so the hidden tests know whose variant to check and which seed draws the hidden data, without
reading anything the submission wrote. :func:`start` also switches off, for the submission, the
functions an assignment asks students to do without (``min_io`` in the pebbling assignment, the
crossover finders in the crossover one): called from the submission they raise
:class:`SwitchedOff` and the call is recorded; the grader's own checks run them inside
:func:`privileged`.
"""

from __future__ import annotations

import contextlib
import importlib
from dataclasses import dataclass, field

__all__ = ["Session", "SwitchedOff", "current", "privileged", "scoped", "start", "student_code"]


class SwitchedOff(RuntimeError):
    """A function the assignment asks students not to use was called while grading."""


@dataclass
class Session:
    """Who is being graded, with which hidden seed, and what the submission did wrong outside
    any single check (``blocked``: calls of switched-off functions)."""

    assignment: str
    student: str
    seed: int
    course: str = ""
    blocked: list = field(default_factory=list)


_SESSION: Session | None = None
_PRIVILEGED = [False]


def current() -> Session | None:
    """The session started in this process, or ``None`` (a student running public checks)."""
    return _SESSION


def start(assignment: str, student: str, *, seed: int, course: str = "") -> Session:
    """Begin grading ``student``'s submission of ``assignment`` (once per process)."""
    global _SESSION
    from .assignments import get
    from .variants import check_student_id

    if _SESSION is not None:
        _SESSION.blocked.append("it started a second grading session")
        raise RuntimeError("a grading session is already running in this kernel")
    spec = get(assignment)
    _SESSION = Session(assignment, check_student_id(student), int(seed), course)
    for target, advice in spec.switched_off.items():
        _switch_off(target, advice)
    return _SESSION


@contextlib.contextmanager
def scoped(assignment: str, student: str, *, seed: int, course: str = ""):
    """A session for the block only, its switched-off functions restored after (for grading
    in a process that goes on, such as a test)."""
    global _SESSION
    if _SESSION is not None:
        raise RuntimeError("a grading session is already running in this process")
    undo: list = []
    try:
        from .assignments import get
        from .variants import check_student_id

        spec = get(assignment)
        _SESSION = Session(assignment, check_student_id(student), int(seed), course)
        for target, advice in spec.switched_off.items():
            undo += _switch_off(target, advice)
        yield _SESSION
    finally:
        _SESSION = None
        for module, name, original in reversed(undo):
            setattr(module, name, original)


@contextlib.contextmanager
def privileged():
    """The grader's own code: switched-off functions work inside this block."""
    before = _PRIVILEGED[0]
    _PRIVILEGED[0] = True
    try:
        yield
    finally:
        _PRIVILEGED[0] = before


@contextlib.contextmanager
def student_code():
    """The submission's code, called by the grader: switched-off functions raise again."""
    before = _PRIVILEGED[0]
    _PRIVILEGED[0] = False
    try:
        yield
    finally:
        _PRIVILEGED[0] = before


class _Off:
    """Stands in for a switched-off function; calls it only for the grader."""

    def __init__(self, original, name: str, advice: str):
        self.original, self.name, self.advice = original, name, advice
        self.__wrapped__ = original
        self.__doc__ = getattr(original, "__doc__", None)

    def __call__(self, *args, **kwargs):
        if _PRIVILEGED[0]:
            return self.original(*args, **kwargs)
        if _SESSION is not None:
            _SESSION.blocked.append(f"it called {self.name}, which is switched off while "
                                    f"grading: {self.advice}")
        raise SwitchedOff(f"{self.name} is switched off while grading: {self.advice}")


def _switch_off(target: str, advice: str) -> list:
    """Replace ``module.function`` (and the same function re-exported by its parent packages);
    return ``(module, name, original)`` for each replacement."""
    module_name, _, name = target.rpartition(".")
    module = importlib.import_module(module_name)
    original = getattr(module, name)
    off = _Off(original, target, advice)
    done = []
    for alias in _aliases(module_name):
        mod = importlib.import_module(alias)
        if getattr(mod, name, None) is original:
            setattr(mod, name, off)
            done.append((mod, name, original))
    return done


def _aliases(module_name: str) -> list[str]:
    """The module and its parent packages (which re-export its functions)."""
    parts = module_name.split(".")
    return [".".join(parts[:k]) for k in range(len(parts), 0, -1)]
