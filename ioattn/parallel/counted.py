"""An MPI communicator that counts what it moves, and a ledger of the words a processor holds.

Every message the algorithms of :mod:`ioattn.parallel.engine` send goes through
:meth:`Counted.start`; the words received are read off each message's MPI status (what arrived,
not what was expected). Every buffer an algorithm keeps is entered with :meth:`Counted.hold` and
leaves with :meth:`Counted.drop`, so ``memory`` is the largest number of words held at once.
"""

from __future__ import annotations

import numpy as np

__all__ = ["Counted"]


class Counted:
    """Counts for one processor: ``sent``, ``received``, ``messages``, peak ``memory``, and the
    score entries computed at each step (``work``)."""

    def __init__(self, comm):
        from mpi4py import MPI

        self._MPI = MPI
        self.comm = comm
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.sent = self.received = self.messages = 0
        self.memory = 0
        self.work: list[int] = []
        self._held: dict[str, int] = {}

    # -- memory -----------------------------------------------------------------------------
    def hold(self, name: str, array: np.ndarray) -> np.ndarray:
        """Enter ``array`` (a buffer of ``array.size`` words) in the ledger under ``name``."""
        if name in self._held:
            raise RuntimeError(f"buffer {name!r} is already held")
        self._held[name] = int(array.size)
        self.memory = max(self.memory, sum(self._held.values()))
        return array

    def drop(self, *names: str) -> None:
        for name in names:
            del self._held[name]

    def rename(self, old: str, new: str) -> None:
        self._held[new] = self._held.pop(old)

    @property
    def holding(self) -> int:
        return sum(self._held.values())

    # -- messages ---------------------------------------------------------------------------
    def start(self, sends, recvs, tag: int = 0):
        """Post every send ``(dest, array)`` and receive ``(source, buffer)``; one message per
        pair. Returns a handle for :meth:`wait`. Arrays must be C-contiguous float64."""
        MPI = self._MPI
        reqs = []
        for source, buf in recvs:
            reqs.append(self.comm.Irecv([_contiguous(buf), MPI.DOUBLE], source=source, tag=tag))
        n_recv = len(reqs)
        for dest, arr in sends:
            reqs.append(self.comm.Isend([_contiguous(arr), MPI.DOUBLE], dest=dest, tag=tag))
            self.sent += int(arr.size)
            self.messages += 1
        return reqs, n_recv

    def wait(self, handle) -> None:
        MPI = self._MPI
        reqs, n_recv = handle
        statuses = [MPI.Status() for _ in reqs]
        MPI.Request.Waitall(reqs, statuses)
        self.received += sum(s.Get_count(MPI.DOUBLE) for s in statuses[:n_recv])

    def exchange(self, sends, recvs, tag: int = 0) -> None:
        """:meth:`start` then :meth:`wait`."""
        self.wait(self.start(sends, recvs, tag))

    def totals(self) -> dict:
        return {"sent": self.sent, "received": self.received, "messages": self.messages,
                "memory": self.memory, "work": list(self.work)}


def _contiguous(a: np.ndarray) -> np.ndarray:
    if a.dtype != np.float64 or not a.flags.c_contiguous:
        raise TypeError("a message buffer must be a C-contiguous float64 array")
    return a
