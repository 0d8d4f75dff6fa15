import numpy as np

from ioattn.tiles import col_index, exp, maximum, row_index, where


def visible(q_lo, q_hi, k_lo, k_hi):
    """Plain Python: does any query in [q_lo, q_hi) see a key in [k_lo, k_hi)?"""
    if MASK == "causal":
        return k_lo < q_hi
    if MASK == "window":
        return k_lo < q_hi and k_hi > q_lo - W + 1
    return k_lo < W or k_lo < q_hi


def scores_mask(q_lo, rows, k_lo, cols):
    i = row_index(q_lo, rows)
    j = col_index(k_lo, cols)
    causal = j <= i
    if MASK == "causal":
        return causal
    if MASK == "window":
        return causal * (j > i - W)
    return (causal + (j < W)) > 0


def flash_attention(mem, Q, K, V, O):
    n, dim = Q.shape
    scale = 1.0 / np.sqrt(dim)
    # footprint: Q block + O block (2 r dim), stats m, l, tmp (3 r), K and V blocks (2 c dim),
    # scores (r c); with c = 1 the largest r
    rows = max(1, (mem.M - 2 * dim) // (2 * dim + 4))
    cols = max(1, (mem.M - rows * (2 * dim + 3)) // (2 * dim + rows))
    cols = min(cols, n)
    q_lo = 0
    while q_lo < n:
        q_hi = min(n, q_lo + rows)
        r = q_hi - q_lo
        q_blk = mem.read(Q, slice(q_lo, q_hi))
        acc = mem.allocate((r, dim))
        run_max = mem.allocate(r, fill=-np.inf)
        run_sum = mem.allocate(r)
        new_max = mem.allocate(r)
        k_lo = 0
        while k_lo < n:
            k_hi = min(n, k_lo + cols)
            if visible(q_lo, q_hi, k_lo, k_hi):
                c = k_hi - k_lo
                k_blk = mem.read(K, slice(k_lo, k_hi))
                v_blk = mem.read(V, slice(k_lo, k_hi))
                p = mem.allocate((r, c))
                p[...] = where(scores_mask(q_lo, r, k_lo, c), (q_blk @ k_blk.T) * scale, -np.inf)
                new_max[...] = maximum(run_max, p.max(axis=1))
                safe = where(new_max > -np.inf, new_max, 0.0)
                p[...] = exp(p - safe[:, None])
                run_max[...] = exp(run_max - safe)
                run_sum[...] = run_max * run_sum + p.sum(axis=1)
                acc[...] = run_max[:, None] * acc + p @ v_blk
                run_max[...] = new_max
                mem.free(k_blk, v_blk, p)
            k_lo = k_hi
        acc[...] = acc / run_sum[:, None]
        mem.write(O, acc, slice(q_lo, q_hi))
        mem.free(q_blk, acc, run_max, run_sum, new_max)
        q_lo = q_hi
