"""The grader's side of a graded run: a notebook's process out of reach of the data.

:class:`Submission` starts a notebook in a process of its own (:mod:`ioattn.teach.runner`) and
is the :class:`~ioattn.teach.answers.Answers` the checks use while grading. Every value stays in
the grader's process: a tile program's requests are carried out by a
:class:`~ioattn.tiles.Machine` here, so its cache holds at most ``M`` entries by construction,
nothing can be kept outside it, and its outputs are what its counted requests computed. The
hidden data and the grading seed never leave this process.

The notebook's process

- gets one end of a socket pair and, over it, the code cells, and nothing else: no path, no
  seed; it makes itself undumpable before it reads them, so notebooks graded at the same time
  cannot read one another's;
- runs under limits it cannot lift: address space (``RLIMIT_AS``), CPU seconds, no core files,
  its own session (killed as a group);
- confines itself with Landlock where the kernel has it (:mod:`ioattn.teach.sandbox`): it can
  read only Python, the installed packages and ioattn, and write only its own folder; no
  network, no signals to other processes;
- runs as the unprivileged user ``nobody`` when the grader runs as root: it loads Python,
  NumPy, IPython and ioattn as root and gives root up for good before it reads the notebook
  (then it can read neither the grader's private files nor its memory), in a fresh folder of
  its own;
- cannot read this process's memory: :func:`protect` marks the grader undumpable
  (``PR_SET_DUMPABLE`` 0), which also keeps ``/proc/<pid>/mem`` and ``ptrace`` from processes of
  the same user.

A call that runs past its time limit, or a process that ends (``os._exit``, a crash, the memory
limit), fails the question it was answering with the reason; the next question starts the
notebook again, so questions already answered keep their scores.

Nothing the notebook's process sends is trusted:

- every message is read with a deadline, the call's remaining time (:mod:`.protocol`), at most
  :data:`MAX_MESSAGE` bytes, nested at most :data:`.protocol.MAX_DEPTH` deep, UTF-8 without
  lone surrogates; every reply is written with the same deadline, so a process that stops
  reading (or sends half a message) costs at most the call's time limit, and one that has ended
  (a broken pipe) fails the question as a process that ended;
- every value is checked before use: a number outside float64's range is refused where it
  would be one (a tile request's number, an answer's integer), and anything else a request
  makes go wrong fails that call, never the grading;
- each cell's outcome is recorded as the process reports it, cell by cell, before the next cell
  runs, so code in one cell can change the reports of later cells only; the cell errors in a
  report are as the notebook's process reported them;
- what confines the process is what the grader measured of it (``sandbox.observed``, where it
  is available) or what it had the process do, never what the process says.
"""

from __future__ import annotations

import ctypes
import json
import math
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from multiprocessing.connection import Connection

from ..memory import CacheOverflowError
from ..tiles import Machine, TileError
from .answers import Answers, Run, Unsendable, connect, decode
from .judge import clean
from .protocol import ProtocolError, receive, send

__all__ = ["Crashed", "Submission", "TimedOut", "isolation", "protect"]

#: The unprivileged user a notebook runs as when the grader is root.
NOBODY = 65534
#: Default limits: seconds to run the notebook's cells, bytes of address space.
NOTEBOOK_TIME, MEMORY = 300.0, 4 << 30
#: The most tile requests one call may make.
MAX_REQUESTS = 5_000_000
#: The longest message the grader reads from a notebook's process, in bytes.
MAX_MESSAGE = 16 << 20
#: The most bytes of what the notebook's process wrote to its standard error that a message
#: quotes (only the end of it is read back).
ERROR_TAIL = 500


class Crashed(RuntimeError):
    """The notebook's process ended, or broke the protocol, while answering."""


class TimedOut(RuntimeError):
    """A call, or the notebook's cells, ran past the time limit."""


def protect() -> bool:
    """Make this process undumpable (``prctl(PR_SET_DUMPABLE, 0)``): processes of the same user
    can no longer read its memory or trace it. ``True`` if it took effect."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(4, 0, 0, 0, 0) == 0            # PR_SET_DUMPABLE = 4
    except (OSError, AttributeError):
        return False


def isolation(confined: str = "") -> str:
    """How the notebook's process is kept from the grader, in words (for reports);
    ``confined``: what the process said of its confinement (:func:`.sandbox.confine`)."""
    if os.geteuid() == 0:
        user = "as the user nobody (it gives up root before it reads the notebook)"
    else:
        user = "as the grader's own user (a grader run as root runs it as nobody)"
    where = f"; {confined}" if confined else ""
    return (f"a process of its own {user}, with limits on memory and time{where}; "
            "the grader is undumpable")


class Submission(Answers):
    """One notebook, running in its own process, answering the checks' requests.

    Parameters
    ----------
    cells : list of (int, str)
        The notebook's code cells: number and source.
    notebook_time : float
        Seconds the cells may take to run.
    memory : int
        Bytes of address space the process may use.
    """

    graded = True

    def __init__(self, cells, *, notebook_time: float = NOTEBOOK_TIME, memory: int = MEMORY):
        self.cells = list(cells)
        self.notebook_time = float(notebook_time)
        self.memory = int(memory)
        self.proc = None
        self.conn = None
        self.folder = None
        self.cell_errors: list = []
        self.output = ""
        self.starts = 0
        self._observed = ""
        self._outcomes: list = []
        self._outcomes_of = 0                    # the start whose cells they are
        self._running = False                    # whether its cells are still running

    # ------------------------------------------------------------------ the process
    def start(self) -> None:
        """Start the notebook's process and run its cells (again, after a crash)."""
        self.close()
        self.starts += 1
        self.folder = tempfile.mkdtemp(prefix="ioattn-run-")
        root = os.geteuid() == 0
        if root:
            os.chown(self.folder, NOBODY, NOBODY)
        ours, theirs = socket.socketpair()
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": self.folder,
               "TMPDIR": self.folder, "MPLBACKEND": "Agg", "PYTHONDONTWRITEBYTECODE": "1",
               "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "LANG": "C.UTF-8"}
        limit = self.memory

        def limits():                            # in the child, before it runs anything
            os.setsid()
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ioattn.teach.runner"], stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL, stderr=self._stderr(), cwd=self.folder, env=env,
            pass_fds=(theirs.fileno(),), preexec_fn=limits, close_fds=True)
        theirs_fd = theirs.fileno()
        self.conn = Connection(ours.detach())
        try:
            self.proc.stdin.write(json.dumps({"fd": theirs_fd, "drop": root,
                                              "confine": True}).encode())
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        theirs.close()
        try:
            send(self.conn, {"cells": self.cells})
        except OSError:
            self._crash("before it got its cells")
        msg = self._wait(self.notebook_time, "running the notebook's cells")
        if not isinstance(msg, dict) or not isinstance(msg.get("ready"), list):
            raise Crashed("the notebook's process sent something other than its cells' results")
        self.cell_errors = [e for e in msg["ready"] if isinstance(e, dict)]
        self.output = str(msg.get("output", ""))
        self.confined = str(msg.get("confined", ""))[:200]

    def _stderr(self):
        self.errors = tempfile.TemporaryFile()
        return self.errors

    @property
    def confined(self) -> str:
        """How the notebook's process is confined, as the grader measured it (or had it do),
        never as the process says."""
        return self._observed

    @confined.setter
    def confined(self, claimed) -> None:
        """What the notebook's process claims of its confinement: ignored."""

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None and self.conn is not None

    def close(self) -> None:
        """End the notebook's process and remove its folder."""
        if self.conn is not None:
            try:
                send(self.conn, {"bye": True})
            except OSError:
                pass
            self.conn.close()
            self.conn = None
        if self.proc is not None:
            _kill(self.proc)
            self.proc = None
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    # ------------------------------------------------------------------ Answers
    def value(self, name):
        self._ensure()
        deadline = time.monotonic() + 60.0
        what = f"sending {name}"
        self._send({"value": name}, deadline, what)
        msg = self._next(deadline, what)
        if "unsendable" in msg:
            raise Unsendable(clean(msg["unsendable"]))
        return decode(msg.get("value"))

    def call(self, name, args=(), *, time_limit=60.0):
        self._ensure()
        deadline = time.monotonic() + time_limit
        what = f"{name}{tuple(args)!r}"
        self._send({"call": name, "args": list(args)}, deadline, what)
        return self._ended(name, self._next(deadline, what))

    def run(self, name, M, inputs, outputs, *, args=(), time_limit=60.0):
        self._ensure()
        machine = Machine(M, owner=name, graded=True)
        connect(machine, inputs, outputs)
        result = Run(name, machine)
        arrays = [[k, list(machine.slow[k].shape)] for k in (*inputs, *outputs)]
        deadline = time.monotonic() + time_limit
        self._send({"run": name, "M": M, "arrays": arrays, "args": list(args)}, deadline, name)
        while True:
            msg = self._next(deadline, name)
            if "tile" not in msg:
                break
            if machine.requests >= MAX_REQUESTS:
                self._crash(f"{name} made more than {MAX_REQUESTS:,} tile requests")
            try:
                reply = {"ok": machine.request(msg["tile"])}
            except (TileError, CacheOverflowError) as exc:
                reply = {"error": [type(exc).__name__, str(exc)]}
            except Exception as exc:            # noqa: BLE001 (whatever a request makes go wrong)
                self._drop()
                result.error = (f"a tile request the grader could not carry out "
                                f"({type(exc).__name__}: {clean(exc, 200)})")
                return result
            self._send(reply, deadline, name)
        result.returned, result.error = self._ended(name, msg)
        result.seconds = _seconds(msg.get("seconds"))
        return result

    # ------------------------------------------------------------------ internals
    def _ensure(self) -> None:
        if not self.alive:
            self.start()

    def _ended(self, name, msg):
        if "raised" in msg:
            return None, clean(msg["raised"])
        if "unsendable" in msg:
            return None, clean(msg["unsendable"])
        if "returned" in msg:
            try:
                return decode(msg["returned"]), None
            except Unsendable as exc:
                return None, f"{name} returned {exc}"
        self._crash(f"{name}: an unexpected message from the notebook's process")

    def _send(self, message, deadline: float, what: str) -> None:
        """Send ``message`` by ``deadline``; the process is ended if it cannot take it."""
        if self.conn is None:
            self._crash(f"before {what}")
        try:
            send(self.conn, message, deadline)
        except TimeoutError:
            self._drop()
            raise TimedOut(f"{what} ran past the time limit (the notebook's process stopped "
                           "reading the grader's replies)") from None
        except OSError:                          # a broken pipe: the process has ended
            self._crash(f"while {what}")

    def _wait(self, seconds: float, what: str):
        """The next message, within ``seconds``; the process is ended on a timeout or EOF."""
        return self._next(time.monotonic() + seconds, what, seconds)

    def _next(self, deadline: float, what: str, seconds: float | None = None):
        """The next message by ``deadline`` (cells' outcomes recorded on the way); the process
        is ended on a timeout, EOF or a malformed message."""
        while True:
            msg = self._receive(deadline, what, seconds)
            if self._outcomes_of != self.starts:     # a fresh start: its cells' outcomes come
                self._outcomes_of, self._outcomes = self.starts, []
                self._observed, self._running = "", True
            if not self._running:
                return msg
            if "ready" in msg:
                self._running = False
                return self._ready(msg)
            if "cell" in msg and len(self._outcomes) < len(self.cells):
                self._outcome(msg, what)
                continue
            return msg

    def _receive(self, deadline: float, what: str, seconds: float | None):
        if self.conn is None:
            self._crash(f"before {what}")
        if time.monotonic() >= deadline:         # even with messages waiting
            self._drop()
            raise TimedOut(f"{what} ran past the time limit of {_secs(seconds)}")
        try:
            msg = receive(self.conn, deadline, MAX_MESSAGE)
        except TimeoutError:
            self._drop()
            raise TimedOut(f"{what} ran past the time limit of {_secs(seconds)}") from None
        except EOFError:
            self._crash(f"while {what}")
        except ProtocolError as exc:
            self._crash(f"{exc} while {what}")
        except OSError:
            self._crash(f"while {what}")
        if not isinstance(msg, dict):
            self._crash(f"a malformed message while {what}")
        return msg

    def _outcome(self, msg: dict, what: str) -> None:
        """Record one cell's outcome, as the notebook's process reports it."""
        number = self.cells[len(self._outcomes)][0]
        error = msg.get("error")
        if msg.get("cell") != number or not (error is None or isinstance(error, str)):
            self._crash(f"a malformed cell report while {what}")
        self._outcomes.append(None if error is None else clean(error, 1000))

    def _ready(self, msg: dict) -> dict:
        """The end of the cells: their errors as recorded cell by cell (a cell the process did
        not report has an error saying so), the process's output cleaned, its claims dropped."""
        missing = "its outcome was never reported by the notebook's process"
        outcomes = self._outcomes + [missing] * (len(self.cells) - len(self._outcomes))
        errors = [{"cell": number, "error": error}
                  for (number, _), error in zip(self.cells, outcomes) if error is not None]
        self._observed = _observed(self.proc)
        return {"ready": errors, "output": clean(msg.get("output", ""), 4000)}

    def _drop(self) -> None:
        """End the process without a word (the socket may be full or broken)."""
        if self.conn is not None:
            self.conn.close()
            self.conn = None
        self.close()

    def _crash(self, what: str):
        proc = self.proc
        code = None
        err = ""
        if proc is not None:
            try:
                code = proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            if code is not None:
                err = self._error_tail()
        if self.conn is not None:
            self.conn.close()
            self.conn = None
        self.close()
        how = "" if code is None else (f" (killed by signal {-code})" if code < 0
                                       else f" (exit code {code})")
        detail = f"; it said: {err}" if err else ""
        raise Crashed(f"the notebook's process ended {what}{how}{detail}")

    def _error_tail(self) -> str:
        """The end of what the process wrote to its standard error (never all of it)."""
        errors = getattr(self, "errors", None)
        try:
            size = errors.seek(0, os.SEEK_END)
            errors.seek(max(0, size - 4 * ERROR_TAIL))
            tail = errors.read(4 * ERROR_TAIL)
        except (AttributeError, OSError, ValueError):
            return ""
        return clean(tail.decode(errors="replace"), 4 * ERROR_TAIL).strip()[-ERROR_TAIL:]


def _kill(proc) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            proc.kill()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def _secs(seconds: float | None) -> str:
    return f"{seconds:g} s" if seconds is not None and seconds > 0 else "its time"


def _seconds(x) -> float:
    """A call's reported seconds, if they are a sane number (else 0)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return 0.0
    try:
        x = float(x)
    except OverflowError:
        return 0.0
    return x if math.isfinite(x) and x >= 0 else 0.0


def _observed(proc) -> str:
    """How the notebook's process is confined, from the grader's side: what
    ``sandbox.observed`` measured where it is available, else what the grader had the process
    apply (Landlock where the kernel has it)."""
    from . import sandbox

    observed = getattr(sandbox, "observed", None)
    if observed is not None and proc is not None:
        try:
            return clean(observed(proc.pid), 300)
        except Exception as exc:                # noqa: BLE001 (a measurement that failed)
            return f"confinement not measured ({type(exc).__name__})"
    version = sandbox.abi()
    if version == 0:
        return ("no file confinement (the kernel has no Landlock): the notebook can read every "
                "file its user can")
    return (f"Landlock ABI {version}, applied by the process as the grader starts it, before it "
            "reads the notebook")
