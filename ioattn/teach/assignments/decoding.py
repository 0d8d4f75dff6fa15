"""Assignment 6: a decoding step with grouped heads and a paged cache, within an I/O budget.

The student writes the tile program ``decode(mem, Q, K, V, O, table, P_s, N_k, N_q)``
(:mod:`ioattn.tiles`): ``O = softmax(tau Q K^T + B) V``, ``tau = 1 / sqrt(d)``, for ``H_q``
query heads of ``N_q`` new rows each sharing ``H_kv`` key/value heads (``g = H_q / H_kv``), the
cache of ``N_k`` rows a key/value head stored in pages of ``P_s`` rows of a page pool and found
through a block table, as in :mod:`ioattn.decoding` (the book's chapter on decoding). The
variant's mask ``B`` is none or the chunk-causal mask (:func:`ioattn.masks.causal_chunk`: the
``N_q`` new rows are the cache's last, row ``i`` sees the keys ``j <= N_k - N_q + i``).

The arrays, all 2-D:

- ``Q`` and ``O``, ``(H_q N_q) x d``: the query heads of key/value head ``h`` are the rows
  ``h R`` to ``h R + R - 1``, ``R = g N_q``, stacked position-major
  (:func:`ioattn.inference.stack_group`): row ``h R + i g + j`` is position ``i`` of query head
  ``h g + j``;
- ``K`` and ``V``, the page pool, ``(blocks P_s) x (H_kv d)``: pool block ``b`` is the rows
  ``b P_s`` to ``b P_s + P_s - 1``, and key/value head ``h`` its columns ``h d`` to ``h d + d -
  1`` (the layout of a serving system's pool, block, slot, head, dimension); page ``p`` of the
  sequence (its keys ``p P_s`` to ``p P_s + P_s - 1``) lies in block ``table[p]``, the last
  page's slots past ``N_k`` unused; blocks the table does not name hold other data.

The block table is a plain list of ints given to the program (a tile program cannot look at
values in the machine, so it cannot read block numbers from slow memory): the program moves no
table entry, where :func:`ioattn.decoding.decoding_cost` counts one a page a tile. What a tile
program of a schedule moves is therefore that schedule's ``decoding_cost(...).total`` less its
``decoding_terms(...)["table"]`` (:func:`program_count`; a test runs both schedules as tile
programs and finds exactly that).

The budget is a quarter more than the exact count of ioattn's stacked, unsplit schedule at the
same ``M``: ``floor(5/4 decoding_cost(H_q, H_kv, N_q, N_k, d, B_c=B_c, P_s=P_s).total)`` with
``B_c`` of :func:`ioattn.decoding.decoding_plan` (:func:`budget`). Variants come from a grid
(:func:`grid`) on which that plan's tile is whole pages (so it reads every page once) and on
which the per-head schedule, which reads every page once per query head, moves more than the
budget: grouping is what question 2 asks for.

Variants: the mask; ``d`` in {4, 8}, ``H_kv`` in {1, 2}, ``g`` in {2, 3, 4}, ``N_q`` in {2, 3},
``P_s`` in {4, 6, 8}, ``N_k`` in {45, 61, 80}, and ``M`` from :func:`least_cache` to nearly three
pages' working sets ``(2d + R) P_s`` more (room for one to four pages beside the stacked rows).
The block table of an instance comes from its ``SEED`` (:func:`table_of`): the student's own
sizes are graded with their own table and hidden data, the hidden instances with seeds, and so
tables, of their own.

References
----------
.. [PA] W. Kwon et al., "Efficient memory management for large language model serving with
   PagedAttention", SOSP 2023 (a paged cache found through a block table).
.. [GQA] J. Ainslie et al., "GQA: training generalized multi-query transformer models from
   multi-head checkpoints", EMNLP 2023 (query heads sharing key/value heads).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ...decoding import decoding_cost, decoding_plan, decoding_terms
from ...inference import stack_group
from ...masks import causal_chunk
from .base import BudgetAssignment, Question, register

__all__ = ["Decoding", "MASKS", "budget", "example_inputs", "grid", "least_cache", "outputs_of",
           "program_count", "sizes", "table_of"]

#: The masks a variant asks for.
MASKS = ("none", "causal")

#: The keys of a variant's sizes, in the order of :func:`budget`'s arguments.
SIZES = ("H_q", "H_kv", "N_q", "N_k", "d", "P_s", "M")


def sizes(p: dict) -> tuple:
    """``(H_q, H_kv, N_q, N_k, d, P_s, M)`` of the variant ``p``."""
    return tuple(p[k] for k in SIZES)


def least_cache(H_q: int, H_kv: int, N_q: int, d: int, P_s: int) -> int:
    """The least cache a program must work in: ``(2d + 4) R + (2d + R) P_s``, ``R = g N_q``
    (the stacked rows and their output, four vectors of ``R``, one page of ``K`` and ``V`` and
    its scores)."""
    R = H_q // H_kv * N_q
    return (2 * d + 4) * R + (2 * d + R) * P_s


def budget(H_q: int, H_kv: int, N_q: int, N_k: int, d: int, P_s: int, M: int) -> int:
    """``floor(5/4 * decoding_cost(...).total)`` of the stacked, unsplit schedule with
    :func:`ioattn.decoding.decoding_plan`'s key tile at ``M``."""
    plan = decoding_plan(H_q, H_kv, N_q, N_k, d, M, P_s=P_s)
    return 5 * plan.cost().total // 4


def program_count(H_q: int, H_kv: int, N_q: int, N_k: int, d: int, P_s: int, M: int, *,
                  grouping: str = "stacked") -> int:
    """What a tile program of ``grouping``'s schedule (:func:`ioattn.decoding.decoding_plan`'s
    tile at ``M``) moves: ``decoding_cost(...).total`` less the ``"table"`` term of
    :func:`ioattn.decoding.decoding_terms` (the table is a plain list here)."""
    plan = decoding_plan(H_q, H_kv, N_q, N_k, d, M, P_s=P_s, grouping=grouping)
    terms = decoding_terms(H_q, H_kv, N_q, N_k, d, B_c=plan.B_c, P_s=P_s, grouping=grouping)
    return plan.cost().total - terms["table"]


def table_of(p: dict) -> list:
    """The block table of ``p``: ``n = ceil(N_k / P_s)`` distinct blocks of a pool of ``n +
    max(1, floor(n / 2))``, in a random order drawn from ``SEED`` (hidden instances carry seeds
    of their own)."""
    n = -(-p["N_k"] // p["P_s"])
    order = np.random.default_rng(p["SEED"]).permutation(n + max(1, n // 2))
    return [int(b) for b in order[:n]]


def example_inputs(p: dict, rng=None) -> dict:
    """The stacked ``Q``, the pools ``K``, ``V`` and the block table of ``p``: standard normal
    data (from ``SEED``, or from ``rng``) and :func:`table_of`. Also, for the reference, the
    cache as ``(H_kv, N_k, d)`` arrays and ``Q`` as ``(H_q, N_q, d)`` (keys ``"K_cache"``,
    ``"V_cache"``, ``"Q_heads"``)."""
    rng = np.random.default_rng([p["SEED"], 1]) if rng is None else rng
    H_q, H_kv, N_q, N_k, d, P_s, _ = sizes(p)
    g, table = H_q // H_kv, table_of(p)
    blocks = len(table) + max(1, len(table) // 2)
    Q_heads = rng.standard_normal((H_q, N_q, d))
    K_pool, V_pool = (rng.standard_normal((blocks * P_s, H_kv * d)) for _ in range(2))
    rows = np.concatenate([np.arange(b * P_s, b * P_s + P_s) for b in table])[:N_k]
    cache = [np.stack([pool[rows, h * d:(h + 1) * d] for h in range(H_kv)])
             for pool in (K_pool, V_pool)]
    Q = np.concatenate([stack_group(Q_heads[h * g:(h + 1) * g]) for h in range(H_kv)])
    return {"Q": Q, "K": K_pool, "V": V_pool, "table": table, "Q_heads": Q_heads,
            "K_cache": cache[0], "V_cache": cache[1]}


def outputs_of(p: dict, data: dict) -> np.ndarray:
    """The expected ``O`` (``(H_q N_q) x d``, stacked as ``Q``), in float64 NumPy: each query
    head against its key/value head's cache, with the variant's mask."""
    H_q, H_kv, N_q, N_k, d, _, _ = sizes(p)
    g = H_q // H_kv
    allowed = causal_chunk(N_q, N_k) if p["MASK"] == "causal" else np.ones((N_q, N_k), bool)
    heads = np.empty((H_q, N_q, d))
    for q in range(H_q):
        S = data["Q_heads"][q] @ data["K_cache"][q // g].T / np.sqrt(d)
        S = np.where(allowed, S, -np.inf)
        P = np.exp(S - S.max(axis=1, keepdims=True))
        heads[q] = (P / P.sum(axis=1, keepdims=True)) @ data["V_cache"][q // g]
    return np.concatenate([stack_group(heads[h * g:(h + 1) * g]) for h in range(H_kv)])


@lru_cache(maxsize=1)
def grid() -> tuple:
    """The ``(H_q, H_kv, N_q, N_k, d, P_s, M)`` a variant is drawn from (the module
    docstring): every point has :func:`ioattn.decoding.decoding_plan`'s stacked tile a multiple
    of ``P_s`` and the per-head schedule's :func:`program_count` over the budget."""
    out = []
    for d in (4, 8):
        for H_kv in (1, 2):
            for g in (2, 3, 4):
                for N_q in (2, 3):
                    R = g * N_q
                    for P_s in (4, 6, 8):
                        M0 = least_cache(g * H_kv, H_kv, N_q, d, P_s)
                        step = (2 * d + R) * P_s
                        for N_k in (45, 61, 80):
                            for M in range(M0, M0 + 3 * step, max(1, step // 4)):
                                s = (g * H_kv, H_kv, N_q, N_k, d, P_s, M)
                                if decoding_plan(*s[:5], M, P_s=P_s).B_c % P_s:
                                    continue
                                if program_count(*s, grouping="per_head") > budget(*s):
                                    out.append(s)
    return tuple(out)


@register
class Decoding(BudgetAssignment):
    name = "decoding"
    title = "A decoding step with grouped heads and a paged cache, as a tile program"
    questions = (
        Question("q1", "O of every query head, computed by a tile program", 2),
        Question("q2", "I/O within 5/4 of the stacked schedule's at the same M", 3),
    )
    answers = {"q1": ("decode",), "q2": ("decode",)}
    function = "decode"

    def parameters(self, rng):
        g = grid()
        s = g[int(rng.integers(len(g)))]
        return {"MASK": MASKS[int(rng.integers(len(MASKS)))], **dict(zip(SIZES, s)),
                "SEED": int(rng.integers(2 ** 31))}

    def describe(self, p):
        return ", ".join(f"{k} = {p[k]}" for k in ("MASK", *SIZES))

    def budget(self, p):
        return budget(*sizes(p))

    def budget_hint(self, p):
        return ("; the budget is that of the stacked schedule, which reads every page of a "
                "key/value head once for all the g query heads it serves (reading it once per "
                "query head moves more)")

    def problem(self, p, rng):
        data = example_inputs(p, rng)
        rows = (p["H_q"] * p["N_q"], p["d"])
        return ({k: data[k] for k in ("Q", "K", "V")}, {"O": rows},
                {"O": outputs_of(p, data)})

    def extra_args(self, p):
        return (table_of(p), p["P_s"], p["N_k"], p["N_q"])

    def hidden(self, p, rng, question):
        if question == "q2":
            return {**self.parameters(rng), "MASK": p["MASK"]}
        d, H_kv, g = int(rng.integers(2, 7)), int(rng.integers(1, 4)), int(rng.integers(1, 5))
        N_q, P_s = int(rng.integers(1, 5)), int(rng.integers(2, 8))
        least = least_cache(g * H_kv, H_kv, N_q, d, P_s)
        return {"MASK": p["MASK"], "H_q": g * H_kv, "H_kv": H_kv, "N_q": N_q,
                "N_k": int(rng.integers(max(N_q, 9), 41)), "d": d, "P_s": P_s,
                "M": int(rng.integers(least, 2 * least + 1)),
                "SEED": int(rng.integers(2 ** 31))}
