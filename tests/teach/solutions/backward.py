import numpy as np

from ioattn.tiles import col_index, exp, row_index, where



def flash_backward(mem, Q, K, V, O, dO, L, dQ, dK, dV):
    """FlashAttention-2's backward: dK_j, dV_j stay while single query rows stream past."""
    N, d = Q.shape
    tau = 1 / np.sqrt(d)
    D = mem.scratch("D", N)
    zero = mem.allocate((1, d))
    for i in range(N):                                 # D = rowsum(dO * O); dQ = 0
        o, do, D_i = mem.read(O, slice(i, i + 1)), mem.read(dO, slice(i, i + 1)), mem.allocate(1)
        D_i[...] = (o * do).sum(axis=1)
        mem.write(D, D_i, slice(i, i + 1))
        mem.write(dQ, zero, slice(i, i + 1))
        mem.free(o, do, D_i)
    mem.free(zero)
    B_c = max(1, (mem.M - 3 * d - 2) // (4 * d + 2))
    for j0 in range(0, N, B_c):
        c = min(B_c, N - j0)
        K_j, V_j = mem.read(K, slice(j0, j0 + c)), mem.read(V, slice(j0, j0 + c))
        dK_j, dV_j = mem.allocate((c, d)), mem.allocate((c, d))
        for i in range(j0 if MASK == "causal" else 0, N):
            rows = slice(i, i + 1)
            q, do, dq = mem.read(Q, rows), mem.read(dO, rows), mem.read(dQ, rows)
            l, D_i = mem.read(L, rows), mem.read(D, rows)
            P = mem.allocate((1, c))
            S = tau * (q @ K_j.T)
            if MASK == "causal":
                S = where(col_index(j0, c) <= row_index(i, 1), S, -np.inf)
            P[...] = exp(S - l[:, None])
            dV_j += P.T @ do
            P[...] = P * (do @ V_j.T - D_i[:, None])          # dS
            dq += tau * (P @ K_j)
            dK_j += tau * (P.T @ q)
            mem.write(dQ, dq, rows)
            mem.free(q, do, dq, l, D_i, P)
        mem.write(dK, dK_j, slice(j0, j0 + c))
        mem.write(dV, dV_j, slice(j0, j0 + c))
        mem.free(K_j, V_j, dK_j, dV_j)
