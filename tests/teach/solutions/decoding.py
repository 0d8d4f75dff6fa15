import numpy as np

from ioattn.tiles import col_index, exp, maximum, row_index, where



def decode(mem, Q, K, V, O, table, P_s, N_k, N_q):
    """Stacked: the g N_q rows of a key/value head stay while its pages stream past, once."""
    rows, d = Q.shape
    H_kv = K.shape[1] // d
    R = rows // H_kv                                   # g N_q rows a key/value head
    g = R // N_q
    tau = 1 / np.sqrt(d)
    k = max(1, (mem.M - 2 * R * d - 3 * R) // ((2 * d + R) * P_s))   # pages a step
    for h in range(H_kv):
        mine, cols = slice(h * R, (h + 1) * R), slice(h * d, (h + 1) * d)
        q = mem.read(Q, mine)
        q[...] = tau * q
        o, l = mem.allocate((R, d)), mem.allocate(R)
        m, m_new = mem.allocate(R, fill=-np.inf), mem.allocate(R)
        for p0 in range(0, len(table), k):
            pages = range(p0, min(p0 + k, len(table)))
            a, b = p0 * P_s, min(pages.stop * P_s, N_k)
            s = mem.allocate((R, b - a))
            held = []
            for p in pages:
                start, r = table[p] * P_s, min(P_s, N_k - p * P_s)
                K_p = mem.read(K, slice(start, start + r), cols)
                V_p = mem.read(V, slice(start, start + r), cols)
                c = (p - p0) * P_s
                s[:, c:c + r] = q @ K_p.T
                held.append((K_p, V_p, c, r))
            if MASK == "causal":                        # row i g + j sees j' <= N_k - N_q + i
                s[...] = where(g * (col_index(a, b - a) - (N_k - N_q)) <= row_index(0, R), s,
                               -np.inf)
            m_new[...] = maximum(m, s.max(axis=1))
            s[...] = exp(s - m_new[:, None])
            l[...] = exp(m - m_new) * l + s.sum(axis=1)
            o[...] = exp(m - m_new)[:, None] * o
            for K_p, V_p, c, r in held:
                o += s[:, c:c + r] @ V_p
            m[...] = m_new
            mem.free(s, *(t for K_p, V_p, _, _ in held for t in (K_p, V_p)))
        o[...] = o / l[:, None]
        mem.write(O, o, mine)
        mem.free(q, o, l, m, m_new)
