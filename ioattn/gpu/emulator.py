"""Run ioattn's CUDA kernels on the CPU: exact counts and float32 results, without a GPU.

The same source that CuPy compiles for the GPU is compiled here by the host C++ compiler with
``kernels/emulate.h``, which supplies what the kernels use of CUDA: thread and block indices,
``__syncthreads``, warp shuffles, atomics, 16-bit floats, WMMA, and the warp-level instructions of
``kernels/mma.cuh`` (``ldmatrix``, ``mma.sync``, ``cp.async``) with the PTX ISA's per-lane
fragments. A launch runs the grid one block at a time, each CUDA thread as a fiber; the header's
comment says what that shows and what it cannot. :class:`RawModule` takes CuPy's calling
convention, so the host code of every algorithm runs unchanged on NumPy arrays
(:class:`ioattn.gpu.backend.EmulatorBackend`).

>>> import numpy as np
>>> from ioattn.gpu.emulator import RawModule
>>> code = '''
... #include "ioattn.cuh"
... extern "C" __global__ void twice(const float* x, float* y, int n) {
...     int i = blockIdx.x * blockDim.x + threadIdx.x;
...     if (i < n) y[i] = 2 * x[i];
... }'''
>>> x, y = np.arange(5, dtype=np.float32), np.zeros(5, np.float32)
>>> RawModule(code=code).get_function("twice")((2,), (4,), (x, y, np.int32(5)))
>>> y
array([0., 2., 4., 6., 8.], dtype=float32)

Kernels are compiled once and cached in ``$IOATTN_CACHE/emulator`` (default
``~/.cache/ioattn/emulator``). The environment variable ``IOATTN_EMULATOR_REVERSE=1`` runs the
threads of each block in reverse order between barriers, a second legal order that exposes
races the first hides.

The race check, ``RawModule(..., race_check=True)`` or ``IOATTN_EMULATOR_RACECHECK=1``, also
finds the races that neither order shows. Its build (cached apart from the normal one, which it
does not slow down) records every thread's shared-memory reads and writes between barriers and
raises :class:`SharedMemoryRace` for two conflicting accesses of different threads that no
``__syncthreads`` or ``__syncwarp`` orders; the comment of ``emulate.h`` says which barriers
order what, after the CUDA C++ Programming Guide.

Both instrumented builds count every warp-level memory request per instruction site
(:class:`SiteCount`: shared-memory wavefronts, global sectors) into ``Function.accesses``. The
counting build, ``RawModule(..., count_sites=True)``, is the race-check build without the race
check (the same instrumentation and counts, no per-byte records). Every module made inside
:func:`counting_sites`, or with the environment variable ``IOATTN_EMULATOR_COUNT=1``, is the
counting build, so that ``ioattn.gpu.run(..., backend="emulator")`` returns the site counts in
``accesses`` beside the global-memory counts of ``count_io=True``. The plain build counts nothing
and stays the fastest: the counting build is the slower by the factor
``benchmarks/results/banks.md`` reports. Below, the one warp of each of the two blocks reads
``x`` and writes ``y`` on the kernel's one line: 4 requests, each in one 32-byte sector.

>>> from ioattn.gpu.emulator import counting_sites
>>> with counting_sites():
...     f = RawModule(code=code).get_function("twice")
>>> f((2,), (4,), (x, y, np.int32(5)))
>>> [(c.space, c.requests, c.sectors) for c in f.accesses]
[('global', 4, 4)]

>>> shift = '''
... #include "ioattn.cuh"
... extern "C" __global__ void shift(float* y) {
...     IOATTN_SHARED(float, s);
...     s[threadIdx.x] = threadIdx.x;
...     y[threadIdx.x] = s[(threadIdx.x + 1) % blockDim.x];   // no __syncthreads before
... }'''
>>> f = RawModule(code=shift, race_check=True).get_function("shift")
>>> try:
...     f((1,), (64,), (np.zeros(64, np.float32),), shared_mem=256)
... except SharedMemoryRace as race:
...     print(str(race).splitlines()[1].split(" of shared")[0].strip())
block (0,0,0): thread (1,0,0) writes byte 4
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from .sources import KERNELS, kernels_in

#: Shared memory a block may use without opting in, and at most (bytes), as on an H100/H200.
DEFAULT_DYNAMIC_LIMIT = 48 * 1024
MAX_SHARED = 227 * 1024

#: The environment variable that turns the race check on for every module (``1``).
RACECHECK_ENV = "IOATTN_EMULATOR_RACECHECK"

#: The environment variable that makes every module the counting build (``1``).
COUNT_ENV = "IOATTN_EMULATOR_COUNT"

_counting = [0]          # the depth of nested counting_sites() blocks


@contextmanager
def counting_sites():
    """Within the block, every :class:`RawModule` made (so every emulator launch of
    :func:`ioattn.gpu.run`) is the counting build: its launches' :class:`SiteCount` rows fill
    ``Function.accesses`` and the result's ``accesses``."""
    _counting[0] += 1
    try:
        yield
    finally:
        _counting[0] -= 1

# The race-check build's flags (part of its cache key): the kernel at -O1, a third faster to
# compile than -O2 and keeping more of the source's loads and stores, instrumented; the race
# runtime, which every load and store calls, at -O2.
_RACE_KERNEL_FLAGS = ("-O1", "-g", "-fsanitize=thread", "--param",
                      "tsan-instrument-func-entry-exit=0")
_RACE_RUNTIME_FLAGS = ("-O2",)


@dataclass(frozen=True)
class SiteCount:
    """The warp-level memory requests of one instruction site of a kernel, over one launch
    (the race-check and counting builds count them; ``emulate.h`` states the rules).

    Attributes
    ----------
    kernel : str
    line : int
        The line of the kernel's source (as :func:`ioattn.gpu.sources.source` pastes it).
    code : str
        That line's text.
    space : {"shared", "global", "tensor"}
        ``"tensor"``: a kind of tensor-core instruction (``code`` names it, ``line`` is 0), one
        row per kind the launch executed.
    requests : int
        Warp-level requests (one per warp per execution of the instruction); for ``"tensor"``
        the warp-level instructions.
    accesses : int
        Lane accesses they are made of; for ``"tensor"`` the instructions' multiply-adds
        (``m n k`` each: 2,048 for ``mma.m16n8k16``).
    wavefronts : int
        Shared memory: the wavefronts they take (``requests`` when conflict-free and at most
        4 bytes a lane); 0 for global.
    sectors : int
        Global memory: the 32-byte sectors they touch; 0 for shared.
    bytes : int
        The bytes the lane accesses move (0 for ``"tensor"``): a shared-memory request of ``b``
        bytes takes at least ``ceil(b / 128)`` wavefronts (32 banks of 4 bytes).
    """

    kernel: str
    line: int
    code: str
    space: str
    requests: int
    accesses: int
    wavefronts: int
    sectors: int
    bytes: int = 0


class EmulatorError(RuntimeError):
    """A kernel the emulator could not compile or run (the message says why)."""


class OutOfBounds(EmulatorError):
    """A kernel accessed memory outside its shared memory or outside an array argument: on a
    GPU an illegal-address error at best, silent corruption at worst.

    Shared memory and every array argument end at a guard page (their last byte abuts it), so
    any access past their end faults and is reported with the buffer, the byte and the thread;
    the few bytes between the end of shared memory and its 16-byte boundary hold a canary that a
    write changes (and the race check, ``race_check=True``, checks every access exactly). An
    array argument is copied into such memory for the launch and back after it.
    """


class SharedMemoryRace(EmulatorError):
    """Two threads of a block access one byte of shared memory, at least one of them writing
    and not both atomically, and no barrier orders the two accesses: a data race on a GPU.

    Raised by the race check at the end of the first block that has one. The message names the
    kernel, then up to four races, each with the block, the two threads (``threadIdx``, or a
    warp for a WMMA operation), the byte offset in shared memory and the access that holds it,
    the kinds of the two accesses, and the barriers passed before them.
    """


def _compiler() -> str:
    for name in (os.environ.get("CXX"), "g++", "c++", "clang++"):
        if name and shutil.which(name):
            return shutil.which(name)
    raise EmulatorError("the emulator needs a C++20 compiler (g++ or clang++) on PATH")


def _cache_dir() -> Path:
    root = os.environ.get("IOATTN_CACHE") or Path.home() / ".cache" / "ioattn"
    path = Path(root) / "emulator"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _race_commands(compiler: str, src: Path, out: Path, defines: list[str],
                   count_only: bool = False) -> list[list[str]]:
    """The commands of the race-check build of ``src`` into ``out`` (with ``count_only``, of
    the counting build: the runtime compiled with ``-DIOATTN_COUNT_ONLY``, no race check).

    The kernel is compiled with g++'s ThreadSanitizer instrumentation alone (every load and
    store calls ``__tsan_readN`` or ``__tsan_writeN``), and linked without libtsan to
    ``emulate.h`` compiled uninstrumented with ``-DIOATTN_RACE_RUNTIME``, the race runtime that
    defines those functions; ``-z defs`` turns a hook it lacks into a link error.
    """
    version = subprocess.run([compiler, "--version"], capture_output=True, text=True).stdout
    if "clang" in version.lower():
        raise EmulatorError(f"the race check needs g++ (its -fsanitize=thread instrumentation), "
                            f"and {compiler} is clang: set CXX=g++")
    runtime = src.with_name("race_runtime.cpp")
    runtime.write_text('#define IOATTN_RACE_RUNTIME\n#include "emulate.h"\n')
    obj = src.with_suffix(".o")
    flags = ["-std=c++20", "-fPIC", "-w", f"-I{KERNELS}"]
    only = ["-DIOATTN_COUNT_ONLY"] if count_only else []
    return [[compiler, *flags, *_RACE_KERNEL_FLAGS, "-DIOATTN_EMULATE", "-DIOATTN_RACECHECK",
             *defines, "-c", "-o", str(obj), str(src)],
            [compiler, *flags, *_RACE_RUNTIME_FLAGS, *only, "-shared", "-Wl,-z,defs",
             "-Wl,-Bsymbolic-functions", "-o", str(out), str(obj), str(runtime)]]


@lru_cache(maxsize=None)
def _build(code: str, options: tuple[str, ...], race_check: bool = False,
           count_only: bool = False) -> ctypes.CDLL:
    names = kernels_in(code)
    if not names:
        raise EmulatorError('no extern "C" __global__ kernel in the source')
    defines = [o for o in options if o.startswith(("-D", "-U"))]
    exports = "\n".join(f"IOATTN_EMU_EXPORT({n})" for n in names)
    text = f"{code}\n{exports}\n"
    header = (KERNELS / "emulate.h").read_text()
    race = ["race check", *_RACE_KERNEL_FLAGS, *_RACE_RUNTIME_FLAGS] if race_check else []
    if race_check and count_only:
        race.append("count only")
    parts = [text, header, *defines, *race]
    key = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]
    lib = _cache_dir() / f"{key}.so"
    if not lib.exists():
        with tempfile.TemporaryDirectory() as tmp:
            src = Path(tmp) / "kernel.cpp"
            src.write_text(text)
            out = Path(tmp) / "kernel.so"
            compiler = _compiler()
            if race_check:
                commands = _race_commands(compiler, src, out, defines, count_only)
            else:
                commands = [[compiler, "-std=c++20", "-O2", "-shared", "-fPIC", "-w",
                             "-DIOATTN_EMULATE", *defines, f"-I{KERNELS}", "-o", str(out),
                             str(src)]]
            for cmd in commands:
                done = subprocess.run(cmd, capture_output=True, text=True)
                if done.returncode != 0:
                    build = "the race check's build" if race_check else "the emulator"
                    raise EmulatorError(f"the kernel source does not compile for {build}:\n"
                                        f"{done.stderr[-4000:]}")
            os.replace(out, lib)          # atomic: concurrent builds of one key are safe
    handle = ctypes.CDLL(str(lib))
    handle.ioattn_path = str(lib)
    handle.ioattn_code = code
    return handle


class Function:
    """One kernel: ``function(grid, block, args, shared_mem=0)`` as in CuPy."""

    def __init__(self, lib: ctypes.CDLL, name: str):
        try:
            self._entry = getattr(lib, f"ioattn_emu_{name}")
        except AttributeError:
            raise EmulatorError(f'no extern "C" __global__ kernel named {name!r}') from None
        self._set_reverse = lib.ioattn_emu_set_reverse
        self._guard = lib.ioattn_emu_guard
        self._guard.restype = ctypes.c_void_p
        self._guard.argtypes = (ctypes.c_int, ctypes.c_size_t, ctypes.c_size_t)
        self._unguard = lib.ioattn_emu_unguard
        self._lib = lib
        self._mma = lib.ioattn_emu_mma
        self._mma.argtypes = (ctypes.POINTER(ctypes.c_ulonglong), ctypes.c_int)
        self._counts = getattr(lib, "ioattn_race_counts", None)   # instrumented builds only
        #: The :class:`SiteCount` of every instruction site of the last launch (the race-check
        #: and counting builds; empty in the plain build).
        self.accesses: tuple[SiteCount, ...] = ()
        self.name = name
        self.max_dynamic_shared_size_bytes = DEFAULT_DYNAMIC_LIMIT

    def __call__(self, grid, block, args, shared_mem=0):
        grid, block = _dims(grid), _dims(block)
        limit = max(DEFAULT_DYNAMIC_LIMIT, min(self.max_dynamic_shared_size_bytes, MAX_SHARED))
        if shared_mem > limit:
            raise EmulatorError(f"{self.name}: {shared_mem} bytes of dynamic shared memory "
                                f"requested, the limit is {limit}")
        mma = (ctypes.c_ulonglong * 4)()
        self._mma(mma, 1)
        if self._counts is not None:
            self._counts(1)
        try:
            self._launch(grid, block, args, shared_mem)
        finally:
            self._unguard()
            if self._counts is not None:
                self.accesses = self._read_counts() + self._tensor_counts()
                self._counts(0)

    #: The tensor-core instructions the emulator counts: (code, multiply-adds of one), by slot
    #: of ``emulate.h``'s ``Runtime::mma``; WMMA's come with their own total.
    TENSOR = (("mma.sync.aligned.m16n8k16", 16 * 8 * 16), ("mma.sync.aligned.m16n8k8", 16 * 8 * 8),
              ("wmma::mma_sync", None))

    def _tensor_counts(self) -> tuple[SiteCount, ...]:
        out = (ctypes.c_ulonglong * 4)()
        self._mma(out, 1)
        rows = []
        for slot, (code, fma) in enumerate(self.TENSOR):
            n = int(out[slot])
            if n:
                total = n * fma if fma is not None else int(out[3])
                rows.append(SiteCount(self.name, 0, code, "tensor", n, total, 0, 0))
        return tuple(rows)

    def _read_counts(self) -> tuple[SiteCount, ...]:
        lib = self._lib
        lib.ioattn_race_sites.restype = ctypes.c_size_t
        n = lib.ioattn_race_sites()
        raw = []
        for i in range(n):
            out = (ctypes.c_uint64 * 7)()
            lib.ioattn_race_site(ctypes.c_size_t(i), out)
            raw.append(tuple(int(v) for v in out))
        lines = _source_lines(lib.ioattn_path, tuple(r[0] for r in raw))
        text = lib.ioattn_code.splitlines()
        out = []
        for (site, shared, requests, wavefronts, sectors, accesses, nbytes), line in zip(raw,
                                                                                        lines):
            code = text[line - 1].strip() if 0 < line <= len(text) else "?"
            out.append(SiteCount(self.name, line, code, "shared" if shared else "global",
                                 requests, accesses, wavefronts, sectors, nbytes))
        merged = {}
        for c in out:                               # one row per (line, space)
            key = (c.line, c.space)
            if key in merged:
                m = merged[key]
                c = SiteCount(c.kernel, c.line, c.code, c.space, m.requests + c.requests,
                              m.accesses + c.accesses, m.wavefronts + c.wavefronts,
                              m.sectors + c.sectors, m.bytes + c.bytes)
            merged[key] = c
        return tuple(sorted(merged.values(), key=lambda c: (c.line, c.space)))

    def _launch(self, grid, block, args, shared_mem):
        keep, pointers, sizes, arrays = [], [], [], []
        for i, a in enumerate(args):
            if isinstance(a, np.ndarray):
                if not a.flags.c_contiguous:
                    raise EmulatorError(f"{self.name}: argument {i} is not C-contiguous")
                where = next((w for b, w in arrays if b.ctypes.data == a.ctypes.data
                              and b.nbytes == a.nbytes), None)    # one array passed twice
                if where is None:
                    where = self._guard(i, a.nbytes, _alignment(a.nbytes))
                    if not where:
                        raise EmulatorError(f"{self.name}: cannot map {a.nbytes} bytes for "
                                            f"argument {i}")
                    ctypes.memmove(where, a.ctypes.data, a.nbytes)
                    arrays.append((a, where))
                value = ctypes.c_void_p(where)
                size = ctypes.sizeof(ctypes.c_void_p)
            elif isinstance(a, np.generic):
                value = ctypes.create_string_buffer(a.tobytes(), a.nbytes)
                size = a.nbytes
            else:
                raise EmulatorError(f"{self.name}: argument {i} is {type(a).__name__}; pass "
                                    "NumPy arrays and NumPy scalars (numpy.int32, ...)")
            keep.append(value)
            pointers.append(ctypes.cast(ctypes.byref(value), ctypes.c_void_p))
            sizes.append(size)
        n = len(args)
        err = ctypes.create_string_buffer(4096)
        self._set_reverse(int(os.environ.get("IOATTN_EMULATOR_REVERSE", "0") == "1"))
        rc = self._entry((ctypes.c_uint * 3)(*grid), (ctypes.c_uint * 3)(*block),
                         ctypes.c_size_t(int(shared_mem)), (ctypes.c_void_p * n)(*pointers),
                         (ctypes.c_size_t * n)(*sizes), ctypes.c_int(n), err,
                         ctypes.c_size_t(len(err)))
        for a, where in arrays:
            if a.flags.writeable:
                ctypes.memmove(a.ctypes.data, where, a.nbytes)
        if rc == 2:
            raise SharedMemoryRace(f"{self.name}: {err.value.decode()}")
        if rc == 3:
            raise OutOfBounds(f"{self.name}: {err.value.decode()}")
        if rc != 0:
            raise EmulatorError(f"{self.name}: {err.value.decode()}")


def _source_lines(lib: str, offsets: tuple[int, ...]) -> list[int]:
    """The source line (of the kernel's ``kernel.cpp``) of each return address ``offsets`` in
    library ``lib``, by ``addr2line`` (0 where it cannot tell): the innermost line of the
    kernel's own source in the chain of inlined calls, so that an access made inside one of
    ``emulate.h``'s functions (``ldmatrix``, ``cp_async``, WMMA) is the kernel's line that
    calls it."""
    if not offsets:
        return []
    tool = shutil.which("addr2line")
    if tool is None:
        return [0] * len(offsets)
    done = subprocess.run([tool, "-i", "-a", "-e", lib, *(hex(max(o - 1, 0)) for o in offsets)],
                          capture_output=True, text=True)
    lines: list[int] = []
    for row in done.stdout.splitlines():
        if row.startswith("0x"):                  # -a: the address opens each chain
            lines.append(0)
            continue
        where = row.rsplit(":", 1)
        num = where[1].split()[0] if len(where) == 2 else "0"
        if lines and lines[-1] == 0 and num.isdigit() and "kernel.cpp" in where[0]:
            lines[-1] = int(num)
    return (lines + [0] * len(offsets))[:len(offsets)]


def _alignment(nbytes: int) -> int:
    """The alignment of an array's guarded copy: the largest power of two up to 16 that divides
    its size, so that its end abuts the guard page exactly."""
    align = 16
    while nbytes % align:
        align //= 2
    return align


def _dims(t) -> tuple[int, int, int]:
    t = tuple(int(v) for v in (t if isinstance(t, (tuple, list)) else (t,)))
    if not 1 <= len(t) <= 3 or min(t) < 1:
        raise EmulatorError(f"grid and block dimensions must be 1 to 3 positive ints, got {t}")
    return t + (1,) * (3 - len(t))


class RawModule:
    """A kernel source compiled for the emulator; ``get_function(name)`` as in CuPy.

    With ``race_check=True`` (default: whether the environment variable
    ``IOATTN_EMULATOR_RACECHECK`` is ``1``) it is the race-check build, whose launches raise
    :class:`SharedMemoryRace` on a shared-memory race. Otherwise, with ``count_sites=True`` it
    is the counting build: no race check, but every launch's :class:`SiteCount` rows in
    ``Function.accesses`` as the race-check build counts them (default: inside
    :func:`counting_sites`, or whether ``IOATTN_EMULATOR_COUNT`` is ``1``). Both instrumented
    builds count.
    """

    def __init__(self, code: str, options: tuple[str, ...] = (),
                 race_check: bool | None = None, count_sites: bool | None = None):
        if race_check is None:
            race_check = os.environ.get(RACECHECK_ENV, "0") == "1"
        if count_sites is None:
            count_sites = _counting[0] > 0 or os.environ.get(COUNT_ENV, "0") == "1"
        self.race_check = bool(race_check)
        self.count_sites = self.race_check or bool(count_sites)
        self._lib = _build(code, tuple(options), self.count_sites,
                           count_only=not self.race_check)

    def get_function(self, name: str) -> Function:
        return Function(self._lib, name)
