"""The notebooks run where students open them: in a fresh virtual environment that has nothing
of this repository, each notebook's set-up cell installs ioattn, and then every cell runs.

(a) From the wheel: the site's ``notebooks/`` folder is copied out of the built book, wheel and
all, and every student notebook and every practice notebook runs in a kernel of a fresh venv;
the first set-up cell installs the wheel beside it (with its dependencies, from the package
index). Before that, three failures of the set-up cell are shown to be one clear sentence, with
no traceback: no wheel and no repository known; a wheel, but no package index for its
dependencies; a repository that cannot be reached.

(b) From the repository: a local git repository of this checkout stands in for GitHub, and every
set-up cell names it (``ioattn @ git+file://...@<sha>``, as the published notebooks name
``git+https://github.com/<owner>/<name>.git@<sha>``); there is no wheel. The first set-up cell
installs from it; the package installed is checked file for file against the wheel's (so against
(a)), and each notebook then runs its set-up cell and the code cell after it, which imports what
the notebook uses. Running every cell twice would add the whole book's execution time again;
the files being the same, it would run the same code.

The kernels see neither this repository's ioattn nor the test's environment: no ``PYTHONPATH``,
no user site, their working folder a copy outside the repository, and the test checks where the
kernel imports ioattn from. The only network used is the package index (pip, as in CI). The
time limits are hang guards only.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import time
import venv
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest

from .conftest import ROOT
from .test_notebooks import _pages, notebooks

#: A hang guard per cell, per pip run and per notebook (seconds); never a measure of speed.
CELL_TIMEOUT = 1800
PIP_TIMEOUT = 1800
#: Cells slower than this (seconds, on the machine at hand) are listed in the test's output.
SLOW = 10
#: The exceptions a practice notebook's own checks may raise while its answers are still ``...``
#: (``check`` reports a wrong answer as a GradingFailure); an import or name error is a fault.
UNFINISHED = {"GradingFailure", "AssertionError", "TypeError", "ValueError", "AttributeError",
              "IndexError", "RuntimeError"}


# -------------------------------------------------------------------- the fresh environment
class Fresh:
    """A fresh venv at ``path`` with the newest pip and ipykernel (what Jupyter or Colab
    brings), and no ioattn; its kernels run with an environment that names nothing of the
    repository."""

    def __init__(self, path: Path):
        self.path = path
        venv.EnvBuilder(with_pip=True, clear=True).create(path)
        self.python = path / "bin" / "python"
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV",
                                 "PYTHONSAFEPATH", "JUPYTER_PATH", "IOATTN_BOOK_HTML")}
        self.env |= {"PYTHONNOUSERSITE": "1", "VIRTUAL_ENV": str(path),
                     "PATH": f"{path / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}
        # pip as a student has it (the one Python bundles may be too old to read a
        # git+file URL, whose host is empty), and the kernel.
        self.pip("install", "--quiet", "--upgrade", "pip")
        self.pip("install", "--quiet", "ipykernel")
        specs = path / "kernelspecs"
        (specs / "fresh").mkdir(parents=True)
        (specs / "fresh" / "kernel.json").write_text(json.dumps({
            "argv": [str(self.python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "fresh", "language": "python"}))
        self.specs = specs

    def pip(self, *args):
        proc = subprocess.run([str(self.python), "-m", "pip", *args], env=self.env,
                              cwd=self.path, capture_output=True, text=True, timeout=PIP_TIMEOUT)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout

    def python_out(self, code: str) -> str:
        proc = subprocess.run([str(self.python), "-c", code], env=self.env, cwd=self.path,
                              capture_output=True, text=True, timeout=PIP_TIMEOUT)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout.strip()

    def execute(self, nb, folder: Path, *, allow_errors=False, env=None):
        """Run ``nb`` in a kernel of this venv whose working folder is ``folder``, with the
        venv's environment updated by ``env`` (None: a variable left out); the notebook with
        its outputs."""
        from jupyter_client.kernelspec import KernelSpecManager
        from jupyter_client.manager import KernelManager
        from nbclient import NotebookClient

        km = KernelManager(kernel_name="fresh",
                           kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(self.specs)]))
        client = NotebookClient(nb, km=km, timeout=CELL_TIMEOUT, allow_errors=allow_errors,
                                resources={"metadata": {"path": str(folder)}})
        env = {k: v for k, v in {**self.env, **(env or {})}.items() if v is not None}
        client.execute(env=env)
        return nb


def _setup_cell(nb):
    """The notebook's set-up cell: its first code cell, tagged ``setup``."""
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and notebooks.SETUP_TAG in code[0].metadata.get("tags", []), \
        "the first code cell is not the set-up cell"
    return code[0]


def _durations(nb):
    """(index, seconds) of each code cell nbclient ran, from the times it records."""
    from datetime import datetime

    out = []
    for i, cell in enumerate(nb.cells):
        times = cell.get("metadata", {}).get("execution", {})
        begin, end = times.get("iopub.execute_input"), times.get("shell.execute_reply")
        if begin and end:
            seconds = (datetime.fromisoformat(end.replace("Z", "+00:00"))
                       - datetime.fromisoformat(begin.replace("Z", "+00:00"))).total_seconds()
            out.append((i, seconds))
    return out


def _errors(nb):
    return [(i, o) for i, c in enumerate(nb.cells) if c.cell_type == "code"
            for o in c.get("outputs", []) if o.output_type == "error"]


def _one_sentence(nb) -> str:
    """The only error a set-up cell shows: one line, no traceback, no frames."""
    errors = _errors(nb)
    assert len(errors) == 1, errors
    _, error = errors[0]
    assert error.ename == "SetupError", error
    assert len(error.traceback) == 1 and "\n" not in error.traceback[0], error.traceback
    assert "Traceback" not in error.traceback[0] and "File " not in error.traceback[0]
    return error.traceback[0]


def _only_setup(source: str):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        source, metadata={"tags": [notebooks.SETUP_TAG]})])
    return nb


def _copy_site(built: Path, to: Path, wheel: bool) -> Path:
    """The site's notebooks folder copied to ``to`` (with its wheel, or without)."""
    shutil.copytree(built / notebooks.FOLDER, to,
                    ignore=None if wheel else shutil.ignore_patterns("*.whl"))
    return to


def _all_notebooks(folder: Path) -> list[Path]:
    pages = [folder / f"{page}.ipynb" for page in _pages()]
    practice = sorted((folder / "practice").glob("*.ipynb"))
    assert all(p.is_file() for p in pages) and len(practice) >= 5, (pages, practice)
    return pages + practice


def _extras(nb) -> list[str]:
    return notebooks.extras_of(c.source for c in nb.cells[1:] if c.cell_type == "code")


def _built_requirement(source: str) -> str | None:
    """The requirement a built set-up cell names (its extras left out), or None."""
    hit = re.search(r"^        source = '(.+)'$", source, re.M)
    return re.sub(r"^ioattn\[[^]]*\]", "ioattn", hit.group(1)) if hit else None


def _check_outputs(path: Path, nb):
    """Every cell ran; in a practice notebook, only the student's own checks (tagged
    ``check``) of answers still ``...`` may fail, and not for an import or a name."""
    practice = path.parent.name == "practice"
    for i, error in _errors(nb):
        cell = nb.cells[i]
        assert practice and "check" in cell.metadata.get("tags", []) and \
            error.ename in UNFINISHED, (path.name, i, error.ename, error.evalue,
                                        "\n".join(error.traceback)[-3000:])


def _installed_from(fresh: Fresh) -> tuple[str, dict]:
    """Where the venv's kernel imports ioattn from, and the record of how it was installed."""
    out = fresh.python_out(
        "import importlib.metadata as m, json, ioattn; d = m.distribution('ioattn'); "
        "print(json.dumps([ioattn.__file__, d.read_text('direct_url.json')]))")
    where, direct = json.loads(out)
    return where, json.loads(direct or "{}")


# -------------------------------------------------------------------- (a) the wheel
@pytest.mark.book
def test_every_notebook_runs_in_a_fresh_venv_from_the_wheel(built, tmp_path):
    folder = _copy_site(built, tmp_path / "site" / notebooks.FOLDER, wheel=True)
    (wheel,) = folder.glob("ioattn-*.whl")
    paths = _all_notebooks(folder)
    start = time.perf_counter()
    fresh = Fresh(tmp_path / "venv")
    made = time.perf_counter() - start
    first = nbformat.read(paths[0], as_version=4)
    built_setup = _setup_cell(first).source
    assert built_setup == notebooks.setup_source(_built_requirement(built_setup), wheel.name,
                                                 _extras(first))

    # The set-up cell's failures, each one sentence that says what to do.
    alone = tmp_path / "alone"
    alone.mkdir()
    said = _one_sentence(fresh.execute(_only_setup(notebooks.setup_source(None, wheel.name)),
                                       alone, allow_errors=True))
    assert f"put the wheel {wheel.name} from the notebooks/ folder" in said, said
    said = _one_sentence(fresh.execute(_only_setup(notebooks.setup_source(
        f"ioattn @ git+file://{tmp_path}/nowhere@{'0' * 40}", wheel.name)), alone,
        allow_errors=True))
    assert said.startswith("SetupError: pip could not install ioattn (") and \
        f"No network? Put the wheel {wheel.name}" in said, said
    offline = fresh.execute(_only_setup(built_setup), folder / "book", allow_errors=True,
                            env={"PIP_NO_INDEX": "1", "PIP_CONFIG_FILE": os.devnull,
                                 "PIP_FIND_LINKS": None, "PIP_EXTRA_INDEX_URL": None})
    said = _one_sentence(offline)
    assert "No matching distribution" in said or "Could not find a version" in said, said
    assert "Its dependencies come from the package index" in said, said
    assert "Installing ioattn from" in offline.cells[0].outputs[0].get("text", ""), offline

    # Every notebook, the first installing ioattn from the wheel beside it, then two at a time.
    slow: list = []

    def run(path: Path) -> float:
        t = time.perf_counter()
        nb = fresh.execute(nbformat.read(path, as_version=4), path.parent, allow_errors=True)
        _check_outputs(path, nb)
        slow.extend((f"{path.parent.name}/{path.stem} cell {i}", s) for i, s in _durations(nb)
                    if s > SLOW)
        return time.perf_counter() - t

    times = {paths[0]: run(paths[0])}
    where, direct = _installed_from(fresh)
    assert Path(where).is_relative_to(fresh.path), where
    assert direct.get("url", "").endswith(wheel.name), direct
    with ThreadPoolExecutor(max_workers=2) as pool:
        times |= dict(zip(paths[1:], pool.map(run, paths[1:])))
    total = time.perf_counter() - start
    slowest = sorted(times.items(), key=lambda kv: -kv[1])[:5]
    print(f"\n(a) {len(paths)} notebooks in a fresh venv from {wheel.name}: {total:.0f} s "
          f"(venv {made:.0f} s); slowest: "
          + ", ".join(f"{p.parent.name}/{p.stem} {t:.0f} s" for p, t in slowest))
    print(f"cells over {SLOW} s: " + (", ".join(f"{c} {t:.0f} s" for c, t in
                                               sorted(slow, key=lambda x: -x[1])) or "none"))


# -------------------------------------------------------------------- (b) the repository
def _stand_in_for_github(to: Path) -> str:
    """A git repository at ``to`` holding this checkout's files as one commit (what git
    tracks, and what it would track: the working tree, as the wheel is made from it); its
    SHA."""
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], capture_output=True, check=True).stdout
    to.mkdir(parents=True)
    for name in filter(None, listed.decode().split("\0")):
        src = ROOT / name
        if src.is_file():
            (to / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, to / name)
    env = {**os.environ, "GIT_AUTHOR_NAME": "book", "GIT_AUTHOR_EMAIL": "book@ioattn.invalid",
           "GIT_COMMITTER_NAME": "book", "GIT_COMMITTER_EMAIL": "book@ioattn.invalid"}
    for args in (["init", "-q"], ["add", "--all", "--force", "."],
                 ["commit", "-q", "-m", "the checkout"]):
        subprocess.run(["git", "-C", str(to), *args], env=env, check=True, capture_output=True)
    return subprocess.run(["git", "-C", str(to), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()


def _wheel_files(wheel: Path) -> dict[str, str]:
    """The package's files in ``wheel`` (not its dist-info), each with its sha256."""
    with zipfile.ZipFile(wheel) as z:
        return {name: _digest(z.read(name)) for name in z.namelist()
                if not name.endswith("/") and ".dist-info/" not in name}


def _digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(
        b"=").decode()


def _installed_files(fresh: Fresh) -> dict[str, str]:
    """The package's files installed in ``fresh`` (not its dist-info or compiled files), each
    with the sha256 of its content on disk."""
    record = fresh.python_out("import importlib.metadata as m; "
                              "print(m.distribution('ioattn').read_text('RECORD'))")
    site = Path(fresh.python_out("import sysconfig; print(sysconfig.get_paths()['purelib'])"))
    out = {}
    for row in csv.reader(io.StringIO(record)):
        name = row[0]
        if ".dist-info/" in name or name.endswith(".pyc") or name.startswith(".."):
            continue
        out[name] = _digest((site / name).read_bytes())
    return out


@pytest.mark.book
def test_every_notebook_installs_from_a_git_url(built, tmp_path):
    folder = _copy_site(built, tmp_path / "site" / notebooks.FOLDER, wheel=False)
    (wheel,) = (built / notebooks.FOLDER).glob("ioattn-*.whl")
    start = time.perf_counter()
    origin = tmp_path / "origin"
    sha = _stand_in_for_github(origin)
    requirement = f"ioattn @ git+file://{origin}@{sha}"
    paths = _all_notebooks(folder)
    for path in paths:                        # the set-up cell, naming the stand-in
        nb = nbformat.read(path, as_version=4)
        cell = _setup_cell(nb)
        assert cell.source == notebooks.setup_source(_built_requirement(cell.source),
                                                     wheel.name, _extras(nb)), path
        cell.source = notebooks.setup_source(requirement, wheel.name, _extras(nb))
        nbformat.write(nb, path)
    fresh = Fresh(tmp_path / "venv")

    def first_cells(path: Path, installs: bool):
        nb = nbformat.read(path, as_version=4)
        code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
        nb.cells = [c for i, c in enumerate(nb.cells) if c.cell_type != "code" or
                    i in code[:2]]
        nb = fresh.execute(nb, path.parent)
        said = "".join(o.get("text", "") for o in _setup_cell(nb).outputs)
        assert ("Installing ioattn from ioattn" in said) == installs, (path.name, said)
        assert not _errors(nb), (path.name, _errors(nb))

    # The first install, with the extras some notebook needs (the assignments' guide makes
    # notebooks: ioattn[teach]); the others' set-up cells then find ioattn.
    guide = max(paths, key=lambda p: len(_extras(nbformat.read(p, as_version=4))))
    assert _extras(nbformat.read(guide, as_version=4)) == ["teach"], guide
    first_cells(guide, installs=True)
    where, direct = _installed_from(fresh)
    assert Path(where).is_relative_to(fresh.path), where
    assert direct["url"] == f"file://{origin}" and direct["vcs_info"]["commit_id"] == sha, \
        direct
    assert _installed_files(fresh) == _wheel_files(wheel), \
        "the package installed from git differs from the wheel's"
    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(lambda p: first_cells(p, installs=False),
                      [p for p in paths if p != guide]))
    print(f"\n(b) ioattn from git+file://...@{sha[:10]} in a fresh venv, the same files as "
          f"{wheel.name}; the set-up cell and the next cell of {len(paths)} notebooks: "
          f"{time.perf_counter() - start:.0f} s")
