"""Assignment 1: a tiled matrix product as a tile program, within an I/O budget.

The student writes the tile program ``tiled_matmul(mem, A, B, C)`` (:mod:`ioattn.tiles`), which
computes the product their variant names, ``C = A B``, ``C = A^T B`` or ``C = A B^T``, for
``A``, ``B`` in slow memory (stored as the product's form says) through a cache of ``mem.M``
entries. It is graded on correctness and on moving at most ``1.1 (2mnk / sqrt(M) + mn)``
entries (``C`` is ``m x n``, the inner dimension ``k``), the communication lower bound of
[COSMA]_ with ten percent to spare: only the outer-product schedule (one output tile kept in the
cache while strips of the two factors stream past) gets there.

Variants: the form of the product; a tile side ``b`` from 13 to 16, ``M = b^2 + 2b + r`` with
``0 <= r <= b/2`` (so the largest square tile with room for a strip of each factor has side
exactly ``b``), ``m`` and ``n`` multiples of ``b`` (3 to 5 tiles) and ``k`` from ``2b`` to
``5b``. Over that range the outer-product schedule with ``b x b`` tiles stays within the budget
(a test proves it for every variant) and the classical three-tile blocking does not.

References
----------
.. [COSMA] G. Kwasniewski et al., "Red-blue pebbling revisited: near optimal parallel
   matrix-matrix multiplication", SC 2019.
"""

from __future__ import annotations

import numpy as np

from .base import BudgetAssignment, Question, register

__all__ = ["FORMS", "Matmul", "budget", "example_inputs", "product", "shapes", "storage",
           "within_budget"]

#: The products a variant asks for.
FORMS = ("A @ B", "A.T @ B", "A @ B.T")


def within_budget(total: int, m: int, k: int, n: int, M: int) -> bool:
    """Whether ``total <= 1.1 (2mnk / sqrt(M) + mn)``, decided in exact integers."""
    lhs = 10 * total - 11 * m * n                   # 10 total - 11 mn <= 22 mnk / sqrt(M)
    return lhs <= 0 or lhs * lhs * M <= (22 * m * n * k) ** 2


def budget(m: int, k: int, n: int, M: int) -> int:
    """The largest total within ``1.1 (2mnk / sqrt(M) + mn)`` (exact)."""
    hi = 2 * m * k * n + m * n + 1
    lo = 0
    while lo < hi:                                   # the largest t with within_budget(t)
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if within_budget(mid, m, k, n, M) else (lo, mid - 1)
    return lo


def shapes(form: str, m: int, k: int, n: int) -> tuple[tuple, tuple]:
    """How ``A`` and ``B`` are stored for ``form``."""
    return ((k, m) if form == "A.T @ B" else (m, k)), ((n, k) if form == "A @ B.T" else (k, n))


def storage(p: dict) -> str:
    """How the variant's ``A`` and ``B`` are stored, in words, for messages: ``"for FORM =
    'A @ B.T', A is stored m x k = 40 x 50 and B is stored n x k = 30 x 50, so a tile of B
    is used transposed (b.T)"``."""
    form = p["FORM"]
    a, b = shapes(form, p["m"], p["k"], p["n"])
    names = {"A @ B": ("m x k", "k x n"), "A.T @ B": ("k x m", "k x n"),
             "A @ B.T": ("m x k", "n x k")}[form]
    text = (f"for FORM = {form!r}, A is stored {names[0]} = {a[0]} x {a[1]} and B is stored "
            f"{names[1]} = {b[0]} x {b[1]}")
    if form == "A @ B":
        return text
    which = "A" if form == "A.T @ B" else "B"
    return f"{text}, so a tile of {which} is used transposed ({which.lower()}.T)"


def product(form: str, A, B):
    """``form`` computed with NumPy."""
    return {"A @ B": lambda: A @ B, "A.T @ B": lambda: A.T @ B, "A @ B.T": lambda: A @ B.T}[
        form]()


def example_inputs(params: dict) -> tuple[np.ndarray, np.ndarray]:
    """The notebook's example ``A`` and ``B``: standard normal, from the variant's ``SEED``."""
    rng = np.random.default_rng(params["SEED"])
    a, b = shapes(params["FORM"], params["m"], params["k"], params["n"])
    return rng.standard_normal(a), rng.standard_normal(b)


@register
class Matmul(BudgetAssignment):
    name = "matmul"
    title = "A tiled matrix product as a tile program"
    questions = (
        Question("q1", "Your product, computed by a tile program", 2),
        Question("q2", "I/O within 1.1 (2mnk/sqrt(M) + mn)", 3),
    )
    answers = {"q1": ("tiled_matmul",), "q2": ("tiled_matmul",)}
    function = "tiled_matmul"

    def parameters(self, rng):
        form = FORMS[int(rng.integers(len(FORMS)))]
        b = int(rng.integers(13, 17))
        M = b * b + 2 * b + int(rng.integers(0, b // 2 + 1))
        m, n = (b * int(rng.integers(3, 6)) for _ in range(2))
        k = int(rng.integers(2 * b, 5 * b + 1))
        return {"FORM": form, "m": m, "k": k, "n": n, "M": M,
                "SEED": int(rng.integers(2 ** 31))}

    def budget(self, p):
        return budget(p["m"], p["k"], p["n"], p["M"])

    def problem(self, p, rng):
        if rng is None:
            A, B = example_inputs(p)
        else:
            a, b = shapes(p["FORM"], p["m"], p["k"], p["n"])
            A, B = rng.standard_normal(a), rng.standard_normal(b)
        return {"A": A, "B": B}, {"C": (p["m"], p["n"])}, {"C": product(p["FORM"], A, B)}

    def hint(self, p, kind, detail):
        shapes_wrong = "broadcast" in detail or "shape" in detail
        if kind == "time" or not (shapes_wrong or p["FORM"] != "A @ B" and "is wrong" in detail):
            return ""
        return f" ({storage(p)})"

    def hidden(self, p, rng, question):
        if question == "q2":
            return {**self.parameters(rng), "FORM": p["FORM"]}
        m, k, n = (int(x) for x in rng.integers(5, 41, size=3))
        return {"FORM": p["FORM"], "m": m, "k": k, "n": n, "M": int(rng.integers(40, 201)),
                "SEED": 0}
