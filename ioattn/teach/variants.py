"""Per-student variants: parameters derived from the student id, the same every time.

A variant is a pure function of ``(course, assignment, student)``: the SHA-256 of the three names
seeds a NumPy generator, and each assignment draws its parameters (sizes, cache size, the seed of
the example data) from it. ``ioattn assign`` writes them into the student's notebook and
``ioattn grade`` derives them again from the id the instructor gives, never from the notebook, so
a submission is always checked against its own variant.

Examples
--------
>>> a = student_seed("matmul", "ada")
>>> a == student_seed("matmul", "ada"), a == student_seed("matmul", "alan")
(True, False)
>>> check_student_id(" ada ")
'ada'
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Variant", "check_course", "check_student_id", "student_rng", "student_seed"]

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@+-]{0,63}")
_COURSE = re.compile(r"[A-Za-z0-9_.@+-]{0,64}")


def check_student_id(student) -> str:
    """``student`` stripped of surrounding blanks; a clear ``ValueError`` if it is not an id.

    An id is 1 to 64 characters: letters, digits and ``_ . @ + -``, starting with a letter or a
    digit (an e-mail address or a roster number will do; it also names files).
    """
    if not isinstance(student, str):
        raise TypeError(f"a student id is a string, got {type(student).__name__}")
    text = student.strip()
    if not _ID.fullmatch(text):
        raise ValueError(
            f"invalid student id {student!r}: use 1 to 64 letters, digits and _ . @ + -, "
            "starting with a letter or a digit")
    return text


def check_course(course) -> str:
    """``course`` stripped; a clear ``ValueError`` unless it is up to 64 letters, digits and
    ``_ . @ + -`` (the empty name is the default course)."""
    if not isinstance(course, str):
        raise TypeError(f"a course name is a string, got {type(course).__name__}")
    text = course.strip()
    if not _COURSE.fullmatch(text):
        raise ValueError(f"invalid course name {course!r}: use up to 64 letters, digits and "
                         "_ . @ + -")
    return text


def student_seed(assignment: str, student: str, course: str = "") -> int:
    """A 63-bit seed from the course, the assignment and the student id (SHA-256)."""
    key = "\x00".join(("ioattn", check_course(course), assignment, check_student_id(student)))
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") >> 1


def student_rng(assignment: str, student: str, course: str = "") -> np.random.Generator:
    """The generator a variant's parameters are drawn from."""
    return np.random.default_rng(student_seed(assignment, student, course))


@dataclass(frozen=True)
class Variant:
    """One student's parameters for one assignment.

    Attributes
    ----------
    assignment, student, course : str
        Who and what this variant is for.
    params : dict
        Name -> value, in the order the notebook shows them (numbers, strings, and lists or
        tuples of them).
    """

    assignment: str
    student: str
    course: str = ""
    params: dict = field(default_factory=dict)

    def cell_source(self) -> str:
        """The notebook cell that sets this variant's parameters, as Python literals."""
        course = f" --course {self.course}" if self.course else ""
        lines = [
            f"# Your parameters for {self.assignment!r}, from `ioattn assign {self.assignment} "
            f"--student {self.student}{course}`.",
            "# The grader derives them again from your id: changing them here changes nothing "
            "but your own checks.",
            f"STUDENT = {self.student!r}",
            f"COURSE = {self.course!r}",
        ]
        lines += [f"{name} = {_literal(value)}" for name, value in self.params.items()]
        return "\n".join(lines)


def _literal(value) -> str:
    """``value`` as a Python literal that reads back equal (numbers, strings, nested lists)."""
    if isinstance(value, (list, tuple)):
        items = ", ".join(_literal(v) for v in value)
        if isinstance(value, tuple):
            return f"({items}{',' if len(value) == 1 else ''})"
        return f"[{items}]"
    if isinstance(value, (np.integer, np.floating)):
        value = value.item()
    return repr(value)
