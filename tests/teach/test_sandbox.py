"""The notebook's process confined by Landlock: what it may read, write, reach and signal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

import ioattn
from ioattn.teach import sandbox

PACKAGE = Path(ioattn.__file__).parent
#: NumPy's BLAS starts no threads of its own (the grader sets the same for the notebook).
ONE_THREAD = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}

#: What a probe tries: ``out[name]`` becomes "ok" or the name of the OSError ``fn`` raised.
ATTEMPT = """def attempt(name, fn):
        try:
            fn()
            out[name] = "ok"
        except OSError as exc:
            out[name] = type(exc).__name__"""

#: Run in a fresh process: confine to ``folder``, then try each thing and report what happened.
PROBE = textwrap.dedent("""
    import json, os, socket, sys
    from pathlib import Path
    import numpy
    from ioattn.teach.sandbox import confine

    folder, outside, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    said = confine(folder)
    out = {"said": said}

    {ATTEMPT}

    attempt("read_outside", lambda: open(outside).read())
    attempt("list_proc", lambda: os.listdir("/proc"))
    attempt("read_numpy", lambda: Path(numpy.__file__).read_text())
    attempt("write_own", lambda: Path(folder, "log.txt").write_text("progress"))
    attempt("write_package", lambda: Path(numpy.__file__).with_name("x.txt").write_text("x"))
    attempt("devnull", lambda: open(os.devnull, "w").write("x"))
    attempt("signal_parent", lambda: os.kill(os.getppid(), 0))
    def connect():
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
    attempt("connect", connect)
    print(json.dumps(out))
""").replace("{ATTEMPT}", ATTEMPT)


def _probe(tmp_path) -> dict:
    folder, elsewhere = tmp_path / "run", tmp_path / "elsewhere"
    folder.mkdir()
    elsewhere.mkdir()
    outside = elsewhere / "answers.py"
    outside.write_text("ANSWER = 42\n")
    outside.chmod(0o644)
    import socket

    with socket.socket() as server:                  # a port that accepts connections
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        done = subprocess.run([sys.executable, "-c", PROBE, str(folder), str(outside),
                               str(port)], capture_output=True, text=True, timeout=120,
                              env=ONE_THREAD)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_readable_is_the_installed_code_not_the_folder_around_it():
    paths = sandbox.readable()
    assert PACKAGE in paths
    assert Path(np.__file__).parent.parent in paths or any(
        p in Path(np.__file__).parents for p in paths)
    assert PACKAGE.parent not in paths or PACKAGE.parent.name in ("site-packages",
                                                                   "dist-packages")
    for path in paths:                                 # nothing above the checkout's package
        assert not (path / "tests" / "teach").exists(), path


def test_confined_process(tmp_path):
    out = _probe(tmp_path)
    version = sandbox.abi()
    if version == 0:
        assert out["said"].startswith("no file confinement"), out
        assert out["read_outside"] == "ok"           # and the report says so
        return
    assert out["said"].startswith(f"Landlock ABI {version}"), out
    assert out["read_outside"] == "PermissionError", out
    assert out["list_proc"] == "PermissionError", out
    assert out["read_numpy"] == "ok", out
    assert out["write_own"] == "ok", out            # a progress log is not cheating
    assert out["write_package"] == "PermissionError", out
    assert out["devnull"] == "ok", out
    if version >= 4:
        assert out["connect"] == "PermissionError", out
        assert "no network" in out["said"]
    if version >= 6:
        assert out["signal_parent"] == "PermissionError", out
        assert "no signals out" in out["said"]


def test_without_landlock_the_report_says_so(monkeypatch, tmp_path):
    monkeypatch.setattr(sandbox, "abi", lambda: 0)
    said = sandbox.confine(tmp_path)
    assert said.startswith("no file confinement") and "every file its user can" in said


def test_a_second_thread_is_refused(tmp_path):
    if sandbox.abi() == 0:
        assert sandbox.confine(tmp_path).startswith("no file confinement")
        return
    code = textwrap.dedent("""
        import sys, threading
        from ioattn.teach.sandbox import confine
        # a thread that lives until the process ends, however slowly confine() is reached
        threading.Thread(target=threading.Event().wait, daemon=True).start()
        try:
            confine(sys.argv[1])
        except RuntimeError as exc:
            print("refused:", exc)
    """)
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                          text=True, timeout=60)
    assert "refused: the notebook's process has more than one thread" in done.stdout, done


def test_the_graders_answers_are_out_of_reach(tmp_path):
    """ioattn is readable, except ioattn/teach/keys; modules not loaded before still import."""
    keys = sandbox.hidden()
    assert keys.is_dir() and (keys / "pebbling.py").is_file()
    code = textwrap.dedent("""
        import json, sys
        from ioattn.teach.sandbox import confine, hidden
        said = confine(sys.argv[1])
        out = {}
        try:
            import ioattn.teach.keys.pebbling
            out["import"] = "ok"
        except (ImportError, OSError) as exc:
            out["import"] = type(exc).__name__
        try:
            open(hidden() / "crossover.py").read()
            out["read"] = "ok"
        except OSError as exc:
            out["read"] = type(exc).__name__
        import ioattn.pebble.view                     # not loaded before: still importable
        out["view"] = "ok"
        print(json.dumps(out))
    """)
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                          text=True, timeout=120, env=ONE_THREAD)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    if sandbox.abi() == 0:
        assert out["read"] == "ok"
        return
    assert out == {"import": "PermissionError", "read": "PermissionError", "view": "ok"}, out


#: Run in a fresh process: install the seccomp filter, then try each thing (and, in a child,
#: a socket again: the filter is inherited).
FORBID = textwrap.dedent("""
    import ctypes, json, os, socket, sys
    from ioattn.teach.sandbox import forbid

    out = {"said": forbid()}

    {ATTEMPT}

    attempt("udp", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).close())
    attempt("unix", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close())
    attempt("socketpair", lambda: [s.close() for s in socket.socketpair()])
    def trace_a_child():                    # PTRACE_ATTACH to a process of its own
        child = os.fork()
        if child == 0:
            os.pause()
        libc = ctypes.CDLL(None, use_errno=True)
        try:
            if libc.ptrace(16, child, 0, 0) != 0:
                raise OSError(ctypes.get_errno(), "ptrace")
        finally:
            os.kill(child, 9)
            os.waitpid(child, 0)
    attempt("ptrace", trace_a_child)
    pid = os.fork()
    if pid == 0:
        attempt("udp", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).close())
        os._exit(3 if out["udp"] == "PermissionError" else 4)
    out["child"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    out["status"] = open("/proc/self/status").read().split("Seccomp:")[1].split()[0]
    print(json.dumps(out))
""").replace("{ATTEMPT}", ATTEMPT)


def test_seccomp_refuses_every_new_socket_and_the_escape_hatches():
    """Where libseccomp is installed (the teach extra's pyseccomp over Debian's libseccomp2):
    no socket of any family, for the process and its children; the inherited kind of channel
    (a socket pair) still works; the grader sees the filter from outside."""
    done = subprocess.run([sys.executable, "-c", FORBID], capture_output=True, text=True,
                          timeout=120, env=ONE_THREAD)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["said"].startswith("seccomp: no new socket"), out
    assert out["udp"] == out["unix"] == "PermissionError", out
    assert out["ptrace"] == "PermissionError", out
    assert out["child"] == 3, out                      # the child was refused too
    assert out["socketpair"] == "ok", out
    assert out["status"] == "2", out                  # SECCOMP_MODE_FILTER


def test_without_libseccomp_the_report_says_so(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyseccomp", None)    # import fails
    assert sandbox.forbid().startswith("no seccomp filter")
