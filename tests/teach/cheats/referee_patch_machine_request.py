"""Patch ``Machine.request`` so reads and writes are not counted (``io`` answers zero), then
run a cheap-to-write but expensive schedule (one entry of C at a time, rows of A and columns
of B read again for each). Kind: reaching the referee (faking the counts).
"""
from ioattn.tiles import machine

_real = machine.Machine.request


def request(self, req):
    if req and req[0] == "io":
        return {"reads": 0, "writes": 0, "total": 0, "peak": 0, "occupancy": 0}
    out = _real(self, req)
    self.memory.reads = self.memory.writes = 0
    return out


machine.Machine.request = request


def tiled_matmul(mem, A, B, C):
    m, n = C.shape
    for i in range(m):
        for j in range(0, n):
            a = mem.read(A, slice(None), slice(i, i + 1)) if FORM == "A.T @ B" \
                else mem.read(A, slice(i, i + 1))
            w = mem.read(B, slice(j, j + 1)) if FORM == "A @ B.T" \
                else mem.read(B, slice(None), slice(j, j + 1))
            acc = mem.allocate((1, 1))
            acc += (a.T if FORM == "A.T @ B" else a) @ (w.T if FORM == "A @ B.T" else w)
            mem.write(C, acc, slice(i, i + 1), slice(j, j + 1))
            mem.free(a, w, acc)
