"""Measured beside predicted: a benchmark result next to the roofline of :mod:`ioattn.roofline`.

A result of :mod:`ioattn.gpu.benchmark` names the GPU it was measured on as CUDA reports it
(``"Tesla T4"``, ``"NVIDIA A100-SXM4-80GB"``, ``"NVIDIA H100 80GB HBM3"``, ...). The roofline
needs that GPU's datasheet figures, which :data:`ioattn.gpus.GPUS` records for **one board** of
each GPU (its ``variant``, such as the A100's "SXM4, 80 GB"). The boards of one GPU (SXM, PCIe
or NVL; 40 or 80 GB) differ in memory bandwidth and clocks, so :func:`identify` gives a measured
GPU a key of ``GPUS`` only when its name shows it is the board recorded; otherwise the key is
None and a note says why, and no prediction is made for it: another board's figures are never
used silently.

For every kernel row of a result that has a time, :func:`beside` puts the measured time and
TFLOP/s next to the roofline's least time and attainable TFLOP/s for the same kernel, dtype,
``N``, ``d``, heads and plan (the plan the row records,
:func:`ioattn.gpu.benchmark.plan_options`), and the fraction of that bound the run reached:
predicted time over measured time. The roofline is a bound from exact counts and datasheet
figures, not a measurement (Williams, Waterman and Patterson's, see :mod:`ioattn.roofline`); a
kernel can pass its memory term when the L2 cache serves re-reads, so a fraction above 1 is
possible, and the table says so.

The fast kernel ``flash_fa2`` is not a name :func:`ioattn.roofline.predict` knows: it runs
FlashAttention-2's schedule with its own blocks, and its counted traffic is flash's closed form
for them (:mod:`ioattn.gpu.flash_fa2`), so :func:`predict_kernel` predicts it by flash's model
with the plan ``flash_fa2`` takes on that GPU (its blocks, checked against that GPU's shared
memory by the fast kernel's own layout).

>>> identify("NVIDIA A100-SXM4-80GB").key
'A100'
>>> identify("NVIDIA A100-PCIE-40GB").key is None
True
"""

from __future__ import annotations

import re
from typing import NamedTuple

from ..gpus import GPUS
from ..roofline import Prediction, attention_flops, predict, terms, traffic_bytes
from .benchmark import KERNEL_IMPLS, markdown_table, model_name

__all__ = ["Board", "Points", "beside", "board_of", "datasheet_key", "identify",
           "measured_points", "predict_kernel", "predict_row", "predictions",
           "predictions_table", "table",
           "BESIDE_COLUMNS", "PREDICTED_COLUMNS"]


class Board(NamedTuple):
    """What a GPU's name says about its board, and the key of :data:`ioattn.gpus.GPUS` whose
    datasheet figures are this board's (None when there is none; ``note`` says why)."""

    name: str               # as CUDA reports it
    family: str | None      # "T4", "A100", "H100", "H200", or None for another GPU
    form: str | None        # "SXM", "PCIe", "NVL", or None when the name does not say
    memory_gb: int | None   # from the name ("80GB") or the memory CUDA reports
    key: str | None
    note: str


#: Board forms a name can show, in the order they are looked for.
_FORMS = (("NVL", r"\bNVL\b"), ("PCIe", r"PCIE"), ("SXM", r"SXM|HBM3\b"))
#: The form of a family's board when CUDA's name for it shows none: the T4 is only a PCIe board,
#: and the H200 SXM is named "NVIDIA H200" (its other board "NVIDIA H200 NVL"). An A100 or H100
#: named without a form is not guessed.
_PLAIN = {"T4": "PCIe", "H200": "SXM"}


def _form(text: str) -> str | None:
    upper = text.upper()
    for form, pattern in _FORMS:
        if re.search(pattern, upper):
            return form
    return None


def _gb(text: str) -> int | None:
    found = re.search(r"(\d+)\s*GB\b", text.upper())
    return int(found.group(1)) if found else None


def _same_memory(memory_gb: int | None, memory_bytes: int | None, recorded: int | None) -> bool:
    """Whether the board's memory is the recorded board's: the size in its name, else the
    bytes CUDA reports (a little above the nominal size: 80 GB boards report about 85 * 10^9
    bytes) within 10% below to 15% above. Unknown counts as the same (the form decides)."""
    if recorded is None:
        return True
    if memory_gb is not None:
        return memory_gb == recorded
    if memory_bytes:
        return 0.9 <= memory_bytes / (recorded * 10**9) <= 1.15
    return True


def identify(name: str, memory_bytes: int | None = None) -> Board:
    """The board a GPU name (``ioattn.gpu.device_info()["name"]``) stands for, and the key of
    :data:`ioattn.gpus.GPUS` when its datasheet figures are this board's.

    Parameters
    ----------
    name : str
        The GPU's name as CUDA reports it.
    memory_bytes : int, optional
        The memory CUDA reports (``device_info()["memory_bytes"]``), used when the name shows no
        size.

    Returns
    -------
    Board
        ``key`` is None (and ``note`` says why) for a GPU ``GPUS`` does not have, a board of it
        other than the recorded ``variant`` (another form or memory size), or a name that does
        not say which board it is.

    >>> [identify(n).key for n in ("Tesla T4", "NVIDIA H100 80GB HBM3", "NVIDIA H200")]
    ['T4', 'H100', 'H200']
    >>> b = identify("NVIDIA H100 PCIe")
    >>> b.key, b.form
    (None, 'PCIe')
    """
    if not isinstance(name, str):
        raise TypeError(f"a GPU name is a str, got {type(name).__name__}")
    upper = name.upper()
    family = next((key for key in GPUS if re.search(rf"(?<![A-Z0-9]){key}(?![0-9])", upper)),
                  None)
    form, memory_gb = _form(name), _gb(name)
    if family is None:
        return Board(name, None, form, memory_gb, None,
                     f"{name}: ioattn.gpus has no datasheet figures for this GPU (it has "
                     f"{', '.join(GPUS)}): no prediction")
    spec = GPUS[family]
    form = form or _PLAIN.get(family)
    recorded_form, recorded_gb = _form(spec.variant), _gb(spec.variant)
    if form is None:
        return Board(name, family, None, memory_gb, None,
                     f"{name}: the name does not say which {family} board this is; "
                     f"ioattn.gpus records the {family} {spec.variant} board's datasheet "
                     "figures, which may not be this board's: no prediction")
    if form != recorded_form or not _same_memory(memory_gb, memory_bytes, recorded_gb):
        size = (f", {memory_gb} GB" if memory_gb else
                f", {memory_bytes / 1e9:.0f} * 10^9 bytes reported" if memory_bytes else "")
        return Board(name, family, form, memory_gb, None,
                     f"{name} is the {family}'s {form}{size} board; ioattn.gpus records the "
                     f"{family} {spec.variant} board's datasheet figures (bandwidth and peaks "
                     "differ between boards), not this one's: no prediction")
    return Board(name, family, form, memory_gb, family, "")


def datasheet_key(name: str, memory_bytes: int | None = None) -> str | None:
    """The key of :data:`ioattn.gpus.GPUS` whose datasheet is this board's, or None
    (:func:`identify`)."""
    return identify(name, memory_bytes).key


def board_of(doc: dict) -> Board:
    """:func:`identify` for the GPU a benchmark result was measured on."""
    gpu = doc["gpu"]
    return identify(gpu["name"], gpu.get("memory_bytes"))


def predict_kernel(impl: str, N: int, d: int, M: int | None = None, *, gpu: str,
                   dtype: str = "float32", heads: int = 1, **options) -> Prediction:
    """The roofline (:func:`ioattn.roofline.predict`) of one kernel of the benchmark
    (:data:`ioattn.gpu.benchmark.KERNEL_IMPLS`) on ``gpu``.

    The readable kernels are predicted by name. ``flash_fa2`` is predicted by its model
    (:func:`ioattn.gpu.benchmark.model_name`, flash's closed form) for the plan the fast kernel
    runs on ``gpu`` (:func:`ioattn.gpu.gpu_plan` with that GPU's shared memory per block: its
    blocks, ``M`` and block as given or its own default), in its 16-bit storage; the returned
    ``name`` is ``"flash_fa2"``.

    Raises
    ------
    ValueError
        As :func:`ioattn.roofline.predict` does, and for ``flash_fa2`` at a ``d`` it is not
        compiled for or a plan its shared memory cannot hold on ``gpu``.
    """
    if impl != "flash_fa2":
        return predict(impl, N, d, M, gpu=gpu, dtype=dtype, heads=heads, **options)
    from ..algorithms import get
    from .api import gpu_plan

    if gpu not in GPUS:
        raise ValueError(f"unknown GPU {gpu!r}; the roofline knows {', '.join(GPUS)}")
    terms(0, 0, gpu=gpu, dtype=dtype)                 # a GPU with a peak for dtype
    if not isinstance(heads, int) or isinstance(heads, bool) or heads < 1:
        raise ValueError(f"heads must be a positive int, got {heads!r}")
    plan = gpu_plan(impl, N, d, M=M, dtype=dtype, budget=GPUS[gpu].shared_per_block, **options)
    model = model_name(impl)
    cost = get(model).cost(plan)
    reads, writes = heads * cost.reads, heads * cost.writes
    nbytes = traffic_bytes(model, dtype, reads, writes)
    flops = attention_flops(N, d, heads)
    return Prediction(gpu, impl, dtype, False, plan, heads, reads, writes, nbytes, flops,
                      *terms(nbytes, flops, gpu=gpu, dtype=dtype))


def predict_row(row: dict, gpu: str) -> Prediction:
    """The roofline on ``gpu`` of a benchmark row's kernel, dtype, ``N``, ``d``, ``batch x
    heads`` problems and plan (its ``plan_options``; without them, the plan the kernel takes by
    itself on ``gpu``). Raises ``ValueError`` naming the reason when there is none: a baseline
    (no kernel of ioattn), a causal row, a dtype without a datasheet peak on ``gpu``, a plan that
    does not fit its shared memory, or counted traffic other than the prediction's."""
    impl = row["impl"]
    if impl not in KERNEL_IMPLS:
        raise ValueError(f"{impl} is a baseline, not a kernel of ioattn: the roofline has no "
                         "counts for it")
    if row.get("causal"):
        raise ValueError("a causal pass: the roofline counts the pass without a mask")
    opts = dict(row.get("plan_options") or {})
    M = opts.pop("M", None)
    if "block" in opts:
        opts["block"] = tuple(opts["block"])
    p = predict_kernel(impl, row["N"], row["d"], M, gpu=gpu, dtype=row["dtype"],
                       heads=row["batch"] * row["heads"], **opts)
    counted = (row.get("reads"), row.get("writes"))
    if None not in counted and counted != (p.reads, p.writes):
        raise ValueError(f"the kernel counted {counted[0]:,}/{counted[1]:,} entries read/"
                         f"written, the plan predicted on the {gpu} {p.reads:,}/{p.writes:,}")
    return p


def _note(err: Exception) -> str:
    return str(err).splitlines()[0] if str(err) else type(err).__name__


def beside(doc: dict, gpu: str | None = None) -> list[dict]:
    """Each kernel row of result ``doc`` that has a time, measured beside predicted.

    Parameters
    ----------
    doc : dict
        A result of :func:`ioattn.gpu.benchmark.measure` (or read back from its JSON).
    gpu : str, optional
        The key of :data:`ioattn.gpus.GPUS` to predict for. Default: the result's GPU when it is
        the board recorded (:func:`board_of`); with none, every prediction is None.

    Returns
    -------
    list of dict
        ``impl, dtype, N, d, batch, heads, plan`` and ``time_ms, tflops`` (measured) as in the
        row; ``predicted_ms`` (the roofline's least time), ``attainable_tflops``, ``bound``
        (``"memory"`` or ``"compute"``), ``fraction`` (predicted time / measured time, the share
        of the attainable throughput reached), and ``note`` (why there is no prediction, else
        ``""``).
    """
    key = board_of(doc).key if gpu is None else gpu
    if key is not None and key not in GPUS:
        raise ValueError(f"unknown GPU {key!r}; ioattn.gpus has {', '.join(GPUS)}")
    out = []
    for row in doc["rows"]:
        if row["impl"] not in KERNEL_IMPLS or not row.get("time_ms"):
            continue
        entry = {k: row.get(k) for k in ("impl", "dtype", "N", "d", "batch", "heads", "plan",
                                          "time_ms", "tflops")}
        entry.update(predicted_ms=None, attainable_tflops=None, bound=None, fraction=None,
                     note="no datasheet for this board" if key is None else "")
        if key is not None:
            try:
                p = predict_row(row, key)
            except ValueError as err:
                entry["note"] = _note(err)
            else:
                entry.update(predicted_ms=1e3 * p.time, attainable_tflops=p.tflops,
                             bound=p.bound, fraction=1e3 * p.time / row["time_ms"])
        out.append(entry)
    return out


#: Columns of :func:`table`: (key, header).
BESIDE_COLUMNS = [("impl", "implementation"), ("dtype", "dtype"), ("N", "N"), ("d", "d"),
                  ("heads", "heads"), ("time_ms", "measured (ms)"),
                  ("tflops", "measured TFLOP/s"), ("predicted_ms", "least time (ms)"),
                  ("attainable_tflops", "attainable TFLOP/s"), ("bound", "bound"),
                  ("fraction", "of the bound"), ("note", "note")]


def _datasheet_line(key: str) -> str:
    spec = GPUS[key]
    peaks = ", ".join(f"{dtype} {spec.peak[dtype] / 1e12:g}" for dtype in spec.peak)
    return (f"the {key} ({spec.variant}) datasheet: bandwidth {spec.bandwidth / 1e9:,g} GB/s, "
            f"dense peaks in TFLOP/s {peaks}")


def table(doc: dict, gpu: str | None = None) -> str:
    """:func:`beside` as Markdown, under a paragraph naming the GPU, the date, the datasheet
    predicted for (or why there is none) and what the columns are."""
    board = board_of(doc)
    key = board.key if gpu is None else gpu
    rows = beside(doc, key)
    where = (f"Measured on **{doc['gpu']['name']}** ({doc['date'][:10]}, backend "
             f"{doc['backend']}" + ("" if doc["backend"] == "cuda" else
                                    ": not a measurement of a GPU") + ")")
    if key is None:
        head = (f"{where}. {board.note}. The table shows the measured columns only.")
    else:
        chosen = "" if gpu is None or gpu == board.key else \
            f" (chosen for this table; the result's GPU is {doc['gpu']['name']})"
        head = (f"{where}. Predicted (not measured): the roofline of `ioattn.roofline` from "
                f"the kernels' exact counts for the plan each row ran and {_datasheet_line(key)}"
                f"{chosen}. *Least time* = max(bytes / bandwidth, flops / peak); *of the bound* "
                "= least time / measured time, the share of the attainable throughput reached "
                "(above 100% when the L2 cache served re-reads the memory term counts).")
    if not rows:
        return head + "\n\nNo kernel row of this result has a time."
    return head + "\n\n" + markdown_table(rows, BESIDE_COLUMNS)


#: Columns of :func:`predictions_table`: (key, header).
PREDICTED_COLUMNS = [("impl", "implementation"), ("dtype", "dtype"), ("N", "N"), ("d", "d"),
                     ("heads", "heads"), ("plan", "plan (on that GPU)"),
                     ("predicted_ms", "least time (ms)"),
                     ("attainable_tflops", "attainable TFLOP/s"), ("bound", "bound"),
                     ("note", "note")]


def predictions(gpu: str, N, d, heads: int, batch: int = 1) -> list[dict]:
    """The roofline on ``gpu`` of every kernel configuration the benchmark runs
    (:data:`ioattn.gpu.benchmark.CONFIGS`), for each ``N`` and ``d``, with the plan each kernel
    takes by itself on that GPU (:func:`predict_kernel`: ``flash_fa2`` by flash's model with
    its own blocks; at a ``d`` it is not compiled for, its note says so): a prediction for a run,
    not a measurement.

    Returns one dict per configuration and size: ``impl, dtype, N, d, batch, heads, plan``,
    ``predicted_ms``, ``attainable_tflops``, ``bound``, ``reads``, ``writes``, ``bytes``,
    ``flops`` (exact) and ``note`` (why there is none, e.g. a dtype without a datasheet peak).
    """
    from .benchmark import CONFIGS, _plan_text

    if gpu not in GPUS:
        raise ValueError(f"unknown GPU {gpu!r}; ioattn.gpus has {', '.join(GPUS)}")
    out = []
    for n in N:
        for dd in d:
            for impl, dtype in CONFIGS:
                if impl not in KERNEL_IMPLS:
                    continue
                entry = {"impl": impl, "dtype": dtype, "N": n, "d": dd, "batch": batch,
                         "heads": heads, "plan": None, "predicted_ms": None,
                         "attainable_tflops": None, "bound": None, "reads": None,
                         "writes": None, "bytes": None, "flops": None, "note": ""}
                if dtype not in GPUS[gpu].peak:
                    entry["note"] = f"no {dtype} peak in the {gpu} datasheet"
                    out.append(entry)
                    continue
                try:
                    p = predict_kernel(impl, n, dd, gpu=gpu, dtype=dtype, heads=batch * heads)
                except ValueError as err:
                    entry["note"] = _note(err)
                else:
                    entry.update(plan=_plan_text(p.plan), predicted_ms=1e3 * p.time,
                                 attainable_tflops=p.tflops, bound=p.bound, reads=p.reads,
                                 writes=p.writes, bytes=p.bytes, flops=p.flops)
                out.append(entry)
    return out


def predictions_table(gpu: str, N, d, heads: int, batch: int = 1) -> str:
    """:func:`predictions` as Markdown, under a paragraph saying they are predictions."""
    rows = predictions(gpu, N, d, heads, batch)
    head = (f"Predicted, not measured: the roofline of `ioattn.roofline` for the kernels the "
            f"benchmark runs, {batch * heads} (N, d) problems each, with the plan each kernel "
            f"takes by itself on a {gpu}, from their exact counts and {_datasheet_line(gpu)}. "
            "*Least time* = max(bytes / bandwidth, flops / peak).")
    return head + "\n\n" + markdown_table(rows, PREDICTED_COLUMNS)


class Points(NamedTuple):
    """Measured throughput of a result, ready to draw on a roofline: ``series[(impl, dtype)]``
    is the list of ``(N, TFLOP/s)``, by increasing ``N``, at head dimension ``d`` and
    ``heads`` heads; ``gpu`` is the key of :data:`ioattn.gpus.GPUS` for the result's board
    (None: no datasheet for it, see ``board.note``); ``label`` names the GPU and the date."""

    gpu: str | None
    board: Board
    label: str
    d: int
    heads: int
    series: dict


def measured_points(doc: dict, *, d: int | None = None, heads: int | None = None,
                    kernels_only: bool = True) -> Points:
    """The ``(N, measured TFLOP/s)`` points of result ``doc`` per ``(impl, dtype)``.

    Parameters
    ----------
    doc : dict
        A benchmark result (:func:`ioattn.gpu.benchmark.latest_result`).
    d, heads : int, optional
        Which head dimension and number of heads; needed only when the result has several.
    kernels_only : bool
        Only the kernels of ioattn (default), or the CuPy and torch baselines too.

    Raises
    ------
    ValueError
        When ``d`` or ``heads`` is not given and the result has several values of it, or the
        value given is not in the result.
    """
    rows = [r for r in doc["rows"] if r.get("tflops") is not None
            and (not kernels_only or r["impl"] in KERNEL_IMPLS)]

    def one(key, value):
        values = sorted({r[key] for r in rows})
        if value is None:
            if len(values) > 1:
                raise ValueError(f"the result has {key} = {', '.join(map(str, values))}: "
                                 f"pass {key}=")
            return values[0] if values else None
        if value not in values:
            raise ValueError(f"the result has no measured rows with {key} = {value} (it has "
                             f"{', '.join(map(str, values)) or 'none'})")
        return value

    d = one("d", d)
    rows = [r for r in rows if r["d"] == d]
    heads = one("heads", heads)
    series: dict = {}
    for r in sorted(rows, key=lambda r: r["N"]):
        if r["heads"] == heads:
            series.setdefault((r["impl"], r["dtype"]), []).append((r["N"], r["tflops"]))
    board = board_of(doc)
    return Points(board.key, board, f"{doc['gpu']['name']}, {doc['date'][:10]}", d, heads,
                  series)
