"""The instructor guide's round of commands works as printed, in a fresh virtual environment.

``book/assignments/guide.md`` has a section "A whole round, step by step" with one ``bash``
block: make a virtual environment, install ``ioattn[teach]`` from the repository by URL, write
a roster, ``ioattn assign``, collect the submissions, ``chmod``, ``ioattn grade``, ``cat
grades.csv``. The test below runs that block's lines verbatim, in order, with bash (``-euo
pipefail``), in an empty folder, so only relative paths can work. It changes exactly two things:

(a) in the line ``pip install "ioattn[teach] @ git+https://github.com/OWNER/NAME.git@COMMIT"``
    only the URL, which the book's build writes as its own repository at its commit
    (``book/_ext/repository.py``): here it is a git repository made of a copy of this
    checkout, at its one commit, ``git+file://localhost<copy>@<sha>``, so pip clones it and
    builds the wheel (and the notebooks it ships as package data) as it would from the real
    repository;

(b) the students' step, between ``ioattn assign`` and ``chmod``: the block is cut at its
    ``chmod`` line and run as two scripts; between them the test hands in three notebooks,
    each made from that student's own handed-out copy (so its metadata and variant cell are
    the ones ``ioattn assign`` wrote), with the starter cell ``def tiled_matmul`` replaced:
    ada honestly (the reference tile program, and a cell that prints and appends to a
    progress log), alan with a bug (``cheats/buggy_off_by_one.py``), grace with a cheat
    (``cheats/referee_patch_judge.py``). The second script starts with the block's own
    activation line, since a shell's ``activate`` does not outlive it.

It proves that a reader who copies the block gets a working round: the install pulls in
everything grading needs, the relative paths agree with each other, and the grades are the
expected ones (5, 0, 0). The students' own commands (the ``bash`` block of the section
"Collecting them") run too, verbatim but for the same URL, in Ada's folder, on her notebook.
pip needs the package index: without it, the test fails.
"""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import nbformat

from .helpers import solution
from .test_cheats import EXPECT, cells_of

#: The address the guide's install lines give for the package (the build writes its own).
PACKAGE_URL = "git+https://github.com/OWNER/NAME.git@COMMIT"

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "book" / "assignments" / "guide.md"
HEADING = "## A whole round, step by step"
STUDENTS_HEADING = "## Collecting them"
INSTALL = f'pip install "ioattn[teach] @ {PACKAGE_URL}"'
#: Seconds for both scripts together: only a guard against a hang (a fresh venv's install and
#: three gradings take minutes, several times as long on a loaded machine).
BUDGET = 1800
STUDENTS = {"ada": 5, "alan": 0, "grace": 0}    # honest, buggy, cheating: their totals
CHEAT = "referee_patch_judge"
HONEST_LOG = 'print("tiled_matmul is ready")\nopen("progress.log", "a").write("ok\\n")\n'
#: What the copy of the checkout leaves out: nothing the wheel is built from.
JUNK = shutil.ignore_patterns(".git", ".venv", "_build", "build", "dist", "*.egg-info",
                              "__pycache__", ".pytest_cache", ".hypothesis", ".ruff_cache",
                              ".ipynb_checkpoints", "node_modules")


def guide_block(heading: str = HEADING) -> list[str]:
    """The lines of the one ``bash`` block of the guide's section ``heading``."""
    text = GUIDE.read_text(encoding="utf-8")
    assert text.count(heading + "\n") == 1, f"{GUIDE}: no section {heading!r} (or several)"
    section = text.split(heading + "\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```bash\n(.*?)^```$", section, flags=re.M | re.S)
    assert len(blocks) == 1, f"{GUIDE}, {heading!r}: expected one ```bash block, " \
        f"found {len(blocks)}"
    return blocks[0].splitlines()


def git_copy(checkout: Path) -> str:
    """``git+file://`` URL of ``checkout`` made a git repository of one commit, at it."""
    git = ["git", "-C", str(checkout), "-c", "user.name=ioattn tests",
           "-c", "user.email=tests@ioattn.invalid", "-c", "commit.gpgsign=false"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "the checkout"]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    sha = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True,
                         text=True).stdout.strip()
    return f"git+file://localhost{checkout}@{sha}"      # a host: PEP 508 wants one


def the_line(lines: list[str], pattern: str) -> int:
    """The index of the one line of ``lines`` that matches ``pattern`` from its start."""
    found = [i for i, line in enumerate(lines) if re.match(pattern, line)]
    assert len(found) == 1, f"{GUIDE}, {HEADING!r}: expected one line {pattern!r}, got " \
        f"{[lines[i] for i in found]}"
    return found[0]


def hand_in(folder: Path, student: str, cells: list[str]) -> None:
    """``submissions/<student>/matmul.ipynb``: the student's own handed-out notebook, with the
    starter cell ``def tiled_matmul`` replaced by ``cells``."""
    nb = nbformat.read(folder / "handout/matmul/students" / student / "matmul.ipynb",
                       as_version=4)
    (stub,) = [c for c in nb.cells
               if c.cell_type == "code" and c.source.startswith("def tiled_matmul")]
    at = nb.cells.index(stub)
    nb.cells[at:at + 1] = [nbformat.v4.new_code_cell(c) for c in cells]
    target = folder / "submissions" / student / "matmul.ipynb"
    target.parent.mkdir(parents=True)
    nbformat.write(nb, target)


def clean_env() -> dict[str, str]:
    """This environment, without what would make a Python import from elsewhere."""
    return {k: v for k, v in os.environ.items()
            if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}


def run(script: str, folder: Path, deadline: float, what: str) -> subprocess.CompletedProcess:
    try:
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=folder,
                              env=clean_env(),
                              capture_output=True, text=True,
                              timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"{what} ran past the test's {BUDGET} s:\n{exc.stdout}\n"
                             f"{exc.stderr}") from None
    return done


def test_the_guides_round_runs_verbatim_in_a_fresh_venv(tmp_path):
    deadline = time.monotonic() + BUDGET
    lines = guide_block()
    install = the_line(lines, re.escape(INSTALL) + r"\s*$")
    assign = the_line(lines, r"ioattn assign ")
    chmod = the_line(lines, r"chmod ")
    activate = the_line(lines, r"(\.|source) \S+/bin/activate\s*$")
    assert activate < install < assign < chmod, "the block's steps are out of order"

    checkout = tmp_path / "checkout"            # (a) this checkout, copied, as a repository
    shutil.copytree(ROOT, checkout, ignore=JUNK, symlinks=True)
    url = git_copy(checkout)
    lines[install] = lines[install].replace(PACKAGE_URL, url)
    folder = tmp_path / "class"
    folder.mkdir()

    first = run("\n".join(lines[:chmod]) + "\n", folder, deadline, "the commands up to chmod")
    assert first.returncode == 0, (
        ("pip could not install the package (is the package index reachable? these tests "
         "need it)" if not (folder / "ioattn-env/bin/ioattn").exists()
         else "the commands up to chmod failed")
        + f" (exit {first.returncode}):\n{first.stdout[-4000:]}\n{first.stderr[-4000:]}")
    installed = subprocess.run([folder / "ioattn-env/bin/python", "-c",
                                "import ioattn; print(ioattn.__file__)"],
                               capture_output=True, text=True, check=True, cwd=tmp_path,
                               env=clean_env())
    assert Path(installed.stdout.strip()).is_relative_to(folder / "ioattn-env"), \
        installed.stdout                        # the wheel, not the checkout

    # (b) the students' step
    assert EXPECT[CHEAT]["q1"] == EXPECT[CHEAT]["q2"] == 0, EXPECT[CHEAT]
    assert sorted((folder / "handout/matmul/students").iterdir()) == \
        [folder / "handout/matmul/students" / s for s in sorted(STUDENTS)]
    hand_in(folder, "ada", [solution("matmul"), HONEST_LOG])
    hand_in(folder, "alan", cells_of("buggy_off_by_one"))
    hand_in(folder, "grace", cells_of(CHEAT))

    second = run("\n".join([lines[activate], *lines[chmod:]]) + "\n", folder, deadline,
                 "the commands from chmod on")
    assert second.returncode == 0, \
        f"exit {second.returncode}:\n{second.stdout[-6000:]}\n{second.stderr[-4000:]}"
    sheet = (folder / "grades.csv").read_text(encoding="utf-8")
    assert sheet.strip() and sheet.strip() in second.stdout   # `cat grades.csv` printed it
    rows = {r["student"]: r for r in csv.DictReader(io.StringIO(sheet))}
    assert sorted(rows) == sorted(STUDENTS), sheet
    for student, total in STUDENTS.items():
        row = rows[student]
        assert (row["assignment"], row["error"], row["possible"]) == ("matmul", "", "5"), row
        assert float(row["total"]) == total, (student, row)
    assert "never written" in rows["alan"]["reasons"], rows["alan"]
    assert (folder / "submissions").stat().st_mode & 0o077 == 0    # chmod -R go-rwx ran

    # the students' own commands, in Ada's folder, the package already installed by the same line
    theirs = guide_block(STUDENTS_HEADING)
    (pip,) = [i for i, line in enumerate(theirs) if line.startswith("pip install ")]
    assert theirs[pip] == INSTALL, theirs
    ada = folder / "submissions" / "ada"
    script = "\n".join([f". {folder}/ioattn-env/bin/activate", *theirs[pip + 1:]]) + "\n"
    third = run(script, ada, deadline, "the students' commands")
    assert third.returncode == 0, f"exit {third.returncode}:\n{third.stdout}\n{third.stderr}"
    assert "total 5/5" in third.stdout, third.stdout


def test_the_book_writes_its_own_repository_into_the_install_lines():
    """The build replaces :data:`PACKAGE_URL` in the guide by the repository it is built in, at
    its commit, so the printed line installs the package the guide describes."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("repository", ROOT / "book/_ext/repository.py")
    repository = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, repository)       # dataclasses look their module up
    spec.loader.exec_module(repository)
    assert repository.PACKAGE_URL == PACKAGE_URL
    text = GUIDE.read_text(encoding="utf-8")
    assert text.count(PACKAGE_URL) >= 3                # the round, the box, the students
    sha = "0123456789abcdef0123456789abcdef01234567"
    repo = repository.from_environment({"GITHUB_REPOSITORY": "ann/fork", "GITHUB_SHA": sha})
    built = repository.with_package_url(text, repo)
    assert PACKAGE_URL not in built
    assert f'pip install "ioattn[teach] @ git+https://github.com/ann/fork.git@{sha}"' in built
    assert repository.with_package_url(text, None) == text
