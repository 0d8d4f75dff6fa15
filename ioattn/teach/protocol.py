"""Messages between the grader and a notebook's process: JSON over a socket, nothing else.

The grader never unpickles what the notebook's process sends (that would run its code in the
grader): every message is one JSON document, framed as
:meth:`multiprocessing.connection.Connection.send_bytes` frames it (a 4-byte big-endian length,
then the bytes).

The grader trusts no message. :func:`receive` takes at most ``limit`` bytes (default
:data:`MAX_BYTES`), which must be UTF-8, nested at most :data:`MAX_DEPTH` deep (checked by a
scan of the bytes before they are parsed, so no parser recursion is ever at stake) and free of
lone surrogates; ``NaN`` and ``Infinity`` are the floats they name (a tile expression's ``-inf``
is one). Anything else is a :class:`ProtocolError`.

Given a ``deadline`` (a :func:`time.monotonic` time), :func:`send` and :func:`receive` wait no
longer: the socket is put in non-blocking mode and each write and read waits with
:func:`select.poll` for what is left of the time, then raises :class:`TimeoutError`. A notebook
that stops reading, or sends half a message, cannot hold the grader. Without a deadline they
block, as the notebook's own process does.
"""

from __future__ import annotations

import json
import os
import re
import select
import struct
import time

import numpy as np

__all__ = ["MAX_BYTES", "MAX_DEPTH", "ProtocolError", "nesting", "parse", "receive", "send"]

#: The largest message either side accepts.
MAX_BYTES = 64 << 20
#: The deepest nesting of lists and objects a message may have (a tile request nests at most
#: 64 deep, an answer's plain data at most 66).
MAX_DEPTH = 128

_OPEN, _CLOSE, _QUOTE = (np.frombuffer(b"[{", np.uint8), np.frombuffer(b"]}", np.uint8),
                         ord('"'))
_ESCAPE = re.compile(rb"\\.", re.DOTALL)
_CHUNK = 1 << 20
_SURROGATE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


class ProtocolError(RuntimeError):
    """A message that is not one JSON document of the expected form."""


# ---------------------------------------------------------------------- sending
def send(conn, message, deadline: float | None = None) -> None:
    """Send ``message`` (JSON-ready data) as one JSON document.

    Parameters
    ----------
    conn : multiprocessing.connection.Connection
        One end of the socket.
    message : object
        JSON-ready data.
    deadline : float, optional
        A :func:`time.monotonic` time to give up at (default: wait as long as it takes).

    Raises
    ------
    TimeoutError
        If the other side has not taken the whole message by ``deadline``.
    OSError
        If the socket broke (``BrokenPipeError`` when the other side has ended).
    """
    data = json.dumps(message, separators=(",", ":")).encode()
    if deadline is None:
        conn.send_bytes(data)
        return
    fd = conn.fileno()
    _nonblocking(fd)
    view = memoryview(_header(len(data)) + data)
    while view:
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:
            _await(fd, select.POLLOUT, deadline)


def _header(n: int) -> bytes:
    """The length prefix ``Connection.send_bytes`` writes."""
    return struct.pack("!i", n) if n <= 0x7fffffff else struct.pack("!i", -1) + struct.pack("!Q", n)


# ---------------------------------------------------------------------- receiving
def receive(conn, deadline: float | None = None, limit: int = MAX_BYTES):
    """The next message, checked (see the module docstring).

    Parameters
    ----------
    conn : multiprocessing.connection.Connection
        One end of the socket.
    deadline : float, optional
        A :func:`time.monotonic` time to give up at (default: wait as long as it takes).
    limit : int
        The most bytes the message may have.

    Raises
    ------
    ProtocolError
        If the message is longer than ``limit`` or not a well-formed document.
    EOFError
        If the other side closed the connection.
    TimeoutError
        If the whole message has not come by ``deadline``.
    OSError
        If the socket broke.
    """
    if deadline is None:
        try:
            data = conn.recv_bytes(limit)
        except EOFError:
            raise
        except OSError as exc:               # longer than the limit, or the socket broke
            raise ProtocolError(f"unreadable message ({exc})") from None
        return parse(data, limit)
    fd = conn.fileno()
    _nonblocking(fd)
    size, = struct.unpack("!i", _read(fd, 4, deadline, first=True))
    if size == -1:
        size, = struct.unpack("!Q", _read(fd, 8, deadline))
    if size < 0 or size > limit:
        raise ProtocolError(f"a message of {size:,} bytes, more than the {limit:,} allowed")
    return parse(_read(fd, size, deadline), limit)


def parse(data: bytes, limit: int = MAX_BYTES):
    """One message's bytes as data, checked: at most ``limit`` bytes of UTF-8, nested at most
    :data:`MAX_DEPTH` deep, no lone surrogates; :class:`ProtocolError` otherwise."""
    if len(data) > limit:
        raise ProtocolError(f"a message of {len(data):,} bytes, more than the {limit:,} allowed")
    data = bytes(data)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ProtocolError("a message that is not UTF-8") from None
    if data.count(b"[") + data.count(b"{") > MAX_DEPTH:        # else it cannot nest deeper
        depth = nesting(data)
        if depth > MAX_DEPTH:
            raise ProtocolError(f"a message nested {depth:,} deep, more than the {MAX_DEPTH} "
                                "allowed")
    try:
        message = json.loads(text)
    except (ValueError, RecursionError):
        raise ProtocolError("a message that is not JSON") from None
    if _SURROGATE.search(text) and _has_lone_surrogate(message):
        raise ProtocolError("a message with a lone surrogate (text that is not Unicode)")
    return message


def nesting(data: bytes) -> int:
    """How deep the lists and objects of a JSON document nest, from its bytes alone (brackets
    inside strings do not count; a malformed document gets some number, and fails to parse).
    A vectorised scan, a megabyte at a time."""
    if b"\\" in data:
        data = _ESCAPE.sub(b"__", data)          # escaped quotes (and backslashes) gone
    codes = np.frombuffer(data, np.uint8)
    deepest = depth = quotes = 0
    for start in range(0, codes.size, _CHUNK):
        chunk = codes[start:start + _CHUNK]
        inside = (np.cumsum(chunk == _QUOTE, dtype=np.int64) + quotes) % 2 == 1
        step = np.isin(chunk, _OPEN).astype(np.int32) - np.isin(chunk, _CLOSE)
        step[inside] = 0
        levels = np.cumsum(step, dtype=np.int64) + depth
        deepest = max(deepest, int(levels.max(initial=0)))
        depth, quotes = int(levels[-1]), quotes + int(np.count_nonzero(chunk == _QUOTE))
    return deepest


def _has_lone_surrogate(message) -> bool:
    try:
        json.dumps(message, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


# ---------------------------------------------------------------------- the socket
def _nonblocking(fd: int) -> None:
    if os.get_blocking(fd):
        os.set_blocking(fd, False)


def _read(fd: int, n: int, deadline: float, first: bool = False) -> bytes:
    """Exactly ``n`` bytes from ``fd`` by ``deadline``."""
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        if time.monotonic() >= deadline:
            raise TimeoutError("no (whole) message before the deadline")
        try:
            k = os.readv(fd, [view[got:]])
        except BlockingIOError:
            _await(fd, select.POLLIN, deadline)
            continue
        if k == 0:
            if first and got == 0:
                raise EOFError
            raise ProtocolError("the connection ended in the middle of a message")
        got += k
    return bytes(buf)


def _await(fd: int, events: int, deadline: float) -> None:
    """Wait until ``fd`` is ready for ``events`` (or has hung up); :class:`TimeoutError` at
    ``deadline``."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("the other side did not keep up before the deadline")
    poller = select.poll()
    poller.register(fd, events)
    if not poller.poll(max(1, int(left * 1000))):
        raise TimeoutError("the other side did not keep up before the deadline")
