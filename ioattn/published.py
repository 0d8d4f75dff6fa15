"""Attention throughput measured and published by others, with the figure each number is read from.

These are measurements made by the authors of the papers cited, on their GPUs; nothing here was
measured by this package. They let a roofline (:mod:`ioattn.roofline`) be set beside what real
kernels reach. Every record is one bar of a bar chart, the TFLOP/s value printed above the bar,
tied to a panel whose caption states the head dimension ``d`` and whether the mask is causal.

Source. J. Shah, G. Bikshandi, Y. Zhang, V. Thakkar, P. Ramani, T. Dao, *FlashAttention-3: Fast
and Accurate Attention with Asynchrony and Low-precision*, arXiv:2407.08608v2 (12 July 2024),
section 4.1: an H100 80GB SXM5, FP16 inputs (the figures' captions say FP16/BF16);
FlashAttention-2, cuDNN ("a vendor's implementation of FlashAttention-2 optimized for H100
GPUs") and FlashAttention-3 (the Triton and standard-attention bars are not kept). Figure 5,
"Attention forward speed (FP16/BF16) on H100 GPU", panels (a) to (f) = (d, causal) = (64, no),
(64, yes), (128, no), (128, yes), (256, no), (256, yes); Figure 6, "Attention backward speed
(FP16/BF16) on H100 GPU", panels (a) and (b) = d 64 and 128, both without causal mask. Later
versions of the paper (its NeurIPS 2024 version quotes "up to 840 TFLOPs/s" for BF16) report
other numbers; every value here is v2's.

Convention (the paper's "Benchmark settings"): sequence lengths ``N`` = 512, 1k, ..., 16k; batch
size such that batch x N = 16k tokens; hidden dimension 2048, so ``heads = 2048 / d`` (32, 16 or
8); forward FLOPs counted as ``4 N^2 d heads`` per sequence, halved with a causal mask, and
backward FLOPs as 2.5 times the forward ones (:func:`flops`). TFLOP/s = FLOPs / measured time.

Evidence and rules. The values were read off the chart images of each panel, some panels twice
and independently (the comment above each panel says which), and checked against the PDF's own
text layer (``pdftotext`` of arXiv:2407.08608v2), in
which every printed bar label lies under the caption of its panel: that ties a chart to its panel
(the chart images say neither "causal" nor the panel letter). A value is kept only when every copy
read agrees on it; where two copies disagree it is left out (listed under each panel). The
FlashAttention-2 paper (T. Dao, arXiv:2307.08691) measures on an A100 80GB SXM4 (its Figures 4 to
6) and on an H100 only forward + backward together (Figure 7); no reading or text layer of
its charts could be found, so it contributes no record. FlashAttention-2's H100 bars below are the
FlashAttention-3 paper's measurements of it.

>>> len(PUBLISHED), len(PUBLISHED_BACKWARD)
(104, 36)
>>> max(m.tflops for m in select("H100", "FlashAttention-3"))     # Fig. 5(e), 16k
756
>>> [m.tflops for m in select(impl="cuDNN", d=128, causal=True)]
[315, 410, 484, 518, 529, 539]
"""

from __future__ import annotations

from typing import NamedTuple

from .gpus import GPUS

__all__ = ["Measurement", "PUBLISHED", "PUBLISHED_BACKWARD", "SOURCES", "IMPLS", "SEQLENS",
           "HEAD_DIMS", "TOKENS", "HIDDEN", "flops", "select"]

#: Full citations, by the key a :class:`Measurement` names (the book's BibTeX keys).
SOURCES: dict[str, str] = {
    "shah2024flashattention3": (
        "J. Shah, G. Bikshandi, Y. Zhang, V. Thakkar, P. Ramani, T. Dao, FlashAttention-3: Fast "
        "and Accurate Attention with Asynchrony and Low-precision, arXiv:2407.08608v2, "
        "12 July 2024"),
}

#: Implementations as the papers' legends name them.
IMPLS = ("FlashAttention-2", "cuDNN", "FlashAttention-3")
#: The benchmark grid: sequence lengths 512, 1k, ..., 16k and head dimensions.
SEQLENS = (512, 1024, 2048, 4096, 8192, 16384)
HEAD_DIMS = (64, 128, 256)
#: batch x N tokens and the hidden dimension heads x d of every benchmark.
TOKENS = 16384
HIDDEN = 2048


class Measurement(NamedTuple):
    """One published throughput: ``tflops`` TFLOP/s as printed, for ``batch`` sequences of
    length ``N`` with ``heads`` heads of dimension ``d``, on ``gpu`` (a key of
    :data:`ioattn.gpus.GPUS`), from ``figure`` of ``source`` (a key of :data:`SOURCES`)."""

    impl: str
    source: str
    figure: str
    gpu: str
    dtype: str
    d: int
    N: int
    causal: bool
    tflops: int
    heads: int
    batch: int


def _panel(figure: str, d: int, causal: bool, bars: dict[str, tuple]) -> list[Measurement]:
    """The records of one FA3 panel: ``bars[impl]`` lists the printed values at
    :data:`SEQLENS`, ``None`` where a value was left out."""
    out = []
    for impl, values in bars.items():
        for N, tflops in zip(SEQLENS, values, strict=True):
            if tflops is not None:
                out.append(Measurement(impl, "shah2024flashattention3", figure, "H100",
                                       "float16", d, N, causal, tflops, HIDDEN // d, TOKENS // N))
    return out


FA2, CUDNN, FA3 = IMPLS

#: Forward-pass throughput, FlashAttention-3 paper, Figure 5 (H100 80GB SXM5, FP16).
PUBLISHED: tuple[Measurement, ...] = tuple(
    # (a) Forward, without causal mask, head dim 64.
    # Evidence: two readings of the chart, both agreeing with the text layer.
    _panel("Fig. 5(a)", 64, False, {
        FA2: (282, 306, 318, 321, 322, 324),
        CUDNN: (335, 373, 395, 408, 412, 413),
        FA3: (333, 392, 460, 476, 496, 497)})
    # (b) Forward, with causal mask, head dim 64.
    # Evidence: one reading of the chart, agreeing with the text layer on these three series
    # (its Triton 1k, 288, is 291 there).
    + _panel("Fig. 5(b)", 64, True, {
        FA2: (180, 229, 262, 284, 295, 299),
        CUDNN: (225, 288, 334, 363, 379, 388),
        FA3: (197, 265, 371, 420, 460, 473)})
    # (c) Forward, without causal mask, head dim 128.
    # Evidence: two readings of the chart, checked against the text layer; they disagree at
    # N = 512 (cuDNN 497 / FA3 467 against 467 / 497) and on FA2 at 16k (370 against 395): those
    # three values are left out.
    + _panel("Fig. 5(c)", 128, False, {
        FA2: (309, 350, 362, 368, 370, None),
        CUDNN: (None, 574, 617, 609, 600, 595),
        FA3: (None, 565, 625, 638, 646, 648)})
    # (d) Forward, with causal mask, head dim 128.
    # Evidence: two readings of the chart, both agreeing with the text layer.
    + _panel("Fig. 5(d)", 128, True, {
        FA2: (191, 260, 298, 319, 333, 335),
        CUDNN: (315, 410, 484, 518, 529, 539),
        FA3: (292, 423, 521, 579, 602, 616)})
    # (e) Forward, without causal mask, head dim 256.
    # Evidence: one reading of the chart, checked against the text layer; it reads FA3 at 1k as
    # 639, the text layer as 627: left out.
    + _panel("Fig. 5(e)", 256, False, {
        FA2: (275, 313, 321, 323, 324, 326),
        CUDNN: (470, 546, 580, 581, 580, 581),
        FA3: (482, None, 707, 736, 746, 756)})
    # (f) Forward, with causal mask, head dim 256.
    # Evidence: one reading of the chart, agreeing with the text layer (these labels are the
    # right-hand column under caption (f)).
    + _panel("Fig. 5(f)", 256, True, {
        FA2: (208, 251, 278, 293, 297, 298),
        CUDNN: (308, 391, 450, 483, 497, 509),
        FA3: (286, 427, 537, 612, 628, 642)})
)

#: Backward-pass throughput, FlashAttention-3 paper, Figure 6 (H100 80GB SXM5, FP16, no causal
#: mask); FLOPs counted as 2.5 times the forward ones (:func:`flops` with ``backward=True``).
PUBLISHED_BACKWARD: tuple[Measurement, ...] = tuple(
    # (a) Backward, without causal mask, head dim 64.
    # Evidence: two readings of the chart (one of the first three lengths only), both agreeing
    # with the text layer.
    _panel("Fig. 6(a)", 64, False, {
        FA2: (198, 238, 264, 279, 287, 291),
        CUDNN: (266, 348, 395, 417, 432, 433),
        FA3: (272, 363, 422, 453, 472, 474)})
    # (b) Backward, without causal mask, head dim 128.
    # Evidence: two readings of the chart, both agreeing with the text layer.
    + _panel("Fig. 6(b)", 128, False, {
        FA2: (214, 260, 291, 310, 318, 322),
        CUDNN: (305, 408, 465, 499, 518, 516),
        FA3: (316, 424, 501, 542, 559, 561)})
)


def flops(m: Measurement, backward: bool = False) -> int:
    """The operations the paper counts for ``m``: ``4 N^2 d heads batch`` forward, halved with a
    causal mask; backward 2.5 times that (five matrix products against two). Exact.

    >>> flops(PUBLISHED[0]) == 4 * 512**2 * 64 * 32 * 32
    True
    """
    forward = 4 * m.N * m.N * m.d * m.heads * m.batch // (2 if m.causal else 1)
    return forward * 5 // 2 if backward else forward


def select(gpu: str | None = None, impl: str | None = None, d: int | None = None,
           causal: bool | None = None, records: tuple[Measurement, ...] = PUBLISHED
           ) -> list[Measurement]:
    """The records matching every given filter, in order of ``records`` (forward by default;
    pass :data:`PUBLISHED_BACKWARD` for the backward pass), then of ``N``.

    Parameters
    ----------
    gpu : str, optional
        A key of :data:`ioattn.gpus.GPUS`.
    impl : str, optional
        One of :data:`IMPLS`.
    d : int, optional
        A head dimension of :data:`HEAD_DIMS`.
    causal : bool, optional
        With (True) or without (False) a causal mask.

    Raises
    ------
    ValueError
        For a filter value that no record could match (an unknown GPU or implementation, a head
        dimension off the grid, a non-boolean ``causal``).
    """
    if gpu is not None and gpu not in GPUS:
        raise ValueError(f"unknown GPU {gpu!r}; known: {', '.join(GPUS)}")
    if impl is not None and impl not in IMPLS:
        raise ValueError(f"unknown implementation {impl!r}; known: {', '.join(IMPLS)}")
    if d is not None and (isinstance(d, bool) or d not in HEAD_DIMS):
        raise ValueError(f"head dimension d must be one of {HEAD_DIMS}, got {d!r}")
    if causal is not None and not isinstance(causal, bool):
        raise ValueError(f"causal must be True, False or None, got {causal!r}")
    return [m for m in records
            if (gpu is None or m.gpu == gpu) and (impl is None or m.impl == impl)
            and (d is None or m.d == d) and (causal is None or m.causal == causal)]
