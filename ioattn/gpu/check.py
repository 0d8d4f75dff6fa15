"""``make gpu-check``: everything a machine with an NVIDIA GPU can tell about the kernels, in one
command and at most 8 minutes, with no package registry (its own Python: CuPy, numpy, pytest,
hypothesis, optionally torch).

The steps, each with its own time limit, each writing its log into one folder
``benchmarks/results/gpu-check-<gpu>-<date>/`` (:func:`check_dir`):

1. ``test-gpu``: the ``@pytest.mark.gpu`` tests (``pytest -m gpu tests/gpu``), as ``make
   test-gpu``;
2. ``memcheck`` and ``racecheck``: NVIDIA's ``compute-sanitizer --tool memcheck`` (out-of-bounds
   and misaligned global and shared accesses) and ``--tool racecheck`` (shared-memory hazards) on
   one small launch of every kernel (:data:`LAUNCHES`, run by ``python -m ioattn.gpu.check
   --launch NAME``); where there is no ``compute-sanitizer`` (on ``PATH`` or under
   ``CUDA_HOME``), each is skipped with a printed line saying so;
3. ``benchmark``: ``benchmarks/gpu.py --quick`` into the same folder.

Then ``summary.json`` and ``summary.md`` there: each step's command, status (``pass``, ``fail``,
``timeout``, ``skipped``) and log. The exit status is 0 when nothing failed. ``--dry-run``
prints the steps and writes the summary without running anything (this is what the CPU tests
check).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["LAUNCHES", "TOTAL_SECONDS", "check_dir", "decode_launch", "find_sanitizer", "launch",
           "main", "parse_args", "steps"]

#: The whole check's budget (seconds) and each step's share of it.
TOTAL_SECONDS = 480
LIMITS = {"test-gpu": 120, "memcheck": 120, "racecheck": 140, "benchmark": 90}

#: One small launch of every kernel: name -> (algorithm, keyword arguments of ioattn.gpu.run),
#: ("backward", keyword arguments of ioattn.gpu.run_backward), or ("decode", those of
#: ioattn.gpu.decode). Sizes are small (sanitizers
#: slow kernels 10-100x) but ragged at the edges.
LAUNCHES = {
    "flash-float32": ("flash", dict(dtype="float32", causal=True, save_lse=True)),
    "flash-float16": ("flash", dict(dtype="float16", causal=True, save_lse=True)),
    "flash-bfloat16": ("flash", dict(dtype="bfloat16")),
    "square_tiling": ("square_tiling", dict()),
    "standard-rows": ("standard", dict()),
    "standard-strips": ("standard", dict(M=600)),
    "flash-backward": ("backward", dict()),
    "flash_fa2-float16": ("flash_fa2", dict(dtype="float16", causal=True, save_lse=True)),
    "flash_fa2-bfloat16": ("flash_fa2", dict(dtype="bfloat16")),
    "flash_fa2-backward-float16": ("backward", dict(kernel="flash_fa2", dtype="float16",
                                                    causal=True)),
    "flash_fa2-backward-bfloat16": ("backward", dict(kernel="flash_fa2", dtype="bfloat16")),
    "decode-paged": ("decode", dict(S=4, causal=True)),
}
#: The shape every launch uses: batch x heads, N (not a multiple of any block), d.
SHAPE = (2, 100, 64)
#: The decoding launch: batch, H_q, H_kv (g = 4), N_q, N_k (a ragged last page), d, and pages
#: of P_s rows (the default tile, 48 keys, reads them whole twice over), shuffled in the pool.
DECODE_SHAPE = (2, 8, 2, 2, 1000, 128)
DECODE_PAGE = 24


def root() -> Path:
    """The checkout this module is imported from."""
    return Path(__file__).resolve().parents[2]


def find_sanitizer() -> str | None:
    """``compute-sanitizer`` on ``PATH``, under ``CUDA_HOME``/``CUDA_PATH``, or in
    ``/usr/local/cuda``; None when there is none."""
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    for base in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if base:
            for sub in ("bin", "compute-sanitizer"):
                path = Path(base) / sub / "compute-sanitizer"
                if path.is_file():
                    return str(path)
    return None


def check_dir(out_dir: Path, gpu_name: str, date: str) -> Path:
    """The folder of one check: ``out_dir/gpu-check-<gpu>-<YYYY-MM-DD>``."""
    from .benchmark import slug

    return Path(out_dir) / f"gpu-check-{slug(gpu_name)}-{date[:10]}"


def steps(python: str, folder: Path, sanitizer: str | None) -> list[dict]:
    """The steps of a check, in order: ``{"name", "command" (argv, or None when skipped),
    "log", "limit", "skip"}``."""
    out = [{"name": "test-gpu", "command": [python, "-m", "pytest", "-m", "gpu", "tests/gpu",
                                            "-rs", "-p", "no:cacheprovider",
                                            f"--junitxml={folder / 'test-gpu.xml'}"],
            "log": folder / "test-gpu.log", "limit": LIMITS["test-gpu"], "skip": None}]
    for tool in ("memcheck", "racecheck"):
        for name in LAUNCHES:
            step = {"name": f"{tool} {name}", "log": folder / f"{tool}-{name}.log",
                    "limit": LIMITS[tool] // len(LAUNCHES), "skip": None,
                    "command": None if sanitizer is None else
                    [sanitizer, "--tool", tool, "--error-exitcode", "1", python, "-m",
                     "ioattn.gpu.check", "--launch", name]}
            if sanitizer is None:
                step["skip"] = "no compute-sanitizer on PATH or under CUDA_HOME"
            out.append(step)
    out.append({"name": "benchmark", "command": [python, str(root() / "benchmarks" / "gpu.py"),
                                                 "--quick", "--out-dir", str(folder)],
                "log": folder / "benchmark.log", "limit": LIMITS["benchmark"], "skip": None})
    return out


def launch(name: str) -> None:
    """Run launch ``name`` of :data:`LAUNCHES` once on the GPU and check its output (the
    process a sanitizer watches). Raises ``ValueError`` for an unknown name."""
    if name not in LAUNCHES:
        raise ValueError(f"unknown launch {name!r}; there are {', '.join(LAUNCHES)}")
    import numpy as np

    import ioattn.gpu as g

    algorithm, kw = LAUNCHES[name]
    rng = np.random.default_rng(0)
    Q, K, V = (rng.standard_normal(SHAPE).astype(np.float32) for _ in range(3))
    if algorithm == "decode":
        arrays = (decode_launch(rng, **kw),)
    elif algorithm == "backward":
        fwd = g.run("flash", Q, K, V, save_lse=True, causal=kw.get("causal", False))
        dO = rng.standard_normal(SHAPE).astype(np.float32)
        out = g.run_backward(Q, K, V, fwd.output, dO, fwd.lse, **kw)
        arrays = out.output
    else:
        arrays = (g.run(algorithm, Q, K, V, **kw).output,)
    _check_finite(name, arrays)


def _check_finite(name, arrays) -> None:
    import numpy as np

    for a in arrays:
        host = a.get() if hasattr(a, "get") else np.asarray(a)
        if not np.isfinite(host).all():
            raise RuntimeError(f"{name}: the output has non-finite entries")


def decode_launch(rng, backend="cuda", **kw):
    """The decoding launch: :data:`DECODE_SHAPE`'s cache in pages of :data:`DECODE_PAGE` rows
    scattered over a pool with spare pages, ``ioattn.gpu.decode(..., **kw)``; its output."""
    import numpy as np

    import ioattn.gpu as g

    batch, H_q, H_kv, N_q, N_k, d = DECODE_SHAPE
    n = -(-N_k // DECODE_PAGE)
    pool = batch * n + 5
    table = rng.permutation(pool)[:batch * n].reshape(batch, n).astype(np.int32)
    Q = rng.standard_normal((batch, H_q, N_q, d)).astype(np.float32)
    K, V = (rng.standard_normal((pool, H_kv, DECODE_PAGE, d)).astype(np.float32)
            for _ in range(2))
    return g.decode(Q, K, V, table, N_k, backend=backend, **kw).output


def _run_step(step: dict, cwd: Path) -> dict:
    if step["skip"] is not None:
        print(f"SKIP {step['name']}: {step['skip']}", flush=True)
        return {"status": "skipped", "seconds": 0.0, "reason": step["skip"]}
    t0 = time.perf_counter()
    with open(step["log"], "w", encoding="utf-8") as log:
        try:
            rc = subprocess.run(step["command"], cwd=cwd, stdout=log, stderr=subprocess.STDOUT,
                                timeout=step["limit"]).returncode
            status = "pass" if rc == 0 else "fail"
        except subprocess.TimeoutExpired:
            rc, status = None, "timeout"
    seconds = round(time.perf_counter() - t0, 1)
    print(f"{status.upper():<7} {step['name']} ({seconds} s, log {step['log'].name})", flush=True)
    return {"status": status, "seconds": seconds, "returncode": rc}


def _summary_md(doc: dict) -> str:
    lines = [f"# GPU check: {doc['gpu']}, {doc['date']}", "",
             f"git commit {doc['git_commit']}; {'dry run, nothing ran' if doc['dry_run'] else ''}",
             "", "| step | status | seconds | log |", "|---|---|---:|---|"]
    for s in doc["steps"]:
        lines.append(f"| {s['name']} | {s['status']} | {s.get('seconds', '-')} | {s['log']} |")
    return "\n".join(lines) + "\n"


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m ioattn.gpu.check",
                                description="The GPU checks of make gpu-check (module docstring)")
    p.add_argument("--out-dir", type=Path, default=None,
                   help="where the check's folder goes (default: benchmarks/results)")
    p.add_argument("--dry-run", action="store_true",
                   help="print and record the steps, run nothing (no GPU needed)")
    p.add_argument("--launch", metavar="NAME", default=None,
                   help=f"run one small launch (for a sanitizer): {', '.join(LAUNCHES)}")
    args = p.parse_args(argv)
    if args.launch is not None and args.launch not in LAUNCHES:
        p.error(f"--launch takes one of {', '.join(LAUNCHES)}, got {args.launch!r}")
    return args


def main(argv=None) -> int:
    """Run the check (see the module docstring); the exit status: 0 when no step failed, 1
    when one did, 2 without a GPU (unless ``--dry-run``)."""
    args = parse_args(argv)
    from .device import available, why_unavailable

    if args.launch is not None:
        if not available():
            print(f"no GPU: {why_unavailable()}")
            return 2
        launch(args.launch)
        return 0
    if not args.dry_run and not available():
        print(f"gpu-check needs a CUDA GPU: {why_unavailable()}")
        return 2
    from .benchmark import git_commit

    gpu = "dry run" if args.dry_run else _gpu_name()
    date = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    out_dir = args.out_dir if args.out_dir is not None else root() / "benchmarks" / "results"
    folder = check_dir(out_dir, gpu, date)
    folder.mkdir(parents=True, exist_ok=True)
    sanitizer = find_sanitizer()
    plan = steps(sys.executable, folder, sanitizer)
    results = []
    for step in plan:
        if args.dry_run:
            what = "SKIP " + step["skip"] if step["skip"] else " ".join(step["command"])
            print(f"{step['name']}: {what}")
            res = {"status": "skipped" if step["skip"] else "not run"}
        else:
            res = _run_step(step, root())
        results.append({"name": step["name"], "command": step["command"],
                        "log": step["log"].name, "limit": step["limit"], **res})
    doc = {"gpu": gpu, "date": date, "git_commit": git_commit(), "dry_run": args.dry_run,
           "sanitizer": sanitizer, "total_limit_seconds": TOTAL_SECONDS, "steps": results}
    (folder / "summary.json").write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    (folder / "summary.md").write_text(_summary_md(doc), encoding="utf-8")
    print(f"wrote {folder / 'summary.json'} and summary.md")
    return 1 if any(r["status"] in ("fail", "timeout") for r in results) else 0


def _gpu_name() -> str:
    from .device import device_info

    return device_info()["name"]


if __name__ == "__main__":
    sys.exit(main())
