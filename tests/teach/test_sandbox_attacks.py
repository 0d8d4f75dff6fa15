"""Notebooks that attack the sandbox itself, graded end to end as ``ioattn grade`` does.

Each ``tests/teach/cheats/sandbox_*.py`` is one notebook of ``matmul`` for student ``ada``
(cells as in ``tests/teach/test_cheats.py``; ``__WORD__``s are filled in here: the port of a
server this test opens, a marker name, a size). What the grader must make of each depends on
what this machine allows, which is detected first (:data:`LEVEL`), never assumed: each attack
is asserted to fail under the strongest confinement the machine gives, and where a weaker one
lets it through, the test asserts that too (so the report's words are checked against it).
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from ioattn.teach import jail, referee, sandbox
from ioattn.teach.grade import grade

from .helpers import CHEATS, cheat_cells, named, notebook, solution

SEED, STUDENT = 7, "ada"
#: What this machine allows, detected.
NAMESPACES = not jail.bwrap()                 # bwrap made PID, network, IPC, mount namespaces
OWN_USER = os.geteuid() == 0                  # each notebook a user id of its own
CGROUP = not jail.control_groups()            # memory and pids of the notebook as a whole
LANDLOCK = sandbox.abi() > 0


def _seccomp_holds() -> bool:
    """Whether :func:`.sandbox.forbid` makes ``socket()`` fail here (tried in a child)."""
    code = "import socket\nfrom ioattn.teach.sandbox import forbid\nforbid()\nsocket.socket()"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)
    return done.returncode != 0 and "PermissionError" in done.stderr


SECCOMP = _seccomp_holds()                    # no new socket of any family
COUNTED = NAMESPACES or OWN_USER              # RLIMIT_NPROC counts the notebook's alone
LEVEL = {"namespaces": NAMESPACES, "own user": OWN_USER, "cgroup": CGROUP,
         "landlock": LANDLOCK, "seccomp": SECCOMP}

ZERO = {"q1": 0, "q2": 0, "q1_reason": "tiled_matmul is not defined",
        "q2_reason": "tiled_matmul is not defined"}
FULL = {"full": True}

#: What the grader makes of each, on this machine (same keys as test_cheats.EXPECT; and
#: ``survivors``: whether processes named by the marker may outlive grading).
EXPECT: dict[str, dict] = {
    "sandbox_setsid_child": {**FULL, "survivors": not COUNTED},
    "sandbox_fork_bomb": {**FULL, "survivors": not COUNTED} if COUNTED else {
        **FULL, "cell_error": "nothing bounded the number of processes", "survivors": True},
    "sandbox_memory_bomb": ({"error": "together they went over the memory limit"} if CGROUP
                            else {**FULL, "cell_error": "nothing bounded the memory"}),
    # seccomp refuses the socket itself, before any namespace is tried
    "sandbox_udp_fetch": ({**ZERO, "cell_error": "PermissionError"} if SECCOMP
                          else {**ZERO, "cell_error": "ConnectionRefusedError"} if NAMESPACES
                          else FULL),
    "sandbox_unix_socket": ({**ZERO, "cell_error": "PermissionError"} if SECCOMP
                            else {**ZERO, "cell_error": "FileNotFoundError"} if NAMESPACES
                            else FULL),
    "sandbox_stderr_flood": {**FULL, "cell_error": "File too large"},
    "sandbox_read_config": ({**ZERO, "cell_error": "FileNotFoundError"} if NAMESPACES
                            else {**ZERO, "cell_error": "PermissionError"} if LANDLOCK
                            else FULL),
}


def test_every_sandbox_cheat_has_an_expectation_and_a_docstring():
    stems = sorted(p.stem for p in CHEATS.glob("sandbox_*.py"))
    assert stems == sorted(EXPECT)
    for stem in stems:
        text = (CHEATS / f"{stem}.py").read_text()
        assert text.startswith('"""') and "Kind:" in text, stem


def check(report, want: dict) -> None:
    """Assert ``report`` is what ``want`` says (the format of test_cheats.EXPECT)."""
    summary = [(q.name, q.score, q.reasons) for q in report.questions]
    if "error" in want:
        assert report.error is not None and want["error"] in report.error, report.error
        assert all(q.score is None for q in report.questions)
        return
    assert report.error is None, report.error
    if "cell_error" in want:
        assert any(want["cell_error"] in e for e in report.cell_errors), report.cell_errors
    else:
        assert not report.cell_errors, report.cell_errors
    if "full" in want:
        assert report.score == report.possible == 5, summary
        return
    for q in report.questions:
        assert q.score == want[q.name], summary
        assert want[f"{q.name}_reason"] in " ".join(q.reasons), summary


def graded(stem: str, folder: Path, *, memory: int = referee.MEMORY, **words):
    path = notebook(folder / f"{stem}.ipynb", "matmul", STUDENT, *cheat_cells(stem, **words))
    return grade("matmul", path, seed=SEED, memory=memory)


def _end(pids) -> None:
    for pid in pids:
        try:
            os.kill(pid, 9)
        except OSError:
            pass


def test_the_report_says_what_held(tmp_path):
    """The isolation the report states is what the grader measured: namespaces only when
    they held, the notebook's own user, its limits."""
    report = graded("sandbox_stderr_flood", tmp_path, MB=1)
    said = report.isolation
    assert ("its own PID, network, IPC, mount" in said) == NAMESPACES, said
    assert ("no namespaces of its own" in said) == (not NAMESPACES), said
    if OWN_USER:
        uid = int(said.split("user id ")[1].split(";")[0].split()[0])
        assert jail.UID_BASE <= uid < jail.UID_BASE + jail.UID_SPAN, said
        assert f"processes of its user: {jail.PROCESSES}" in said, said
    assert "size of a file: 64 MiB" in said, said
    assert ("control group" in said) == CGROUP, said
    assert ("Landlock ABI" in said) == LANDLOCK, said
    assert ("seccomp filter" in said) == SECCOMP, said


@pytest.mark.parametrize("stem", ["sandbox_setsid_child", "sandbox_fork_bomb"])
def test_no_process_outlives_grading(stem, tmp_path):
    marker = "ioa" + secrets.token_hex(6)          # a name no other process has (15 chars)
    report = graded(stem, tmp_path, MARKER=marker)
    left = named(marker)
    _end(left)
    check(report, EXPECT[stem])
    assert bool(left) == EXPECT[stem]["survivors"], (left, LEVEL)


def test_memory_of_all_processes_together(tmp_path):
    """Four children of 400 MB each under a limit of 1.25 GiB for the notebook: with a control
    group the kernel ends them and the grader says why; the grading itself goes on."""
    report = graded("sandbox_memory_bomb", tmp_path, memory=1280 << 20, MB=400)
    check(report, EXPECT["sandbox_memory_bomb"])


@pytest.fixture(params=["strongest", "no namespaces"])
def level(request, monkeypatch):
    """Each socket attack under the strongest confinement here, and again with the namespaces
    turned off (the fallback: Landlock and seccomp alone); what the grader must make of it."""
    if request.param == "no namespaces":
        monkeypatch.setenv("IOATTN_NO_NAMESPACES", "1")
        return lambda stem: ({**ZERO, "cell_error": "PermissionError"} if SECCOMP else FULL)
    return EXPECT.__getitem__


def test_udp_reaches_nothing(tmp_path, level):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as server:
        server.bind(("127.0.0.1", 0))
        port = server.getsockname()[1]

        def serve():
            _, peer = server.recvfrom(100)
            server.sendto(solution("matmul").encode(), peer)

        threading.Thread(target=serve, daemon=True).start()
        report = graded("sandbox_udp_fetch", tmp_path, PORT=port)
    check(report, level("sandbox_udp_fetch"))


@pytest.fixture
def open_folder():
    """A fresh folder anyone may enter (so only the sandbox can keep a notebook out)."""
    folder = Path(tempfile.mkdtemp(prefix="ioattn-test-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_a_pathname_unix_socket_reaches_nothing(tmp_path, open_folder, level):
    path = open_folder / "agent.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(path))
        path.chmod(0o777)
        server.listen()

        def serve():
            conn, _ = server.accept()
            with conn:
                conn.sendall(solution("matmul").encode())

        threading.Thread(target=serve, daemon=True).start()
        report = graded("sandbox_unix_socket", tmp_path, PATH=path)
    check(report, level("sandbox_unix_socket"))


def test_standard_error_is_bounded(tmp_path):
    """200 MB to fd 2: the kernel refuses what goes past the file-size limit, and the grader
    never reads back more than the end of it."""
    report = graded("sandbox_stderr_flood", tmp_path, MB=200)
    check(report, EXPECT["sandbox_stderr_flood"])


def test_the_kept_standard_error_is_its_end():
    sub = referee.Submission([])
    tail = sub._stderr()
    os.write(tail.fileno(), b"a" * 100_000 + b"the end")
    data = tail.read()
    assert data.endswith(b"the end") and len(data) == referee._Tail.KEEP
    tail.close()


def test_the_instructors_configuration_is_out_of_reach(tmp_path, open_folder, monkeypatch):
    """A file in $HOME/.config/ioattn that every user may read: no notebook reads it."""
    home = open_folder
    config = home / ".config" / "ioattn"
    config.mkdir(parents=True)
    for folder in (home / ".config", config):
        folder.chmod(0o755)
    key = config / "key"
    key.write_text(solution("matmul"))
    key.chmod(0o644)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    assert jail.config_dir() == config
    assert config.resolve() in jail.secrets()
    assert all(p.resolve() not in (home.resolve(), config.resolve()) for p in jail.allowed())
    report = graded("sandbox_read_config", tmp_path, KEY=key)
    check(report, EXPECT["sandbox_read_config"])


def test_allowed_never_holds_the_home_folder(monkeypatch):
    """Even where Python lies in the instructor's home, the home folder itself is never
    readable, nor any folder around the configuration folder."""
    some = sandbox.readable()[-1]
    monkeypatch.setenv("HOME", str(some))
    assert some not in jail.allowed()
    monkeypatch.setenv("HOME", "/nonexistent-home")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(some))       # the configuration: some/ioattn
    monkeypatch.setattr(sandbox, "readable",
                        lambda: [some, some / "ioattn", some / "ioattn" / "x"])
    assert jail.allowed() == [some]          # the one around it kept, with it hidden inside


def test_a_killed_grader_leaves_no_folder(tmp_path):
    """A grader ended by SIGTERM while a notebook runs removes the notebook's folder (and
    ends its processes)."""
    code = (
        "import sys, time\n"
        "from ioattn.teach.referee import Submission\n"
        "sub = Submission([(1, 'import time\\nwhile True: time.sleep(1)')],\n"
        "                 notebook_time=600)\n"
        "sub.namespaces = False\n"
        "import threading\n"
        "def report():\n"
        "    while sub.plan is None or sub.proc is None: time.sleep(0.01)\n"
        "    print(sub.plan.folder, flush=True)\n"
        "threading.Thread(target=report, daemon=True).start()\n"
        "sub.start()\n"
    )
    env = {**os.environ, "PYTHONPATH": jail.python_path(), "TMPDIR": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            text=True, env=env)
    folder = Path(proc.stdout.readline().strip())
    assert folder.is_dir() and folder.parent == tmp_path
    proc.terminate()
    proc.wait(timeout=60)
    assert not folder.exists()
    assert not list(tmp_path.glob("ioattn-run-*"))


def test_the_folder_it_writes_in():
    """In namespaces the notebook's folder is in memory, bounded, gone with it: nothing on the
    grader's disk; without them it is a fresh folder the grader removes."""
    cells = [(1, "import os\nopen('progress.log', 'w').write('ok')\nHERE = os.getcwd()\n")]
    with referee.Submission(cells) as sub:
        sub.start()
        assert not sub.cell_errors, sub.cell_errors
        here = sub.value("HERE")
        if NAMESPACES:
            assert sub.plan.folder is None and here == jail.INSIDE
        else:
            assert here == sub.plan.folder and Path(here, "progress.log").is_file()
    assert not Path(here).is_dir() or NAMESPACES


def test_a_configuration_folder_inside_a_readable_one_is_hidden(tmp_path, monkeypatch):
    """Where the instructor's configuration folder lies inside a folder the notebook may read,
    bwrap mounts an empty folder no one may enter over it, and Landlock leaves it out."""
    package = tmp_path / "site-packages"
    config = package / "cfg" / "ioattn"
    config.mkdir(parents=True)
    monkeypatch.setattr(sandbox, "readable", lambda: [package])
    monkeypatch.setenv("XDG_CONFIG_HOME", str(package / "cfg"))
    args = jail._binds(jail.FILES)
    at = args.index(str(config))
    assert args[at - 3:at] == ["--perms", "0000", "--tmpfs"], args
    assert args.index("--ro-bind") < at
