import numpy as np

from ioattn.tiles import col_index, exp, maximum, row_index, where



def decode(mem, Q, K, V, O, table, P_s, N_k, N_q):
    """Per head: each query head's N_q rows against its key/value head's pages, so every page
    is read once per query head (right, and g times the stacked schedule's page reads)."""
    rows, d = Q.shape
    H_kv = K.shape[1] // d
    R = rows // H_kv
    g = R // N_q
    tau = 1 / np.sqrt(d)
    k = max(1, (mem.M - 2 * R * d - 3 * R) // ((2 * d + R) * P_s))
    for head in range(H_kv * g):
        h, j = divmod(head, g)
        cols = slice(h * d, (h + 1) * d)
        mine = [h * R + i * g + j for i in range(N_q)]  # its rows: position-major stacking
        q = mem.allocate((N_q, d))
        for i, row in enumerate(mine):
            t = mem.read(Q, slice(row, row + 1))
            q[i:i + 1, :] = tau * t
            mem.free(t)
        o, l = mem.allocate((N_q, d)), mem.allocate(N_q)
        m, m_new = mem.allocate(N_q, fill=-np.inf), mem.allocate(N_q)
        for p0 in range(0, len(table), k):
            pages = range(p0, min(p0 + k, len(table)))
            a, b = p0 * P_s, min(pages.stop * P_s, N_k)
            s = mem.allocate((N_q, b - a))
            held = []
            for p in pages:
                start, r = table[p] * P_s, min(P_s, N_k - p * P_s)
                K_p = mem.read(K, slice(start, start + r), cols)
                V_p = mem.read(V, slice(start, start + r), cols)
                c = (p - p0) * P_s
                s[:, c:c + r] = q @ K_p.T
                held.append((K_p, V_p, c, r))
            if MASK == "causal":
                s[...] = where(col_index(a, b - a) <= row_index(N_k - N_q, N_q), s, -np.inf)
            m_new[...] = maximum(m, s.max(axis=1))
            s[...] = exp(s - m_new[:, None])
            l[...] = exp(m - m_new) * l + s.sum(axis=1)
            o[...] = exp(m - m_new)[:, None] * o
            for K_p, V_p, c, r in held:
                o += s[:, c:c + r] @ V_p
            m[...] = m_new
            mem.free(s, *(t for K_p, V_p, _, _ in held for t in (K_p, V_p)))
        o[...] = o / l[:, None]
        for i, row in enumerate(mine):
            mem.write(O, o[i:i + 1], slice(row, row + 1))
        mem.free(q, o, l, m, m_new)
