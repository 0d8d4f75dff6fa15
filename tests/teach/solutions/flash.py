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
    N, d = Q.shape
    B_r = max(1, (mem.M - 2 * d) // (2 * d + 4))
    B_c = max(1, min(N, (mem.M - 2 * B_r * d - 3 * B_r) // (2 * d + B_r)))
    tau = 1 / np.sqrt(d)
    for i0 in range(0, N, B_r):
        r = min(B_r, N - i0)
        Q_i = mem.read(Q, slice(i0, i0 + r))
        O_i, m_i, l_i = mem.allocate((r, d)), mem.allocate(r, -np.inf), mem.allocate(r)
        m_new = mem.allocate(r)
        for j0 in range(0, N, B_c):
            c = min(B_c, N - j0)
            if not needed(i0, r, j0, c):
                continue
            K_j, V_j = mem.read(K, slice(j0, j0 + c)), mem.read(V, slice(j0, j0 + c))
            S = mem.allocate((r, c))
            S[...] = where(allowed(i0, r, j0, c), tau * (Q_i @ K_j.T), -np.inf)
            m_new[...] = maximum(m_i, S.max(axis=1))
            # a row with no key yet has m = -inf: shift it by 0, so exp gives 0, not NaN
            shift = where(m_new > -np.inf, m_new, 0.0)
            S[...] = exp(S - shift[:, None])
            m_i[...] = exp(m_i - shift)               # the rescaling factor
            l_i[...] = l_i * m_i + S.sum(axis=1)
            O_i[...] = O_i * m_i[:, None] + S @ V_j
            m_i[...] = m_new
            mem.free(S, K_j, V_j)
        O_i /= l_i[:, None]
        mem.write(O, O_i, slice(i0, i0 + r))
        mem.free(Q_i, O_i, m_i, l_i, m_new)
