"""Patch ``ioattn.memory.TwoLevelMemory`` so its counters never grow (``io`` is always zero)
and the cache has no limit, then read A and B whole. Kind: reaching the referee (the counters).
"""
import ioattn.memory as memory
from ioattn.memory import IOCount, TwoLevelMemory

TwoLevelMemory.io = property(lambda self: IOCount(reads=0, writes=0, peak=0))
TwoLevelMemory._check_room = lambda self, *a, **k: None
memory.CacheOverflowError = type("Never", (Exception,), {})


def tiled_matmul(mem, A, B, C):
    a, w = mem.read(A), mem.read(B)
    acc = mem.allocate(C.shape)
    acc += (a.T if FORM == "A.T @ B" else a) @ (w.T if FORM == "A @ B.T" else w)
    mem.write(C, acc)
