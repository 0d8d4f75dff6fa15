"""The notebook's process when grading: run its cells, then answer the grader's requests.

``python -m ioattn.teach.runner`` is what the grader starts for each submission
(:mod:`ioattn.teach.referee`), with limits on its time and memory, confined by the kernel to its
own folder and the installed code (:mod:`ioattn.teach.sandbox`) and, where the grader runs as
root, as an unprivileged user. It reads the number of a socket inherited from the grader on standard
input, and then, over the socket, the notebook's code cells. It runs every
cell with IPython, as a kernel would, and reports each cell's outcome (``{"cell": number,
"error": text or None}``) as soon as the cell has run, before the next one starts, so the grader
has it before any later cell could change how the process reports; then it serves the grader's
requests over the socket (:mod:`ioattn.teach.protocol`):

- ``{"value": name}``: the notebook's ``name`` as plain data;
- ``{"call": name, "args": [...]}``: a plain function's result;
- ``{"run": name, "M": M, "arrays": [[name, shape], ...], "args": [...]}``: a tile program,
  whose tile requests go to the grader's machine, which holds every value.

Nothing here is trusted: the grader checks every message, and the process holds no data the
grader has not sent it.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import time
from multiprocessing.connection import Connection

from .protocol import receive, send

__all__ = ["main"]


class Refused(RuntimeError):
    """The grader's machine refused a tile request: its message, raised in the notebook's code."""


#: Modules loaded before the process gives up root (a Python installed where the notebook's
#: user cannot read it can still use them).
PRELOAD = ("abc", "bisect", "collections", "contextlib", "copy", "dataclasses", "decimal", "enum",
           "fractions", "functools", "heapq", "itertools", "json", "logging", "math", "numbers",
           "operator", "pprint", "random", "re", "secrets", "hashlib", "statistics", "string",
           "textwrap", "typing",
           "numpy", "ioattn", "ioattn.tiles", "ioattn.teach")


def _shell():
    """An IPython shell, with the modules a notebook may use loaded."""
    import importlib

    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    for name in PRELOAD:
        importlib.import_module(name)
    config = Config()
    config.HistoryManager.enabled = False       # no history thread: one thread to confine
    shell = InteractiveShell.instance(colors="nocolor", config=config)
    for warm in ("pass", "raise ValueError", "def f(:", "%time pass"):   # the code paths a
        shell.run_cell(warm, store_history=False)                      # notebook's cells take
    shell.reset(new_session=False)
    return shell


def _drop_root(uid=True) -> None:
    """Become the user ``uid`` (one of its own, :func:`.jail.fresh_uid`; ``True``: the user
    nobody, ``referee.NOBODY``), for good."""
    from .referee import NOBODY

    uid = NOBODY if uid is True else int(uid)
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
    _undumpable()


def _confine(config: dict) -> str:
    """Confine the process to its folder and the installed code (:mod:`.sandbox`), as the
    grader's lists in ``config`` say (``read``, ``hide``); what holds, in words."""
    from .sandbox import confine, forbid

    try:
        files = confine(os.getcwd(), read=config.get("read"), hide=config.get("hide"))
    except (OSError, RuntimeError) as exc:
        files = f"no file confinement ({exc})"
    return f"{files}; {forbid()}"


#: The most characters of one cell's error that are reported.
MAX_ERROR = 1000


def _run_cells(shell, cells: list, conn) -> tuple[list, dict]:
    """Run the notebook's code cells in an IPython shell, reporting each one's outcome over
    ``conn`` as it finishes; ``(errors, namespace)``."""
    errors = []
    for number, source in cells:
        result = shell.run_cell(source, store_history=False, silent=False)
        error = result.error_before_exec or result.error_in_exec
        text = None if error is None else _describe(error)[:MAX_ERROR]
        send(conn, {"cell": number, "error": text})
        if text is not None:
            errors.append({"cell": number, "error": text})
    return errors, shell.user_ns


def _describe(exc: BaseException) -> str:
    from .answers import describe

    if isinstance(exc, SyntaxError):
        return f"SyntaxError: {exc.msg} (line {exc.lineno})"
    return describe(exc)


def _channel(conn):
    """``request -> result`` through the grader's machine; its refusals raised as errors of the
    kind they were."""
    from ..memory import CacheOverflowError
    from ..tiles import TileError

    kinds = {"CacheOverflowError": CacheOverflowError, "TileError": TileError}

    def request(req):
        send(conn, {"tile": req})
        reply = receive(conn)
        if "ok" in reply:
            return reply["ok"]
        kind, text = reply.get("error", ["TileError", "refused"])
        raise kinds.get(kind, Refused)(text)

    return request


def _serve(conn, names: dict) -> None:
    from ..tiles import Memory, Slow
    from .answers import Unsendable, _undefined, describe, encode

    while True:
        try:
            msg = receive(conn)
        except EOFError:
            return
        if "bye" in msg:
            return
        if "value" in msg:
            name = msg["value"]
            try:
                value = names.get(name)
                send(conn, {"value": None if value is None else encode(value)})
            except Unsendable as exc:
                send(conn, {"unsendable": str(exc)})
            continue
        fn = names.get(msg.get("call") or msg.get("run"))
        name = msg.get("call") or msg.get("run")
        if not callable(fn):
            send(conn, {"raised": _undefined(name, fn)})
            continue
        args = msg.get("args", [])
        if "run" in msg:
            mem = Memory(channel=_channel(conn), capacity=msg["M"])
            args = [Slow(k, shape, mem) for k, shape in msg["arrays"]] + list(args)
            args.insert(0, mem)
        start = time.perf_counter()
        try:
            returned = fn(*args)
        except BaseException as exc:            # noqa: BLE001 (SystemExit, KeyboardInterrupt too)
            send(conn, {"raised": describe(exc), "seconds": time.perf_counter() - start})
            continue
        try:
            send(conn, {"returned": encode(returned), "seconds": time.perf_counter() - start})
        except Unsendable as exc:
            send(conn, {"unsendable": f"{name} returned {exc}"})


def _undumpable() -> None:
    """``prctl(PR_SET_DUMPABLE, 0)``: other processes of this user (other notebooks graded at
    the same time) cannot read this one's memory, before it holds anything worth reading."""
    import ctypes

    try:
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def main() -> int:
    _undumpable()
    config = json.loads(sys.stdin.read())
    if config.get("processes"):                 # a user namespace of its own: count there
        import resource

        resource.setrlimit(resource.RLIMIT_NPROC, (config["processes"],) * 2)
    conn = Connection(int(config["fd"]))
    output = io.StringIO()
    with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
        shell = _shell()
    confined = _confine(config) if config.get("confine") else "not confined (asked not to be)"
    if config.get("drop") and os.geteuid() == 0:
        _drop_root(config["drop"])
    cells = receive(conn)["cells"]
    with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
        errors, names = _run_cells(shell, cells, conn)
    send(conn, {"ready": errors, "output": output.getvalue()[-4000:], "confined": confined})
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        _serve(conn, names)
    conn.close()
    os._exit(0)                                 # no atexit hooks of the notebook's


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
