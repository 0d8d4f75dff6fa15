"""Messages between the grader and a notebook's process: JSON over a socket, nothing else.

The grader never unpickles what the notebook's process sends (that would run its code in the
grader): every message is one JSON document of at most :data:`MAX_BYTES` bytes, sent with
:meth:`multiprocessing.connection.Connection.send_bytes`.
"""

from __future__ import annotations

import json

__all__ = ["MAX_BYTES", "ProtocolError", "receive", "send"]

#: The largest message either side accepts.
MAX_BYTES = 64 << 20


class ProtocolError(RuntimeError):
    """A message that is not one JSON document of the expected form."""


def send(conn, message) -> None:
    """Send ``message`` (JSON-ready data) as one JSON document."""
    conn.send_bytes(json.dumps(message, separators=(",", ":")).encode())


def receive(conn):
    """The next message; :class:`ProtocolError` if it is not JSON (EOFError if the other side
    closed the connection)."""
    try:
        data = conn.recv_bytes(MAX_BYTES)
    except OSError as exc:                   # longer than MAX_BYTES, or the socket broke
        raise ProtocolError(f"unreadable message ({exc})") from None
    try:
        return json.loads(data)
    except ValueError:
        raise ProtocolError("a message that is not JSON") from None
