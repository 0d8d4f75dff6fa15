import numpy as np

from ioattn.tiles import col_index, exp, maximum, row_index, where


def allowed(i0, r, j0, c):
    rows, cols = row_index(i0, r), col_index(j0, c)
    if MASK == "causal":
        return cols <= rows
    if MASK == "window":
        return (cols <= rows) * (cols > rows - W)
    return (cols <= rows) + (cols < W) > 0


def needed(i0, r, j0, c):
    """Whether the block has a key some query of the block attends to."""
    first, last = i0, i0 + r - 1
    if MASK == "prefix":
        return j0 < W or j0 <= last
    if MASK == "window":
        return j0 <= last and j0 + c - 1 > first - W
    return j0 <= last


def flash_attention(mem, Q, K, V, O):
    """FlashAttention-1's loop order: K_j, V_j outer, one query row at a time inner; the
    unnormalised output row and its running maximum and sum go back to slow memory between
    key blocks."""
    N, d = Q.shape
    B_c = max(1, min(N, (mem.M - 2 * d - 4) // (2 * d + 1)))
    tau = 1 / np.sqrt(d)
    m_slow, l_slow = mem.scratch("m", N), mem.scratch("l", N)
    starts = list(range(0, N, B_c))
    for j0 in starts:
        c = min(B_c, N - j0)
        if not any(needed(i, 1, j0, c) for i in range(N)):
            continue
        K_j, V_j = mem.read(K, slice(j0, j0 + c)), mem.read(V, slice(j0, j0 + c))
        for i in range(N):
            if not needed(i, 1, j0, c):
                continue
            row = slice(i, i + 1)
            first = not any(needed(i, 1, j, min(B_c, N - j)) for j in starts if j < j0)
            last = not any(needed(i, 1, j, min(B_c, N - j)) for j in starts if j > j0)
            q = mem.read(Q, row)
            if first:
                o, m, l = mem.allocate((1, d)), mem.allocate(1, -np.inf), mem.allocate(1)
            else:
                o, m, l = mem.read(O, row), mem.read(m_slow, row), mem.read(l_slow, row)
            s, m_new = mem.allocate((1, c)), mem.allocate(1)
            s[...] = where(allowed(i, 1, j0, c), tau * (q @ K_j.T), -np.inf)
            m_new[...] = maximum(m, s.max(axis=1))
            shift = where(m_new > -np.inf, m_new, 0.0)
            s[...] = exp(s - shift[:, None])
            m[...] = exp(m - shift)
            l[...] = l * m + s.sum(axis=1)
            o[...] = o * m[:, None] + s @ V_j
            if last:
                o /= l[:, None]
                mem.write(O, o, row)
            else:
                mem.write(O, o, row)
                mem.write(m_slow, m_new, row)
                mem.write(l_slow, l, row)
            mem.free(q, o, m, l, s, m_new)
        mem.free(K_j, V_j)
