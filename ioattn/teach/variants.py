"""Per-student variants: parameters derived from the student id, the same every time.

A variant is a pure function of ``(course, assignment, student)``: the SHA-256 of the three names
seeds a NumPy generator, and each assignment draws its parameters (sizes, cache size, the seed of
the example data) from it. ``ioattn assign`` writes them into the student's notebook and
``ioattn grade`` derives them again from the id the instructor gives, never from the notebook, so
a submission is always checked against its own variant.

The hidden data a grading checks a variant on are not a function of public names: they come from
the instructor's secret grading key (:func:`grading_key`, a file only its owner may read) by
:func:`hidden_rng`, an HMAC-SHA256 of the key over the course, the assignment, the student and
the question. So every student has hidden instances of their own, and nobody without the key
can compute them, whatever code they read.

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
import hmac
import os
import re
import secrets
import stat
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = ["KEY_ENV", "Variant", "check_course", "check_student_id", "grading_key",
           "hidden_rng", "key_fingerprint", "key_path", "student_rng", "student_seed"]

#: The environment variable that names the grading key's file (default: :func:`key_path`).
KEY_ENV = "IOATTN_GRADING_KEY"
#: Bytes of a new grading key (written as hexadecimal).
KEY_BYTES = 32

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


def key_path(path=None) -> Path:
    """Where the grading key is: ``path``, else the file ``$IOATTN_GRADING_KEY`` names, else
    ``~/.config/ioattn/grading.key``."""
    if path is not None:
        return Path(path).expanduser()
    given = os.environ.get(KEY_ENV, "").strip()
    if given:
        return Path(given).expanduser()
    return Path.home() / ".config" / "ioattn" / "grading.key"


def grading_key(path=None, *, create: bool = True) -> bytes:
    """The instructor's secret grading key, read from :func:`key_path` (``path``).

    Where the file does not exist and ``create`` is true, a new random key is written there
    first, readable by its owner only (mode 0600, in a folder of mode 0700). A clear
    ``ValueError`` when the file is readable by other users, is not a file, or holds fewer than
    16 bytes; ``FileNotFoundError`` when it is missing and ``create`` is false.
    """
    where = key_path(path)
    if not where.exists() and create:
        _new_key(where)
    if not where.exists():
        raise FileNotFoundError(f"no grading key at {where}")
    info = where.stat()
    if not stat.S_ISREG(info.st_mode):
        raise ValueError(f"the grading key {where} is not a file")
    if info.st_mode & 0o077:
        raise ValueError(f"the grading key {where} may be read by other users: make it yours "
                         f"alone (chmod 600 {where})")
    key = where.read_bytes().strip()
    if len(key) < 16:
        raise ValueError(f"the grading key {where} is too short (at least 16 bytes; delete it "
                         "and a new one is made)")
    return key


def _new_key(where: Path) -> None:
    """Write a fresh random key to ``where`` (mode 0600), unless one appeared meanwhile."""
    where.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        fd = os.open(where, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    with os.fdopen(fd, "w") as out:
        out.write(secrets.token_hex(KEY_BYTES) + "\n")


def key_fingerprint(key: bytes) -> str:
    """A short public name of a grading key (12 hexadecimal digits of a hash of it): reports
    record it, so two gradings can be told to have used the same key; the key itself cannot be
    found from it."""
    return hashlib.sha256(b"ioattn grading key\x00" + bytes(key)).hexdigest()[:12]


def hidden_rng(key: bytes, assignment: str, student: str, question: str, course: str = "",
               seed: int | None = None) -> np.random.Generator:
    """The generator of one student's hidden data for one question: seeded with the
    HMAC-SHA256, under the grading ``key``, of the course, the assignment, the student, the
    question and, when given, a ``seed`` (a fresh draw for a regrading, still per student)."""
    text = "\x00".join(("ioattn hidden data", check_course(course), assignment,
                         check_student_id(student), question,
                         "" if seed is None else str(int(seed))))
    digest = hmac.new(bytes(key), text.encode(), hashlib.sha256).digest()
    return np.random.default_rng(int.from_bytes(digest, "big"))


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
