"""The attention kernels of :mod:`ioattn.gpu` on a real GPU, side by side, with the baselines.

Run it as ``make bench-gpu`` or ``python benchmarks/gpu.py`` in a checkout of the repository, or
as ``python -m ioattn.gpu.benchmark`` wherever ioattn is installed (the book's notebook "Measure
your GPU" calls :func:`measure` and :func:`save` itself).

For every size (``N`` in 1024, 2048, 4096, 8192; ``d`` in 64, 128; 16 heads; batch 1) and every
configuration

- ``flash`` in float32, float16 and bfloat16 (FlashAttention-2's forward, the readable kernels;
  the 16-bit ones on the tensor cores with float32 accumulation), ``flash_fa2`` in float16 and
  bfloat16 (the fast kernel of :mod:`ioattn.gpu.flash_fa2`: the same schedule with ``Q_i``,
  ``S``, ``P`` and ``O_i`` in registers; compiled for ``d`` = 64 and 128 only, so at another
  ``d`` its rows say ``skipped``), ``square_tiling`` and ``standard`` in float32, all with the
  block sizes :func:`ioattn.gpu.gpu_plan` derives from the device's shared memory;
- ``cupy materialised``: ``S = Q K^T``, a row softmax and ``P V`` written plainly with CuPy
  (cuBLAS products, elementwise kernels, ``S`` held in global memory), the baseline a
  practitioner would write;
- ``torch sdpa``: ``torch.nn.functional.scaled_dot_product_attention`` in float32 and bfloat16,
  when torch imports,

it reports

- ``time``: CUDA events (``cupy.cuda.Event``) around :data:`PER_EVENT` forward passes launched
  back to back (nothing else in the window: no counter reset, no attribute call), divided by
  their number, after warm-up launches; the median of many, rotating among several input sets
  so that the L2 cache does not keep the inputs of the previous launch (the input sets of a
  kernel share one scratch, :meth:`ioattn.gpu.backend.Backend.shared_scratch`);
- ``error``: every timed output (each input set's) against a float64 reference on 16 rows of
  the first and the last head; above :data:`TOLERANCE` for its dtype the row's status is
  ``failed`` and its time counts toward no target;
- ``TFLOP/s``: ``4 N^2 d`` floating-point operations per head
  (:func:`ioattn.roofline.attention_flops`: two ``N x N x d`` products, two per multiply-add; the
  exponentials and the softmax are not counted) over the time; a causal pass counts half;
- the counted global-memory traffic: entries read and written, from a separate run of the same
  plan compiled with ``count_io=True`` (equal to ``ioattn.io_cost`` for the plan, checked;
  ``flash_fa2``'s is flash's closed form for its blocks, :func:`model_name`),
  and the bytes they make (:func:`ioattn.roofline.traffic_bytes`: reads in the storage
  precision, writes in float32); the CuPy and torch baselines have no counter and show ``-``;
- ``GB/s``: the counted bytes over the measured time (traffic the model counts, not what the
  memory system moved: caches, partial sectors and the counter-free baselines are not in it);
- ``extra``: bytes the pass holds in GPU memory beyond ``Q, K, V, O`` (the ``N x N`` scratch of
  the materialising algorithms), measured through CuPy's memory pool or torch's allocator.

Then the crossover on hardware: at ``d = 256`` in float32, for cache budgets ``M`` from
``d^2/16`` to ``16 d^2`` entries (powers of two), the counted traffic (and time) of ``flash``
and ``square_tiling``; budgets whose blocks do not fit in the device's shared memory are not run
and say so. Where the counted traffic crosses must lie between ``d^2/8`` and ``4 d^2``
(checked; the run exits with status 1 otherwise), and the counts equal the model.

The table is printed as Markdown and saved, with the GPU, driver and CUDA versions, the CuPy and
torch versions, the date and the git commit, as ``gpu-<gpu>-<date>.json`` and ``.md``
(:func:`save`), in ``benchmarks/results/`` of the repository when ioattn is imported from a
checkout, else in the current directory (:func:`default_out_dir`). The targets are printed as
PASS or FAIL lines (never asserted): on an H200, the fast bfloat16 kernel ``flash_fa2`` at
``N = 8192, d = 128``, 16 heads, reaches at least half of torch SDPA's throughput (and the same
comparison for the readable bfloat16 ``flash``, beside it); float32 flash is faster than CuPy
materialised attention from ``N = 4096`` on.

Without a GPU the script prints why and exits with status 2. ``--backend emulator`` runs the same
pipeline on the CPU emulator with tiny sizes (``N <= 128``, ``d <= 64``) and wall-clock times (a
check of this script, not a measurement; nothing is saved unless ``--out-dir`` is given).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from ..roofline import BYTES, attention_flops, traffic_bytes

__all__ = ["COLUMNS", "CONFIGS", "CROSS_COLUMNS", "Device", "FLOPS_NOTE", "KERNEL_IMPLS",
           "MODEL", "SCHEMA", "attention_flops", "bandwidth_gbps", "bench_crossover", "bench_row",
           "check_result", "checkout", "committed_results", "crossover_in_range",
           "default_out_dir", "fa2_skip", "find_crossover", "forward_flops", "git_commit",
           "latest_result", "main", "markdown_table", "materialised", "measure", "model_name",
           "parse_args", "plan_options", "render", "result_paths", "results_folder", "save",
           "slug", "targets", "tflops"]


# ------------------------------------------------------------------------ where things go
def checkout() -> Path | None:
    """The repository ioattn is imported from (a folder with ``pyproject.toml`` and
    ``benchmarks/results/``), or None when ioattn is installed elsewhere (as in Colab)."""
    root = Path(__file__).resolve().parents[2]
    if (root / "pyproject.toml").is_file() and (root / "benchmarks" / "results").is_dir():
        return root
    return None


def default_out_dir() -> Path:
    """Where results go by default: the checkout's ``benchmarks/results``, else the current
    directory."""
    root = checkout()
    return root / "benchmarks" / "results" if root is not None else Path.cwd()


#: The version of the JSON layout written by :func:`save`.
SCHEMA = "ioattn-gpu-benchmark/1"

#: What the TFLOP/s column counts, written into every result.
FLOPS_NOTE = ("forward FLOPs = 4 N^2 d per head (the products Q K^T and P V, 2 per multiply-add; "
              "exponentials and the softmax not counted); a causal pass counts half")

#: The configurations timed at every size: (implementation, dtype).
CONFIGS = [
    ("flash", "float32"), ("flash", "float16"), ("flash", "bfloat16"),
    ("flash_fa2", "float16"), ("flash_fa2", "bfloat16"),
    ("square_tiling", "float32"), ("standard", "float32"),
    ("cupy materialised", "float32"),
    ("torch sdpa", "float32"), ("torch sdpa", "bfloat16"),
]

#: Launches back to back between the two events of one timing.
PER_EVENT = 10

#: The relative error (Frobenius norm, on the rows :func:`check_rows` picks) a timed output may
#: have against the float64 reference, per storage dtype: float32 products of ``d`` terms and a
#: softmax over ``N``; float16 (11 significant bits) and bfloat16 (8) inputs rounded once.
TOLERANCE = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 4e-2}

#: The ioattn kernels among the configurations.
KERNEL_IMPLS = ("flash", "flash_fa2", "square_tiling", "standard")

#: The algorithm of :mod:`ioattn.algorithms` whose closed form (``ioattn.io_cost``), bytes
#: (:func:`ioattn.roofline.traffic_bytes`) and roofline a kernel's counts are: the fast kernel
#: ``flash_fa2`` runs FlashAttention-2's schedule with its own blocks, so its counted traffic is
#: ``io_cost("flash", N, d, M, block=(B_r, B_c))`` of its plan (:mod:`ioattn.gpu.flash_fa2`).
MODEL = {"flash": "flash", "flash_fa2": "flash", "square_tiling": "square_tiling",
         "standard": "standard"}


def model_name(impl: str) -> str:
    """The algorithm whose model kernel ``impl`` is counted by (:data:`MODEL`).

    >>> model_name("flash_fa2"), model_name("standard")
    ('flash', 'standard')
    """
    if impl not in MODEL:
        raise ValueError(f"{impl!r} is not a kernel of ioattn; the kernels are "
                         f"{', '.join(KERNEL_IMPLS)}")
    return MODEL[impl]


def fa2_skip(d: int) -> str | None:
    """Why ``flash_fa2`` does not run at head dimension ``d`` (the ``skipped: ...`` status of its
    row), or None when it is compiled for ``d`` (:data:`ioattn.gpu.flash_fa2.B_C`)."""
    from .flash_fa2 import B_C

    if d in B_C:
        return None
    return (f"skipped: flash_fa2 is compiled for d = {' and '.join(map(str, sorted(B_C)))} "
            f"only, not d = {d}")

#: Columns of the speed table: (key in a row, header).
COLUMNS = [("impl", "implementation"), ("dtype", "dtype"), ("N", "N"), ("d", "d"),
           ("heads", "heads"), ("time_ms", "time (ms)"), ("tflops", "TFLOP/s"),
           ("reads", "reads (entries)"), ("writes", "writes (entries)"),
           ("counted_bytes", "counted (bytes)"), ("gbps", "GB/s"), ("extra_bytes", "extra (bytes)"),
           ("plan", "plan")]


# ------------------------------------------------------------------------ pure parts (tested)
def forward_flops(N: int, d: int, heads: int = 1, causal: bool = False) -> int:
    """Operations of one attention forward pass, :func:`ioattn.roofline.attention_flops`
    (``4 N^2 d`` per head), half of it when causal (the count the TFLOP/s column uses).

    >>> forward_flops(1024, 64), forward_flops(1024, 64, causal=True)
    (268435456, 134217728)
    """
    flops = attention_flops(N, d, heads)
    return flops // 2 if causal else flops


def tflops(flops: int, time_ms: float | None) -> float | None:
    """``flops`` over ``time_ms`` milliseconds, in TFLOP/s (None without a time)."""
    if time_ms is None or not time_ms > 0:
        return None
    return flops / (time_ms * 1e-3) / 1e12


def bandwidth_gbps(nbytes: int | None, time_ms: float | None) -> float | None:
    """``nbytes`` over ``time_ms`` in GB/s (10^9 bytes per second)."""
    if nbytes is None or time_ms is None or not time_ms > 0:
        return None
    return nbytes / (time_ms * 1e-3) / 1e9


def slug(text: str) -> str:
    """A file-name-safe lower-case form of a GPU name: ``"NVIDIA H200"`` -> ``"nvidia-h200"``."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "gpu"


def result_paths(gpu_name: str, date: str, out_dir: Path | None = None) -> tuple[Path, Path]:
    """``(json, md)`` paths of a result: ``<out_dir>/gpu-<gpu-name-slug>-<YYYY-MM-DD>``
    (``out_dir`` defaults to :func:`default_out_dir`)."""
    out_dir = default_out_dir() if out_dir is None else out_dir
    stem = f"gpu-{slug(gpu_name)}-{date[:10]}"
    return Path(out_dir) / f"{stem}.json", Path(out_dir) / f"{stem}.md"


def _cell(value, key: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if key == "fraction":
            return f"{100 * value:.0f}%" if value >= 0.01 else f"{100 * value:.2g}%"
        if key.endswith("_ms"):
            return f"{value:.3f}" if value >= 0.01 else f"{value:.3g}"
        if key == "M_over_d2":
            return f"{value:g}"
        return f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"
    return str(value).replace("|", "\\|")


#: Columns aligned left (text); the others are numbers, aligned right.
_TEXT_COLUMNS = ("impl", "dtype", "plan", "status", "bound", "note")


def markdown_table(rows: list[dict], columns=COLUMNS) -> str:
    """``rows`` (dicts) as a Markdown table with ``columns`` (key, header); a missing value or
    None is ``-``, integers get thousands separators, times three decimals."""
    head = "| " + " | ".join(h for _, h in columns) + " |"
    rule = "|" + "|".join("---" if k in _TEXT_COLUMNS else "---:" for k, _ in columns) + "|"
    body = ["| " + " | ".join(_cell(r.get(k), k) for k, _ in columns) + " |" for r in rows]
    return "\n".join([head, rule, *body])


def find_crossover(Ms, flash, square) -> tuple[int, int] | None:
    """Where ``flash`` becomes cheaper than ``square``: the first neighbours ``(M_lo, M_hi)`` among
    the budgets that both ran (None entries are skipped) with ``square < flash`` at ``M_lo``
    and ``flash <= square`` at ``M_hi``. None when the values never cross that way."""
    points = [(M, f, s) for M, f, s in zip(Ms, flash, square) if f is not None and s is not None]
    for (M0, f0, s0), (M1, f1, s1) in zip(points, points[1:]):
        if s0 < f0 and f1 <= s1:
            return (M0, M1)
    return None


def crossover_in_range(bracket: tuple[int, int] | None, d: int) -> bool:
    """Whether a crossover bracket lies within ``[d^2/8, 4 d^2]``."""
    return bracket is not None and d * d / 8 <= bracket[0] and bracket[1] <= 4 * d * d


def targets(rows: list[dict], gpu_name: str) -> list[dict]:
    """The targets as ``{"name", "status" (PASS / FAIL / NOT RUN), "detail"}``.

    1. The fast bfloat16 kernel ``flash_fa2`` at ``N = 8192, d = 128``, 16 heads: at least 50%
       of torch SDPA's bfloat16 throughput (set for an H200; on another GPU the line says so).
    2. The same comparison for the readable bfloat16 ``flash``, for comparison with 1.
    3. float32 flash faster than CuPy materialised at every measured ``N >= 4096``.
    """
    def time_of(impl, dtype, N, d, heads=None):
        for r in rows:
            if (r["impl"], r["dtype"], r["N"], r["d"]) == (impl, dtype, N, d) \
                    and (heads is None or r["heads"] == heads) and r.get("time_ms") \
                    and not failed(r):
                return r["time_ms"]
        return None

    out = []
    theirs = time_of("torch sdpa", "bfloat16", 8192, 128, 16)
    note = ("" if "h200" in gpu_name.lower()
            else f" (the target is set for an H200; this is {gpu_name})")
    for impl, name in (
            ("flash_fa2", "bf16 flash_fa2 (the fast kernel) >= 50% of torch SDPA bf16 "
                          "throughput at N=8192, d=128, 16 heads (H200)"),
            ("flash", "for comparison, bf16 flash (the readable kernel) >= 50% of torch SDPA "
                      "bf16 throughput at N=8192, d=128, 16 heads (H200)")):
        ours = time_of(impl, "bfloat16", 8192, 128, 16)
        if ours is None or theirs is None:
            out.append({"name": name, "status": "NOT RUN",
                        "detail": f"needs {impl} and SDPA measured (that size, and torch "
                                  "installed)"})
            continue
        ratio = theirs / ours       # same flops: throughput ratio = inverse time ratio
        out.append({"name": name, "status": "PASS" if ratio >= 0.5 else "FAIL",
                    "detail": f"{impl} {ours:.3f} ms, SDPA {theirs:.3f} ms: {100 * ratio:.0f}% "
                              f"of SDPA's throughput{note}"})
    name2 = "fp32 flash faster than CuPy materialised from N=4096"
    pairs = sorted({(r["N"], r["d"], r["heads"]) for r in rows if r["N"] >= 4096})
    compared, slower = [], []
    for N, d, h in pairs:
        f = time_of("flash", "float32", N, d, h)
        c = time_of("cupy materialised", "float32", N, d, h)
        if f is None or c is None:
            continue
        compared.append(f"N={N}, d={d}: {f:.3f} vs {c:.3f} ms")
        if not f < c:
            slower.append(f"N={N}, d={d}")
    if not compared:
        out.append({"name": name2, "status": "NOT RUN",
                    "detail": "no size with N >= 4096 measured"})
    else:
        out.append({"name": name2, "status": "FAIL" if slower else "PASS",
                    "detail": ("slower at " + ", ".join(slower) + "; " if slower else "")
                              + "; ".join(compared)})
    return out


def _check_plan_options(opts, where: str) -> None:
    """Raise ``ValueError`` unless ``opts`` is None or what :func:`plan_options` returns."""
    if opts is None:
        return
    if not isinstance(opts, dict):
        raise ValueError(f"{where}: expected a dict or null, got {type(opts).__name__}")
    extra = set(opts) - {"M", "block", "schedule"}
    if extra:
        raise ValueError(f"{where}: unknown keys {sorted(extra)}")
    M = opts.get("M")
    if not _is_int(M) or M < 1:
        raise ValueError(f"{where}.M: expected a positive int, got {M!r}")
    block = opts.get("block")
    if "block" in opts and not (isinstance(block, list) and len(block) == 2
                                and all(_is_int(b) and b > 0 for b in block)):
        raise ValueError(f"{where}.block: expected [B_r, B_c], two positive ints, got {block!r}")
    if "schedule" in opts and not isinstance(opts["schedule"], str):
        raise ValueError(f"{where}.schedule: expected a str, got {opts['schedule']!r}")


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


#: Row values that are a number or null, and those that are an int or null.
_NUMBERS = ("time_ms", "tflops", "gbps")
_COUNTS = ("reads", "writes", "counted_bytes", "extra_bytes")


def check_result(doc: dict) -> None:
    """Raise ``ValueError`` unless ``doc`` has the layout :func:`save` writes (:data:`SCHEMA`).

    A row's ``plan_options`` (the plan the kernel ran, :func:`plan_options`) is checked when it
    is there; results written before it was recorded have none.
    """
    def need(obj, key, kind, where):
        if not isinstance(obj, dict) or key not in obj:
            raise ValueError(f"{where}: missing {key!r}")
        if not isinstance(obj[key], kind):
            raise ValueError(f"{where}.{key}: expected {kind}, got {type(obj[key]).__name__}")
        return obj[key]

    if need(doc, "schema", str, "result") != SCHEMA:
        raise ValueError(f"result: schema {doc['schema']!r}, expected {SCHEMA!r}")
    for key in ("date", "git_commit", "flops_note", "backend"):
        need(doc, key, str, "result")
    gpu = need(doc, "gpu", dict, "result")
    for key in ("name", "compute_capability", "driver", "runtime"):
        need(gpu, key, str, "gpu")
    versions = need(doc, "versions", dict, "result")
    for key in ("cupy", "torch", "numpy", "python"):
        if key not in versions:
            raise ValueError(f"versions: missing {key!r}")
    need(doc, "settings", dict, "result")
    for i, row in enumerate(need(doc, "rows", list, "result")):
        for key in ("impl", "dtype", "status"):
            need(row, key, str, f"rows[{i}]")
        for key in ("N", "d", "heads", "batch"):
            need(row, key, int, f"rows[{i}]")
        for key, _ in COLUMNS:
            if key not in row:
                raise ValueError(f"rows[{i}]: missing {key!r}")
        for key in _NUMBERS:
            x = row[key]
            if x is not None and (isinstance(x, bool) or not isinstance(x, (int, float))):
                raise ValueError(f"rows[{i}].{key}: expected a number or null, got {x!r}")
        for key in _COUNTS:
            if row[key] is not None and not _is_int(row[key]):
                raise ValueError(f"rows[{i}].{key}: expected an int or null, got {row[key]!r}")
        if "plan_options" in row:
            _check_plan_options(row["plan_options"], f"rows[{i}].plan_options")
    for i, t in enumerate(need(doc, "targets", list, "result")):
        if need(t, "status", str, f"targets[{i}]") not in ("PASS", "FAIL", "NOT RUN"):
            raise ValueError(f"targets[{i}].status: {t['status']!r}")
    if doc.get("crossover") is not None:
        cross = need(doc, "crossover", dict, "result")
        for key in ("N", "d"):
            need(cross, key, int, "crossover")
        need(cross, "points", list, "crossover")


CROSS_COLUMNS = [("M", "M"), ("M_over_d2", "M / d^2"), ("flash_counted", "flash counted"),
                 ("flash_model", "flash io_cost"), ("flash_ms", "flash (ms)"),
                 ("square_counted", "square counted"), ("square_model", "square io_cost"),
                 ("square_ms", "square (ms)"), ("note", "note")]


def _beside(doc: dict) -> str:
    """The kernels' rows beside the roofline (:func:`ioattn.gpu.compare.table`) when the GPU is
    a board :mod:`ioattn.gpus` has the datasheet of, else the sentence saying why not."""
    from .compare import board_of, table

    board = board_of(doc)
    return table(doc) if board.key is not None else board.note + "."


def render(doc: dict) -> str:
    """The Markdown report of a result: where and when, the speed table, the kernels beside the
    roofline (when the GPU is a board :mod:`ioattn.gpus` has the datasheet of), the crossover
    and the targets."""
    gpu, v = doc["gpu"], doc["versions"]
    lines = [f"# ioattn.gpu benchmark: {gpu['name']}", "",
             f"- date: {doc['date']}; git commit: {doc['git_commit']}; backend: {doc['backend']}",
             f"- GPU: {gpu['name']} (compute capability {gpu['compute_capability']}); "
             f"driver {gpu.get('driver_version', 'unknown')}, CUDA driver API {gpu['driver']}, "
             f"CUDA runtime {gpu['runtime']}",
             f"- CuPy {v['cupy'] or 'not installed'}, torch {v['torch'] or 'not installed'}, "
             f"NumPy {v['numpy']}, "
             f"Python {v['python']}",
             f"- settings: {json.dumps(doc['settings'], sort_keys=True)}",
             f"- {doc['flops_note']}", "",
             ("Times are medians of CUDA-event timings" if doc["backend"] == "cuda" else
              "Times are wall-clock medians on the CPU emulator (not a measurement of a GPU)")
             + "; reads and writes are the entries the "
             "kernels counted (compiled with count_io=True), equal to ioattn.io_cost for the plan "
             "(flash's for flash_fa2); "
             "GB/s is counted bytes over time; extra is GPU memory held beyond Q, K, V, O.", "",
             markdown_table(doc["rows"]), "", "## Beside the roofline", "", _beside(doc), ""]
    cross = doc.get("crossover")
    if cross:
        lines += [f"## Crossover at d = {cross['d']}, N = {cross['N']}, {cross.get('heads', 1)} "
                  "heads, float32", "",
                  markdown_table(cross["points"], CROSS_COLUMNS), "",
                  "counted traffic crosses between M = "
                  + (" and ".join(f"{m:,}" for m in cross["counted_crossover"])
                     if cross.get("counted_crossover") else "(not within the budgets run)")
                  + "; "
                  f"io_cost's exact crossover: M = {_cell(cross.get('model_crossover'))}; "
                  f"check: {cross.get('check')}", ""]
    lines += ["## Targets", ""]
    lines += [f"- {t['status']}: {t['name']} -- {t['detail']}" for t in doc["targets"]]
    return "\n".join(lines) + "\n"


def results_folder() -> Path | None:
    """``benchmarks/results`` of the checkout ioattn is imported from, or None (installed
    elsewhere: the committed results are not there)."""
    root = checkout()
    return None if root is None else root / "benchmarks" / "results"


def committed_results(folder: Path | None = None, backend: str = "cuda") -> list[dict]:
    """Every result among ``folder/*.json`` that passes :func:`check_result` and was measured
    on ``backend`` (a GPU, by default; never an emulator run), newest first (by ``date``, then
    file name). ``folder`` defaults to :func:`results_folder`; with no checkout, ``[]``. Files
    that are not such results are skipped."""
    folder = results_folder() if folder is None else Path(folder)
    if folder is None:
        return []
    found = []
    for path in sorted(folder.glob("*.json")):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            check_result(doc)
        except (ValueError, OSError):
            continue
        if doc["backend"] == backend:
            found.append((doc["date"], path.name, doc))
    return [doc for _, _, doc in sorted(found, key=lambda t: (t[0], t[1]), reverse=True)]


def latest_result(folder: Path | None = None, backend: str = "cuda") -> dict | None:
    """The newest of :func:`committed_results` (``folder``, ``backend``), or None when there
    is none."""
    found = committed_results(folder, backend)
    return found[0] if found else None


def git_commit() -> str:
    """The commit of the code that runs: ``git rev-parse HEAD`` of the checkout ioattn is
    imported from, else the commit pip recorded when it installed ioattn from a git repository
    (``direct_url.json``, PEP 610; the book's notebooks install it so), else ``"unknown"``."""
    root = checkout()
    if root is not None:
        try:
            done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                                  text=True, timeout=10)
            if done.returncode == 0 and done.stdout.strip():
                return done.stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    try:
        from importlib.metadata import distribution

        info = json.loads(distribution("ioattn").read_text("direct_url.json") or "{}")
        commit = info.get("vcs_info", {}).get("commit_id")
        if isinstance(commit, str) and commit:
            return commit
    except Exception:           # not installed, or installed without that record
        pass
    return "unknown"


# ------------------------------------------------------------------------------- the machine
class Device:
    """The backend under test: timing, memory measurement and synchronisation."""

    def __init__(self, backend: str):
        from ioattn.gpu import device_info

        self.backend = backend
        if backend == "cuda":
            from ioattn.gpu.device import require_gpu

            require_gpu("the GPU benchmark")     # GPUUnavailableError, saying why
            self.info = dict(device_info())
            import cupy

            self.xp = cupy
            self.info["driver_version"] = _nvidia_driver()
            try:
                props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
                self.l2_bytes = int(props.get("l2CacheSize", 0)) or 64 << 20
            except Exception:
                self.l2_bytes = 64 << 20
            self.pool = cupy.get_default_memory_pool()
        else:
            from ioattn.gpu.backend import get_backend

            self.xp = np
            be = get_backend("emulator")
            self.info = {"name": "CPU emulator", "compute_capability": "-", "driver": "-",
                         "runtime": "-", "driver_version": "-",
                         "shared_memory_per_block": be.shared_memory_per_block}
            self.l2_bytes = 0

    def synchronize(self):
        if self.backend == "cuda":
            self.xp.cuda.get_current_stream().synchronize()

    def free(self):
        """Return cached blocks to the driver between configurations."""
        if self.backend == "cuda":
            self.synchronize()
            self.pool.free_all_blocks()
            try:
                import torch
                torch.cuda.empty_cache()
            except Exception:
                pass

    def time(self, calls, *, warmup: int, reps: int, max_seconds: float,
             per_event: int = PER_EVENT) -> tuple[float, int]:
        """Median milliseconds of one call and the number of timed calls: ``warmup`` untimed
        calls, then ``reps`` timings (fewer, but at least 5, when they take longer than
        ``max_seconds`` in all), each of ``per_event`` calls back to back between two events,
        cycling through ``calls`` (one per input set), so that nothing but the launches lies in
        the timed window and the launch overhead of the host overlaps the kernels."""
        for i in range(warmup):
            calls[i % len(calls)]()
        self.synchronize()
        times = []
        start = time.perf_counter()
        k = 0
        for _ in range(reps):
            group = [calls[(k + j) % len(calls)] for j in range(per_event)]
            k += per_event
            begin = self.mark()
            for call in group:
                call()
            end = self.mark()
            times.append(self.elapsed_ms(begin, end) / per_event)
            if len(times) >= 5 and time.perf_counter() - start > max_seconds:
                break
        return statistics.median(times), per_event * len(times)

    def mark(self):
        """A point in the device's timeline: a recorded CUDA event, or the host's clock."""
        if self.backend == "cuda":
            event = self.xp.cuda.Event()
            event.record()
            return event
        return time.perf_counter()

    def elapsed_ms(self, begin, end) -> float:
        """Milliseconds between two :meth:`mark` points (waits for the second)."""
        if self.backend == "cuda":
            end.synchronize()
            return float(self.xp.cuda.get_elapsed_time(begin, end))
        return 1e3 * (end - begin)

    def live_bytes(self) -> int:
        """Bytes currently allocated by CuPy (0 on the emulator)."""
        return int(self.pool.used_bytes()) if self.backend == "cuda" else 0


def _nvidia_driver() -> str:
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=driver_version",
                               "--format=csv,noheader"], capture_output=True, text=True,
                              timeout=20)
        return done.stdout.strip().splitlines()[0] if done.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError, IndexError):
        return "unknown"


def _versions() -> dict:
    import ioattn

    out = {"ioattn": getattr(ioattn, "__version__", "unknown"), "numpy": np.__version__,
           "python": platform.python_version(), "cupy": None, "torch": None}
    try:
        import cupy
        out["cupy"] = cupy.__version__
    except Exception:
        pass
    try:
        import torch
        out["torch"] = torch.__version__
    except Exception:
        pass
    return out


def _torch():
    """torch when it imports and sees the GPU, else None."""
    try:
        import torch
        return torch if torch.cuda.is_available() else None
    except Exception:
        return None


def _plan_text(plan) -> str:
    parts = [f"M={plan.M}"]
    for key in ("B_r", "B_c"):
        if hasattr(plan, key):
            parts.append(f"{key}={getattr(plan, key)}")
    if hasattr(plan, "schedule"):
        parts.append(plan.schedule)
    return " ".join(parts)


def plan_options(name: str, plan) -> dict:
    """The plan a kernel ran as the keywords that make it again: ``M``, and flash's (or
    ``flash_fa2``'s) ``block`` (``[B_r, B_c]``) or square tiling's ``schedule``, for
    :func:`ioattn.io_cost`, :func:`ioattn.gpu.gpu_plan` and :func:`ioattn.roofline.predict`
    (``flash_fa2``'s through :func:`ioattn.gpu.compare.predict_kernel`). Recorded in each
    row."""
    out = {"M": int(plan.M)}
    if name in ("flash", "flash_fa2"):
        out["block"] = [int(plan.B_r), int(plan.B_c)]
    elif name == "square_tiling":
        out["schedule"] = str(plan.schedule)
    return out


def model_cost(name: str, plan, heads: int):
    """``heads`` times ``ioattn.io_cost`` of the kernel's model (:func:`model_name`) for the
    plan the kernels ran."""
    import ioattn

    opts = plan_options(name, plan)
    M = opts.pop("M")
    if "block" in opts:
        opts["block"] = tuple(opts["block"])
    c = ioattn.io_cost(model_name(name), plan.N, plan.d, M, **opts)
    return heads * c.reads, heads * c.writes


def _input_sets(dev, shape, count, seed):
    xp = dev.xp
    rng = np.random.default_rng(seed)
    sets = []
    for _ in range(count):
        host = rng.standard_normal((3, *shape), dtype=np.float32)
        sets.append(tuple(xp.asarray(x) for x in host))
    return sets


def materialised(xp, Q, K, V, scale):
    """Attention as a practitioner writes it: ``S`` in global memory, softmax, ``P V``."""
    S = xp.matmul(Q, xp.swapaxes(K, -1, -2))
    S *= scale
    S -= S.max(axis=-1, keepdims=True)
    xp.exp(S, out=S)
    S /= S.sum(axis=-1, keepdims=True)
    return xp.matmul(S, V)


def _to_torch(torch, x):
    """A CuPy array as a torch tensor on the same memory (DLPack)."""
    try:
        return torch.from_dlpack(x)
    except Exception:
        return torch.as_tensor(x, device="cuda")


def _ends(x) -> np.ndarray:
    """The first and the last head of a ``(..., N, d)`` array, on the host: ``(2, N, d)``."""
    x = x.reshape(-1, *x.shape[-2:])[[0, -1]]
    return np.asarray(x.get() if hasattr(x, "get") else x)


def check_rows(N: int, count: int = 16) -> np.ndarray:
    """The query rows whose outputs are checked: ``count`` spread over ``0 .. N-1``."""
    return np.unique(np.linspace(0, N - 1, min(count, N)).round().astype(int))


def reference_rows(Q, K, V, scale: float, rows) -> np.ndarray:
    """``softmax(scale Q K^T) V`` in float64 on the host for ``rows`` of the first and the last
    head of ``(..., N, d)`` inputs: shape ``(2, len(rows), d)``."""
    Q, K, V = (np.asarray(x, dtype=np.float64).reshape(-1, *np.shape(x)[-2:]) for x in (Q, K, V))
    out = []
    for h in (0, Q.shape[0] - 1):
        S = scale * Q[h, rows] @ K[h].T
        P = np.exp(S - S.max(axis=1, keepdims=True))
        out.append((P / P.sum(axis=1, keepdims=True)) @ V[h])
    return np.stack(out)


def output_error(out, ref, rows) -> float:
    """The relative error of ``out`` (``(..., N, d)``, on the host) on the reference's rows."""
    out = np.asarray(out, dtype=np.float64)
    out = out.reshape(-1, *out.shape[-2:])
    got = np.stack([out[0, rows], out[-1, rows]])
    if not np.isfinite(got).all():
        return math.inf
    return float(np.linalg.norm(got - ref) / np.linalg.norm(ref))


def verify(row: dict, outputs, sets_host, scale: float) -> None:
    """Compare every timed output (one per input set, host arrays) with the float64
    reference; record the largest error in ``row["error"]`` and mark the row failed when it
    exceeds :data:`TOLERANCE` for the row's dtype (its time then counts toward no target)."""
    rows = check_rows(row["N"])
    worst = 0.0
    for out, (Q, K, V) in zip(outputs, sets_host):
        worst = max(worst, output_error(out, reference_rows(Q, K, V, scale, rows), rows))
    row["error"] = worst
    tol = TOLERANCE[row["dtype"]]
    if not worst <= tol:
        row["status"] = f"failed: output differs from the reference (error {worst:.2e} > {tol:g})"


def failed(row: dict) -> bool:
    """Whether a row's output did not match the reference."""
    return str(row.get("status", "")).startswith("failed")


def bench_row(dev, impl, dtype, N, d, batch, heads, args, n_sets) -> dict:
    """One configuration at one size: time, counted traffic and extra memory."""
    import ioattn.gpu as g

    row = {"impl": impl, "dtype": dtype, "N": N, "d": d, "batch": batch, "heads": heads,
           "causal": False, "time_ms": None, "tflops": None, "reads": None, "writes": None,
           "counted_bytes": None, "gbps": None, "extra_bytes": None, "plan": None,
           "plan_options": None, "reps": None, "input_sets": n_sets, "error": None,
           "status": "ok"}
    shape = (batch, heads, N, d)
    BH = batch * heads
    dev.free()
    scale = 1.0 / math.sqrt(d)
    sets = _input_sets(dev, shape, n_sets, seed=N * 1000 + d)
    ends = [tuple(_ends(x) for x in s) for s in sets]       # for the reference, on the host
    timing = dict(warmup=args.warmup, reps=args.reps, max_seconds=args.max_seconds)
    try:
        skip = fa2_skip(d) if impl == "flash_fa2" else None
        if skip is not None:
            row["status"] = skip
        elif impl in KERNEL_IMPLS:
            launches = []
            be = g.backend.get_backend(dev.backend)
            with be.shared_scratch():                  # one N x N scratch for every input set
                for Q, K, V in sets:
                    before = dev.live_bytes()
                    launches.append(g.prepare(impl, Q, K, V, dtype=dtype, backend=dev.backend))
                    held = dev.live_bytes() - before   # the first set's holds the scratch
                    if len(launches) == 1:
                        first = held
            storage = 0 if dtype == "float32" else 3 * BH * N * d * BYTES[dtype]
            row["extra_bytes"] = first - BH * N * d * 4 - storage if dev.backend == "cuda" \
                else None
            row["time_ms"], row["reps"] = dev.time(launches, **timing)
            verify(row, [_ends(x.result().output) for x in launches], ends, scale)
            done = launches[0].result()
            row["plan"] = _plan_text(done.plan)
            row["plan_options"] = plan_options(impl, done.plan)
            del launches
            dev.free()
            counted = g.run(impl, *sets[0], dtype=dtype, count_io=True, backend=dev.backend)
            row["reads"], row["writes"] = counted.io.reads, counted.io.writes
            expected = model_cost(impl, counted.plan, BH)
            if (row["reads"], row["writes"]) != expected:
                row["status"] = (f"counted {row['reads']}/{row['writes']} != io_cost "
                                 f"{expected[0]}/{expected[1]}")
            row["counted_bytes"] = traffic_bytes(model_name(impl), dtype, row["reads"],
                                                 row["writes"])
            del counted
        elif impl == "cupy materialised":
            xp = dev.xp
            dev.free()
            calls = [lambda s=s: materialised(xp, *s, scale) for s in sets]
            if dev.backend == "cuda":
                dev.synchronize()
                dev.pool.free_all_blocks()
                before = dev.pool.total_bytes()
                out = calls[0]()
                dev.synchronize()
                row["extra_bytes"] = int(dev.pool.total_bytes() - before - out.nbytes)
                del out
            row["time_ms"], row["reps"] = dev.time(calls, **timing)
            verify(row, [_ends(c()) for c in calls], ends, scale)
            row["plan"] = ("cuBLAS matmul, S in global memory" if dev.backend == "cuda"
                           else "NumPy on the CPU (a check of this script)")
        elif impl == "torch sdpa":
            torch = _torch()
            if torch is None or dev.backend != "cuda":
                row["status"] = "skipped: torch with CUDA is not available"
                return row
            tdt = {"float32": torch.float32, "bfloat16": torch.bfloat16,
                   "float16": torch.float16}[dtype]
            tsets = [tuple(_to_torch(torch, x).to(tdt) for x in s) for s in sets]
            sdpa = torch.nn.functional.scaled_dot_product_attention
            calls = [lambda s=s: sdpa(*s) for s in tsets]
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            before = torch.cuda.memory_allocated()
            out = calls[0]()
            torch.cuda.synchronize()
            row["extra_bytes"] = int(torch.cuda.max_memory_allocated() - before
                                     - out.numel() * out.element_size())
            del out
            row["time_ms"], row["reps"] = dev.time(calls, **timing)
            verify(row, [_ends(c().float().cpu().numpy()) for c in calls], ends, scale)
            row["plan"] = "torch's choice of kernel"
            del tsets
        else:
            raise ValueError(f"unknown implementation {impl!r}")
    except Exception as err:          # a plan that does not fit, out of memory, ...
        row["status"] = f"error: {type(err).__name__}: {str(err).splitlines()[0][:160]}"
    finally:
        del sets
        dev.free()
    row["tflops"] = tflops(forward_flops(N, d, BH, row["causal"]), row["time_ms"])
    row["gbps"] = bandwidth_gbps(row["counted_bytes"], row["time_ms"])
    return row


def bench_crossover(dev, N, d, heads, args) -> dict:
    """Counted traffic (summed over ``heads``) and time of flash and square tiling at d = ``d``
    for the budgets ``d^2/16 ... 16 d^2``; where they cross; checked against ``heads`` times
    ``io_cost``."""
    import ioattn
    import ioattn.gpu as g
    from ioattn.bounds import crossovers

    Ms = [d * d // 16 << k for k in range(9)]
    Q, K, V = _input_sets(dev, (heads, N, d), 1, seed=7)[0]
    ends = tuple(_ends(x) for x in (Q, K, V))
    timing = dict(warmup=max(1, args.warmup // 2), reps=max(5, args.reps // 3),
                  max_seconds=args.max_seconds / 2)
    points, mismatches = [], []
    for M in Ms:
        p = {"M": M, "M_over_d2": M / d**2, "note": ""}
        for name, key in (("flash", "flash"), ("square_tiling", "square")):
            p[f"{key}_model"] = heads * ioattn.io_cost(name, N, d, M).total
            p[f"{key}_counted"] = p[f"{key}_ms"] = None
            try:
                launch = g.prepare(name, Q, K, V, M=M, backend=dev.backend)
                if dev.backend == "cuda" or args.time_emulator:
                    ms, _ = dev.time([launch], **timing)
                    timed = {"N": N, "dtype": "float32", "status": "ok"}
                    verify(timed, [_ends(launch.result().output)], [ends], 1 / math.sqrt(d))
                    if failed(timed):               # a wrong output has no time
                        mismatches.append(f"{name} at M={M}: {timed['status']}")
                    else:
                        p[f"{key}_ms"] = ms
                del launch
                res = g.run(name, Q, K, V, M=M, count_io=True, backend=dev.backend)
                p[f"{key}_counted"] = res.io.total
                if res.io.total != p[f"{key}_model"]:
                    mismatches.append(f"{name} at M={M}: counted {res.io.total}, io_cost "
                                      f"{p[f'{key}_model']}")
            except Exception as err:        # a budget whose blocks do not fit, mostly
                p["note"] += f"{name}: {type(err).__name__}: {str(err).splitlines()[0][:90]} "
            dev.free()
        p["note"] = p["note"].strip() or "-"
        points.append(p)
    bracket = find_crossover(Ms, [p["flash_counted"] for p in points],
                             [p["square_counted"] for p in points])
    model = [c.M for c in crossovers(N, d, M_min=Ms[0], M_max=Ms[-1],
                                     names=["flash", "square_tiling"])
             if (c.before, c.after) == ("square_tiling", "flash")]
    ran = [p["M"] for p in points if p["flash_counted"] is not None
           and p["square_counted"] is not None]
    if bracket is not None:
        ok = crossover_in_range(bracket, d)
        check = (f"counted traffic crosses between M = {bracket[0]} and {bracket[1]} "
                 f"({bracket[0] / d**2:g} d^2 to {bracket[1] / d**2:g} d^2)"
                 + (", within [d^2/8, 4 d^2]" if ok else ", OUTSIDE [d^2/8, 4 d^2]"))
    elif len(ran) < 2:
        ok = False
        check = f"flash and square tiling both ran at {len(ran)} budget(s) only: no crossover"
    else:
        # Not observable here (on a T4 no budget that fits reaches it): check the model's
        # crossover instead, and say so.
        ok = bool(model) and d * d / 8 <= model[-1] <= 4 * d * d
        check = ("the counted traffic does not cross within the budgets that fit on this GPU "
                 f"(both ran up to M = {max(ran) if ran else '-'}); io_cost's crossover at M = "
                 f"{model[-1] if model else '-'} is "
                 + ("within" if ok else "OUTSIDE") + " [d^2/8, 4 d^2]")
    ok = ok and not mismatches
    check = ("PASS: " if ok else "FAIL: ") + check
    if mismatches:
        check += "; counted != io_cost: " + "; ".join(mismatches)
    return {"N": N, "d": d, "heads": heads, "dtype": "float32", "points": points,
            "counted_crossover": list(bracket) if bracket else None,
            "model_crossover": model[-1] if model else None, "check": check, "ok": ok}


def _sets_for(dev, N, d, batch, heads):
    """Enough input sets that their Q, K, V, O exceed twice the L2 cache (2 to 8)."""
    if dev.backend != "cuda":
        return 2
    set_bytes = 4 * batch * heads * N * d * 4
    return max(2, min(8, math.ceil(2 * dev.l2_bytes / set_bytes)))


def measure(args, dev) -> dict:
    """Every row, the crossover and the targets, as the JSON document :func:`save` writes."""
    rows = []
    configs = [c for c in CONFIGS if args.only is None or c[0] in args.only]
    print(f"# {dev.info['name']}: {len(configs)} configurations x {len(args.N)} N x "
          f"{len(args.d)} d, batch {args.batch}, {args.heads} heads", flush=True)
    for N in args.N:
        for d in args.d:
            n_sets = _sets_for(dev, N, d, args.batch, args.heads)
            for impl, dtype in configs:
                row = bench_row(dev, impl, dtype, N, d, args.batch, args.heads, args, n_sets)
                rows.append(row)
                t = "-" if row["time_ms"] is None else f"{row['time_ms']:.3f} ms"
                print(f"  {impl:<18} {dtype:<9} N={N:<5} d={d:<4} {t:>12}  {row['status']}",
                      flush=True)
    cross = None
    if not args.no_crossover:
        cross = bench_crossover(dev, args.crossover_N, 256, args.crossover_heads, args)
    doc = {"schema": SCHEMA, "backend": dev.backend,
           "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "git_commit": git_commit(), "gpu": dev.info, "versions": _versions(),
           "settings": {"N": list(args.N), "d": list(args.d), "batch": args.batch,
                        "heads": args.heads, "warmup": args.warmup, "reps": args.reps,
                        "quick": bool(args.quick)},
           "flops_note": FLOPS_NOTE, "rows": rows, "crossover": cross,
           "targets": targets(rows, dev.info["name"])}
    return doc


def save(doc: dict, out_dir: Path | str | None = None) -> tuple[Path, Path]:
    """Write ``doc`` as JSON and its :func:`render` as Markdown into ``out_dir`` (default
    :func:`default_out_dir`), named by :func:`result_paths`; return the two paths. Raises
    ``ValueError`` (from :func:`check_result`) for a document of another layout."""
    check_result(doc)
    out_dir = default_out_dir() if out_dir is None else Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    js, md = result_paths(doc["gpu"]["name"], doc["date"], out_dir)
    js.write_text(json.dumps(doc, indent=1, default=_jsonable) + "\n", encoding="utf-8")
    md.write_text(render(doc), encoding="utf-8")
    return js, md


def _jsonable(x):
    if isinstance(x, np.generic):
        return x.item()
    raise TypeError(f"not JSON serialisable: {type(x).__name__}")


def parse_args(argv=None) -> argparse.Namespace:
    """The command line of ``benchmarks/gpu.py`` (``--help`` lists it); ``--quick`` and
    ``--backend emulator`` replace the sizes by their small ones."""
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="Also run as `python -m ioattn.gpu.benchmark`. Results are written as "
               "gpu-<gpu>-<date>.json and .md.")
    p.add_argument("--N", type=int, nargs="+", default=[1024, 2048, 4096, 8192])
    p.add_argument("--d", type=int, nargs="+", default=[64, 128])
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--warmup", type=int, default=5, help="untimed launches first (default 5)")
    p.add_argument("--reps", type=int, default=50, help="timed launches (default 50)")
    p.add_argument("--max-seconds", type=float, default=3.0,
                   help="stop timing a configuration after this long (at least 5 launches)")
    p.add_argument("--only", nargs="+", metavar="IMPL",
                   choices=sorted({c[0] for c in CONFIGS}), help="only these implementations")
    p.add_argument("--crossover-N", type=int, default=2048)
    p.add_argument("--crossover-heads", type=int, default=16)
    p.add_argument("--no-crossover", action="store_true")
    p.add_argument("--quick", action="store_true",
                   help="a small run: N 1024 and 2048, d 64, 4 heads, crossover at N = 512")
    p.add_argument("--backend", choices=("cuda", "emulator"), default="cuda",
                   help="'emulator' checks this script on the CPU with tiny sizes (no timing "
                        "worth reading; nothing saved unless --out-dir)")
    p.add_argument("--time-emulator", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out-dir", type=Path, default=None,
                   help="where to write the results (default: benchmarks/results of the "
                        "repository when ioattn is imported from a checkout, else the current "
                        f"directory; here {default_out_dir()})")
    args = p.parse_args(argv)
    for name in ("N", "d"):
        bad = [x for x in getattr(args, name) if x < 1]
        if bad:
            p.error(f"--{name} takes positive sizes, got {bad}")
    for name in ("heads", "batch", "crossover_N", "crossover_heads", "reps"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    if args.quick:
        args.N, args.d, args.heads = [1024, 2048], [64], 4
        args.crossover_N, args.crossover_heads, args.reps, args.warmup = 512, 4, 20, 3
    if args.backend == "emulator":        # the CPU runs one block at a time: tiny sizes only
        args.N = [n for n in args.N if n <= 128] or [48, 80]
        args.d = [x for x in args.d if x <= 64] or [16]
        args.heads, args.crossover_heads = min(args.heads, 2), 1
        args.crossover_N = min(args.crossover_N, 48)
        args.reps, args.warmup = min(args.reps, 3), 1
    return args


def main(argv=None) -> int:
    """Measure, print and save (see the module docstring); the exit status: 0, 1 when the
    crossover check fails, 2 without a GPU."""
    args = parse_args(argv)
    from ioattn.gpu import GPUUnavailableError

    try:
        dev = Device(args.backend)
    except GPUUnavailableError as err:
        print(err, file=sys.stderr)
        return 2
    doc = measure(args, dev)
    print()
    print(render(doc))
    out_dir = args.out_dir if args.out_dir is not None else (
        default_out_dir() if args.backend == "cuda" else None)
    if out_dir is not None:
        js, md = save(doc, out_dir)
        print(f"wrote {js} and {md}")
    for t in doc["targets"]:
        print(f"{t['status']}: {t['name']} -- {t['detail']}")
    cross = doc["crossover"]
    if cross is not None:
        print(f"crossover: {cross['check']}")
        if not cross["ok"]:
            print(f"the crossover check failed: {cross['check']}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
