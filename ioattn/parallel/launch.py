"""Launch the parallel algorithms as real MPI processes on this machine, and read back what they
counted.

:func:`run` writes the inputs to a temporary ``.npz``, starts ``mpiexec -n P python -m
ioattn.parallel.engine``, and returns the output, the words counted on every rank, the closed form
of :mod:`ioattn.parallel.costs` and the largest difference from the single-process reference.
MPI comes from PyPI (``mpi4py`` with MPICH's ``mpich`` wheel; the ``parallel`` extra, which
``make`` installs). ``mpiexec`` is looked for beside the running Python first (a virtual
environment's ``bin``), then on ``PATH``; ``IOATTN_MPIEXEC`` overrides both.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

import numpy as np

from .._validate import as_count, as_matrix, as_scale
from .costs import ParallelCost, check, cost
from .two_level import check_M

__all__ = ["MPIUnavailable", "ParallelRun", "available", "launch", "mpiexec", "run"]


class MPIUnavailable(RuntimeError):
    """mpi4py or ``mpiexec`` is missing."""


@dataclass(frozen=True)
class ParallelRun:
    """What :func:`run` returns.

    Attributes
    ----------
    output : numpy.ndarray or tuple of numpy.ndarray
        ``O`` (forward) or ``(dQ, dK, dV)`` (backward), shaped like ``Q``.
    counted : ParallelCost
        Words, messages, memory and work counted on the ``P`` MPI processes.
    cost : ParallelCost
        The closed form of :func:`ioattn.parallel.cost` for the same run.
    error : float
        Largest absolute difference from :mod:`ioattn.parallel.reference`.
    """

    output: object
    counted: ParallelCost
    cost: ParallelCost
    error: float


def mpiexec() -> str | None:
    """The ``mpiexec`` to use, or None."""
    if os.environ.get("IOATTN_MPIEXEC"):
        return os.environ["IOATTN_MPIEXEC"]
    beside = Path(sys.executable).parent / "mpiexec"
    if beside.exists():
        return str(beside)
    return shutil.which("mpiexec")


def available() -> bool:
    """Whether :func:`run` can start MPI processes here (mpi4py and ``mpiexec`` present)."""
    return find_spec("mpi4py") is not None and mpiexec() is not None


def _require() -> str:
    if find_spec("mpi4py") is None:
        raise MPIUnavailable("mpi4py is not installed: pip install mpi4py mpich (MPI for "
                             "Python and MPICH, both from PyPI; the 'parallel' extra of ioattn)")
    exe = mpiexec()
    if exe is None:
        raise MPIUnavailable("no mpiexec found beside this Python or on PATH: pip install mpich, "
                             "or set IOATTN_MPIEXEC to your MPI's mpiexec")
    return exe


def launch(jobs: list[dict], P: int, *, timeout: float = 300) -> list[dict]:
    """Run ``jobs`` (dicts as :func:`ioattn.parallel.engine.run_job` takes) on ``P`` processes,
    in one ``mpiexec``; returns rank 0's results in order. Raises RuntimeError with the ranks'
    own error output if a process fails, and on ``timeout`` seconds."""
    exe = _require()
    P = as_count(P, "P")
    with tempfile.TemporaryDirectory(prefix="ioattn-mpi-") as tmp:
        spec, out = Path(tmp) / "jobs.json", Path(tmp) / "results.json"
        spec.write_text(json.dumps(jobs))
        cmd = [exe, "-n", str(P), sys.executable, "-m", "ioattn.parallel.engine", str(spec),
               str(out)]
        env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                   MKL_NUM_THREADS="1")
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"mpiexec -n {P} did not finish in {timeout} s") from None
        if proc.returncode != 0 or not out.exists():
            from .engine import ERROR

            said = sorted({line.split(ERROR, 1)[1].strip() for line in proc.stderr.splitlines()
                           if ERROR in line})
            detail = "; ".join(said) if said else (proc.stderr or proc.stdout).strip()[-2000:]
            raise RuntimeError(f"mpiexec -n {P} failed (exit code {proc.returncode}): {detail}")
        return json.loads(out.read_text())


def as_cost(result: dict) -> ParallelCost:
    """A :class:`ParallelCost` from the counts in one of :func:`launch`'s results."""
    c = result["counted"]
    g = result["grid"]
    M = result.get("M")
    cache = (None, None) if M is None else tuple(np.asarray(c[k], np.int64) for k in
                                                 ("cache_reads", "cache_writes"))
    return ParallelCost(result["name"], result["N"], result["d"], result["P"], result["heads"],
                        result["causal"], result["backward"], tuple(g) if g else None,
                        *(np.asarray(c[k], np.int64) for k in ("sent", "received", "messages",
                                                                "memory")),
                        np.asarray(c["work"], np.int64).reshape(result["P"], -1), M, *cache)


def _heads(x, name: str) -> np.ndarray:
    """``x`` as ``H x N x d`` float64, each head checked by :func:`~ioattn._validate.as_matrix`."""
    a = np.asarray(x)
    if a.ndim == 2:
        return as_matrix(a, name)[None]
    if a.ndim != 3:
        raise ValueError(f"{name} must be N x d or H x N x d, got shape {a.shape}")
    return np.stack([as_matrix(h, f"{name} (head {i})") for i, h in enumerate(a)])


def run(name: str, Q, K, V, P: int, *, causal: bool = False, backward: bool = False, dO=None,
        grid=None, scale: float | None = None, M: int | None = None,
        timeout: float = 300) -> ParallelRun:
    """Run parallel algorithm ``name`` on ``P`` MPI processes of this machine.

    ``Q, K, V`` (and ``dO`` for ``backward=True``) are ``N x d`` or ``H x N x d``; processor
    ``p`` starts with its rows (:mod:`~ioattn.parallel.layout`). With ``M``, every process
    computes through its own cache of ``M`` entries (:mod:`~ioattn.parallel.two_level`) and the
    run also counts the entries between its memory and its cache. Returns a
    :class:`ParallelRun`.

    Examples
    --------
    >>> import numpy as np
    >>> from ioattn import parallel
    >>> Q, K, V = np.random.default_rng(0).standard_normal((3, 40, 8))
    >>> r = parallel.run("ring", Q, K, V, P=2)                  # doctest: +SKIP
    >>> r.counted == r.cost, r.error < 1e-10                    # doctest: +SKIP
    (True, True)
    """
    arrays = {"Q": _heads(Q, "Q"), "K": _heads(K, "K"), "V": _heads(V, "V")}
    if backward:
        if dO is None:
            raise ValueError("backward=True needs the upstream gradient dO")
        arrays["dO"] = _heads(dO, "dO")
    elif dO is not None:
        raise ValueError("dO is the backward pass's input: pass backward=True")
    shape = arrays["Q"].shape
    for k, a in arrays.items():
        if a.shape != shape:
            raise ValueError(f"{k} has shape {a.shape}, Q has {shape}")
    H, N, d = shape
    check(name, N, d, P, H, backward, grid)
    if M is not None:
        M = check_M(name, d, M, backward)
    tau = as_scale(scale, d)
    _require()
    with tempfile.TemporaryDirectory(prefix="ioattn-run-") as tmp:
        inputs, outputs = Path(tmp) / "in.npz", Path(tmp) / "out.npz"
        np.savez(inputs, **arrays)
        job = {"name": name, "N": N, "d": d, "heads": H, "causal": bool(causal),
               "backward": bool(backward), "grid": list(grid) if grid else None, "scale": tau,
               "M": M, "inputs": str(inputs), "outputs": str(outputs)}
        (result,) = launch([job], P, timeout=timeout)
        with np.load(outputs) as f:
            out = [f[k] for k in sorted(f.files, key=lambda s: int(s.split("_")[1]))]
    if np.ndim(Q) == 2:
        out = [o[0] for o in out]
    counted = as_cost(result)
    closed = cost(name, N, d, P, heads=H, causal=causal, backward=backward, grid=grid, M=M)
    return ParallelRun(tuple(out) if backward else out[0], counted, closed, result["error"])
