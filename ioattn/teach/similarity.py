"""Near-identical answer code across a class's submissions, found with copydetect.

The comparison is `copydetect <https://github.com/blingenf/copydetect>`_'s (MIT; Lingenfelter), an
implementation of the winnowing fingerprints of Schleimer, Wilkerson and Aiken, *Winnowing: local
algorithms for document fingerprinting* (SIGMOD 2003), the method of Stanford's MOSS. copydetect
tokenizes the code with Pygments and replaces every variable, attribute and function name by one
letter, dropping whitespace and comments, so renaming, reformatting and commenting do not hide a
copy; it then hashes every run of :data:`NOISE` characters of that token text (its
``noise_t``) and counts the tokens of each submission that are covered by runs the other one has
too. ioattn only chooses the inputs, combines copydetect's two scores into one and sorts; it does
no fingerprinting of its own.

A report for one assignment, from the students' notebooks and the student notebook they got::

    starter = answer_code("_build/assignments/matmul/student/matmul.ipynb")
    codes = {s: answer_code(f"submissions/{s}/matmul.ipynb", starter=starter) for s in ids}
    for pair in similar_pairs(codes, starter=starter):
        print(pair.text())

For a whole class, :func:`similar_in_class` does all of it: the handout's code and the code its
hints show are discounted (:func:`handout_code`), and every student is compared with every
classmate and with every public source of the assignment (:func:`public_sources`: the grader's
keys, and the repository's own honest solutions where the repository is at hand).

A pair is a lead for a person to read, not proof: two students who both copied the same outside
source look the same, and a copy rewritten line by line does not. **This is an aid to the
instructor, not a security boundary**: the sources are public, and code can be hidden from any
comparison of text (encoded and run with ``exec``, fetched at run time); :mod:`ioattn.teach.flags`
lists notebooks that do such things. Marks come from the grader's checks on hidden data, never
from this report.

Similarity is *containment both ways*: the share of one student's fingerprints found in the
other's code, and the share of the other's found in the first's, of which the larger is
reported. A paste renamed throughout is still whole in its source (copydetect replaces every
name), and a paste padded with code of one's own still contains all of the source: both score
near 100%. The price is that a short answer wholly inside a long one scores high too, which is
why students with less than :data:`MIN_TOKENS` of code of their own are left out, and the code
every student was given or shown is discounted first.

>>> solution = '''
... def tiled_matmul(mem, A, B, C):
...     (m, k), n = A.shape, B.shape[1]
...     for i in range(0, m, 4):
...         for j in range(0, n, 4):
...             acc = mem.allocate((min(4, m - i), min(4, n - j)))
...             for l in range(0, k, 4):
...                 a = mem.read(A, slice(i, i + 4), slice(l, l + 4))
...                 b = mem.read(B, slice(l, l + 4), slice(j, j + 4))
...                 acc += a @ b
...                 mem.free(a, b)
...             mem.write(C, acc, slice(i, i + 4), slice(j, j + 4))
...             mem.free(acc)
... '''
>>> renamed = solution.replace("acc", "total").replace("mem", "memory")
>>> [pair.text() for pair in similar_pairs({"ada": solution, "alan": renamed, "grace": ""})]
['ada and alan: 100% similar']
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from numbers import Real
from os import PathLike
from pathlib import Path

from .build import VARIANT_TAG, _need

__all__ = ["MIN_TOKENS", "NOISE", "Pair", "answer_code", "handout_code", "public_sources",
           "similar_in_class", "similar_pairs"]

#: copydetect's noise threshold ``k`` (its default): matches shorter than this many characters of
#: tokenized code are ignored. The guarantee threshold is the same, so the winnowing window is 1
#: and every k-gram is a fingerprint (copydetect's defaults too; classes are small).
NOISE = 25
#: A student whose own code (after the starter's is taken out) covers fewer characters of
#: tokenized code than this is skipped: too little to tell a copy from a coincidence.
MIN_TOKENS = 2 * NOISE
#: At most this many lines of shared code go in :attr:`Pair.shared`.
EXCERPT_LINES = 3


@dataclass(frozen=True)
class Pair:
    """Two students, or a student and a public source, whose answer code overlaps.

    Attributes
    ----------
    first, second : str
        The students' ids, ``first < second`` (or the student, then the source's name).
    similarity : float
        In [0, 1]: the larger of copydetect's two directional scores, each the share of one
        side's tokenized code (after the handout's is taken out) that is covered by fingerprints
        the other side has too. The larger one catches a copy padded with code of one's own
        (the copy is still whole in the padded code) as well as a near-identical one.
    shared : str
        A few lines of ``first``'s code from the longest stretch that both share ("" if none).
    first_in_second, second_in_first : float
        The two directional scores (0 when not given): the share of ``first``'s code found in
        ``second``'s, and the other way.
    """

    first: str
    second: str
    similarity: float
    shared: str = ""
    first_in_second: float = 0.0
    second_in_first: float = 0.0

    def text(self) -> str:
        """One line for a report; the two directions too when they differ by more than a
        tenth (a short code inside a longer one, or a padded copy).

        >>> Pair("ada", "alan", 0.968).text()
        'ada and alan: 97% similar'
        >>> Pair("ada", "key", 0.97, "", 0.97, 0.31).text()
        "ada and key: 97% similar (97% of ada's code is in key's, 31% of key's in ada's)"
        """
        line = f"{self.first} and {self.second}: {self.similarity:.0%} similar"
        if abs(self.first_in_second - self.second_in_first) <= 0.1:
            return line
        return (f"{line} ({self.first_in_second:.0%} of {self.first}'s code is in "
                f"{self.second}'s, {self.second_in_first:.0%} of {self.second}'s in "
                f"{self.first}'s)")


def _starter_lines(starter) -> set[str]:
    if starter is None:
        return set()
    if isinstance(starter, PathLike) or (isinstance(starter, str) and "\n" not in starter
                                         and starter.endswith(".ipynb")):
        starter = answer_code(starter)
    if not isinstance(starter, str):
        raise TypeError(f"starter must be a notebook path or its code as a str, "
                        f"not {type(starter).__name__}")
    return {line.strip() for line in starter.splitlines() if line.strip()}


def answer_code(notebook_path, starter=None) -> str:
    """The student's own code in a notebook.

    Parameters
    ----------
    notebook_path : path
        A Jupyter notebook (``.ipynb``, read with nbformat).
    starter : path or str, optional
        The notebook handed out (a path ending in ``.ipynb``), or its code as a str (for
        example ``answer_code(student_notebook)``): lines of the notebook that, stripped of
        indentation, are lines of the starter too are left out.

    Returns
    -------
    str
        The code cells' sources, in order and joined by blank lines, without the cell tagged
        ``variant`` (each student's parameters) and without the starter's lines.
    """
    nbformat = _need("nbformat")
    if not isinstance(notebook_path, (str, PathLike)):
        raise TypeError(f"notebook_path must be a path, not {type(notebook_path).__name__}")
    path = Path(notebook_path)
    if not path.is_file():
        raise FileNotFoundError(f"no notebook at {path}")
    given = _starter_lines(starter)
    nb = nbformat.read(path, as_version=4)
    cells = [c.source for c in nb.cells if c.cell_type == "code"
             and VARIANT_TAG not in c.get("metadata", {}).get("tags", [])]
    code = "\n\n".join(cells)
    if given:
        code = "\n".join(line for line in code.splitlines() if line.strip() not in given)
    return code


def _fingerprint(copydetect, name: str, code: str, boilerplate=None):
    return copydetect.CodeFingerprint(f"{name}.py", NOISE, 1, boilerplate=boilerplate,
                                      language="python", fp=io.StringIO(code))


def _excerpt(code: str, slices) -> str:
    """Whole lines around the longest slice of ``code`` that copydetect marked as shared."""
    if len(slices) == 0 or len(slices[0]) == 0:
        return ""
    longest = max(range(len(slices[0])), key=lambda i: slices[1][i] - slices[0][i])
    start, end = int(slices[0][longest]), int(slices[1][longest])
    start = code.rfind("\n", 0, start) + 1
    stop = code.find("\n", end)
    lines = [line for line in code[start:None if stop < 0 else stop].splitlines()
             if line.strip()]
    return "\n".join(lines[:EXCERPT_LINES])


def _check(codes, starter, threshold) -> None:
    if not isinstance(codes, dict):
        raise TypeError(f"codes must be a dict of student id -> answer code, "
                        f"not {type(codes).__name__}")
    for student, code in codes.items():
        if not isinstance(student, str):
            raise TypeError(f"codes' keys must be student ids (str), not {student!r}")
        if not isinstance(code, str):
            raise TypeError(f"codes[{student!r}] must be the answer code as a str, "
                            f"not {type(code).__name__}")
    if not isinstance(starter, str):
        raise TypeError(f"starter must be the starter code as a str, not {type(starter).__name__}")
    if isinstance(threshold, bool) or not isinstance(threshold, Real):
        raise TypeError(f"threshold must be a number in (0, 1], not {threshold!r}")
    if not 0 < threshold <= 1:                     # NaN too
        raise ValueError(f"threshold must be in (0, 1], not {threshold!r}")


def similar_pairs(codes: dict[str, str], *, starter: str = "",
                  threshold: float = 0.8, known: dict[str, str] | None = None) -> list[Pair]:
    """Every pair of students whose answer code is at least ``threshold`` similar.

    Parameters
    ----------
    codes : dict of str to str
        Student id -> answer code (Python; for example from :func:`answer_code`).
    starter : str
        Code every student was given (the student notebook's). copydetect drops the
        fingerprints it has from every submission (its ``boilerplate``), so the starter's code
        counts neither as shared nor towards a submission's length. (With a starter, copydetect
        also counts a stretch repeated within one submission once, as its own report does.)
    threshold : float
        In (0, 1]: the least :attr:`Pair.similarity` reported.
    known : dict of str to str, optional
        Name -> code of sources no student should copy from (the grader's own answers,
        :mod:`ioattn.teach.keys`, the repository's solutions). A student and a source are a
        pair when at least ``threshold`` of the student's code is found in the source, or of
        the source's in the student's (a source pasted whole among code of one's own).

    Returns
    -------
    list of Pair
        Most similar first (then by the ids). A student whose own code covers fewer than
        :data:`MIN_TOKENS` characters of tokenized code (empty, or only the starter) is in no pair.

    Raises
    ------
    TypeError, ValueError
        For codes that are not a dict of str to str, a starter that is not a str, or a
        threshold outside (0, 1].
    """
    _check(codes, starter, threshold)
    copydetect = _need("copydetect")
    boilerplate = None
    if starter.strip():
        boilerplate = sorted(set(_fingerprint(copydetect, "starter", starter).hashes))
    prints = {}
    for student in sorted(codes):
        fingerprint = _fingerprint(copydetect, student, codes[student], boilerplate)
        if fingerprint.token_coverage >= MIN_TOKENS:
            prints[student] = fingerprint
    students = list(prints)
    pairs = []
    for i, first in enumerate(students):
        for second in students[i + 1:]:
            pair = _pair(copydetect, first, prints[first], second, prints[second], threshold)
            if pair is not None:
                pairs.append(pair)
    for name in sorted(known or {}):
        source = _fingerprint(copydetect, name, known[name], boilerplate)
        if source.token_coverage < MIN_TOKENS:
            continue
        for student in students:
            pair = _pair(copydetect, student, prints[student], name, source, threshold)
            if pair is not None:
                pairs.append(pair)
    return sorted(pairs, key=lambda p: (-p.similarity, p.first, p.second))


def _pair(copydetect, first: str, one, second: str, other, threshold: float):
    """The :class:`Pair` of two fingerprinted codes if the larger containment reaches
    ``threshold``, else ``None``."""
    _, scores, slices = copydetect.compare_files(one, other)
    shares = [min(1.0, max(0.0, float(x))) for x in scores]
    similarity = max(shares)
    if similarity < threshold:
        return None
    return Pair(first, second, similarity, _excerpt(one.raw_code, slices[0]), *shares)


# ---------------------------------------------------------------------- a whole class
#: Markdown code: fenced blocks and inline spans (the hints' code, shown to every student).
_FENCED = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
_INLINE = re.compile(r"`([^`\n]+)`")


def handout_code(assignment: str) -> str:
    """The code every student of ``assignment`` was given or shown, to be discounted.

    The shipped notebook's code cells, the code its text shows (fenced blocks and inline code,
    such as the hints' ``m[...] = maximum(m, S.max(axis=1))``), and the code written in its
    code cells' comments, one fragment a line. Honest students who follow the same hints write
    those lines; they are no sign of copying.
    """
    from .build import notebook_source

    jupytext = _need("jupytext")
    notebook = jupytext.read(notebook_source(assignment))
    parts = []
    for cell in notebook.cells:
        if cell.cell_type == "code":
            parts.append(cell.source)
            parts += [line.split("#", 1)[1].strip() for line in cell.source.splitlines()
                      if "#" in line]
        elif cell.cell_type == "markdown":
            parts += _FENCED.findall(cell.source)
            parts += _INLINE.findall(cell.source)
    return "\n".join(parts)


def public_sources(assignment: str) -> dict[str, str]:
    """Name -> code of the public sources of ``assignment`` no student should paste: the
    grader's keys module (:mod:`ioattn.teach.keys`), and the repository's honest solutions
    (``tests/teach/solutions/<assignment>*.py``) when ioattn runs from a checkout of the
    repository (an installed package has none)."""
    from importlib.util import find_spec

    sources = {}
    spec = find_spec(f"ioattn.teach.keys.{assignment}")
    if spec is not None and spec.origin:
        sources[f"ioattn.teach.keys.{assignment}"] = Path(spec.origin).read_text(encoding="utf-8")
    solutions = Path(__file__).resolve().parents[2] / "tests" / "teach" / "solutions"
    if solutions.is_dir():
        for path in sorted(solutions.glob(f"{assignment}*.py")):
            sources[f"tests/teach/solutions/{path.name}"] = path.read_text(encoding="utf-8")
    return sources


def similar_in_class(assignment: str, submissions, threshold: float = 0.8) -> list[Pair]:
    """:func:`similar_pairs` for a class of ``assignment``: every student against every
    classmate and every public source (:func:`public_sources`), the handout's code and its
    hints' discounted (:func:`handout_code`).

    Parameters
    ----------
    assignment : str
        The assignment's name.
    submissions : iterable of (str or None, path)
        ``(student, notebook path)``; a student of ``None`` is named after the file, and a
        student with several files is named with each file's path. Notebooks that cannot be
        read are left out (the grading reports say why).
    threshold : float
        As for :func:`similar_pairs`.
    """
    submissions = [(student, Path(path)) for student, path in submissions]
    students = [student for student, _ in submissions]
    codes = {}
    for student, path in submissions:
        label = student or path.stem
        if students.count(student) > 1:         # two files of one student: both, by path
            label = f"{label} ({path})"
        try:
            codes[label] = answer_code(path)
        except (OSError, ValueError):
            continue
    return similar_pairs(codes, threshold=threshold, starter=handout_code(assignment),
                         known=public_sources(assignment))
