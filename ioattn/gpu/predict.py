"""How long would a kernel take on a GPU? A prediction from exact counts at three levels.

:mod:`ioattn.roofline` bounds a schedule by its global traffic and its flops. One level down,
a kernel also waits for its shared memory and its tensor cores, and the emulator counts both
exactly (:class:`ioattn.gpu.emulator.SiteCount`). For one launch of a kernel on one GPU of
:data:`ioattn.gpus.GPUS` this module predicts its time as the largest of four times, from three
kinds of counts (global sectors, at two levels of the memory hierarchy; shared wavefronts;
tensor-core multiply-adds):

- **HBM**: the 32-byte sectors that must cross the memory interface (HBM or GDDR), over the
  datasheet bandwidth; and **L2**: every sector the warp requests touch in global memory, over
  the L2 cache's bandwidth to the SMs (:meth:`ioattn.gpus.GPU.l2_bandwidth`: documented for the
  A100, assumed for the H100 and H200, absent for the T4; see :mod:`ioattn.gpus`). Where the L2
  level applies (below), the HBM sectors are each array of the launch once, the compulsory
  traffic (:attr:`Launch.arrays`, ``ceil(bytes / 32)`` each), and no more than the counted ones;
  where it does not, every counted sector is taken to cross HBM, as
  :attr:`Prediction.hbm_only` does for every launch (the pessimistic variant);
- **shared**: its shared-memory wavefronts, one per clock per SM
  (:data:`ioattn.gpus.SHARED_BYTES_PER_CLOCK`: 32 banks of 4 bytes), over the SMs the grid
  occupies at the clock :meth:`ioattn.gpus.GPU.clock`;
- **compute**: its tensor-core multiply-adds (counted ``mma.sync`` and WMMA instructions) at
  the dense 16-bit peak, or, for the float32 kernels, the multiply-adds of the matrix products
  (:func:`ioattn.roofline.attention_flops`, the closed form, not a count) at the FP32 peak; in
  both cases over the SMs the grid occupies, and per SM over the fraction of its four
  sub-partitions (one tensor core and one warp scheduler each, in the Turing, A100 and H100
  whitepapers) that its resident warps can keep busy, ``min(4, warps) / 4``.

**The L2 assumption.** A forward kernel's blocks re-read their head's ``K`` and ``V`` (declared by
:attr:`Kernel.reread`), one block per query block. The L2 level is applied to a launch when the
``K`` and ``V`` of every head its resident blocks can span at once fit in the L2 cache: with
``W = SMs x blocks per SM`` resident blocks, ``blocks / heads`` blocks a head, launched in the
order of ``blockIdx.x`` (the query block) first, a wave spans at most ``ceil(W / (blocks /
heads)) + 1`` heads. Then each ``K`` and ``V`` sector is taken to come from HBM once and to be
served by the L2 at every re-read (an ideal cache: no eviction of lines still to be re-read, no
conflict misses, L2 partitions perfectly balanced). CUDA does not promise this launch order;
it is what the grid's shape intends. Kernels without ``reread`` (the backwards here) and GPUs
without an L2 figure are predicted with every sector at HBM.

The SMs the grid occupies are ``min(sms, blocks)``; the resident blocks per SM (occupancy) come
from the kernel's registers per thread (ptxas, ``nvcc -Xptxas -v``, for the GPU's architecture),
its threads and its shared memory per block (with the 1 KB each block reserves on 8.0 and 9.0,
:data:`ioattn.gpu.plans.RESERVED`).

**Left out**, so the prediction is a lower bound on the time of a real run (given the L2
bandwidth, which is assumed for the H100 and H200), not a measurement:
latency (of global loads, of ``mma`` results, of barriers: the overlap of the levels is
taken to be perfect), tail effects (the last partial wave of blocks: ``waves`` is reported, not
used), instruction issue (the exponentials, conversions, address arithmetic and shuffles of the
softmax, one instruction per warp per clock per sub-partition), L2 misses beyond the compulsory
ones and the L2's latency, the L1 cache (every sector is counted at the L2), launch overhead and
clock throttling. No GPU has run these kernels; every figure here is counted or derived, none
is measured.

**Counts at large N.** Emulating ``N = 8192`` is out of reach, so the counts are scaled. For the
kernels here, dense and with ``N`` a multiple of ``L = lcm(B_r, B_c)``, every query block does
the same work and every (query block, key block) pair the same, so every count is
``a k + b k^2`` in ``k = N / L`` (``T_r = k L / B_r`` blocks, ``T_r T_c`` pairs), times the number
of heads. :func:`counts` runs the emulator (its counting build) at ``k = 1`` and ``k = 2`` with
the large problem's blocks, solves for ``a`` and ``b`` per site, and evaluates at ``k``;
``tests/gpu/test_predict.py`` checks the formula against direct counts at ``k = 3`` and ``4``. The
``b`` part is the main loop (the per-pair iteration): :attr:`Counts.loop_wavefronts` and
:attr:`Counts.loop_minimum`, the fewest wavefronts its requests could take (``ceil(bytes /
128)`` each).

Kernels are looked up in :data:`KERNELS` (label to :class:`Kernel`); :func:`register` adds one.
A backward is run through its host module's ``plan(N, d, block=, dtype=, budget=)`` and
``backward(be, plan, Q, K, V, O, dO, L, dQ, dK, dV, io, scale=, count_io=)``, as in
:mod:`ioattn.gpu.backward`; a module ``ioattn.gpu.flash_fa2_backward`` with those two is
registered as ``"flash_fa2 backward"`` when the package has it.
"""

from __future__ import annotations

import importlib
import math
import re
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache

import numpy as np

from ..gpus import GPUS, SHARED_BYTES_PER_CLOCK
from .backend import Backend
from .plans import RESERVED

__all__ = ["Counts", "Kernel", "KERNELS", "Occupancy", "Prediction", "Launch", "counts",
           "l2_span", "launches", "occupancy", "predict", "register", "registers"]

#: Register allocation unit (registers per warp are rounded up to a multiple of it) on compute
#: capability 7.5 to 9.0 (NVIDIA CUDA Occupancy Calculator, "Register allocation unit size").
REGISTER_UNIT = 256


@dataclass(frozen=True)
class Kernel:
    """One kernel of the prediction: the algorithm ``name`` of :func:`ioattn.gpu.run` (or of a
    backward module), whether it is a backward, and its role (``"readable"`` or ``"fast"``)."""

    label: str
    name: str
    backward: bool = False
    role: str = "readable"
    module: str | None = None            # a backward's host module (ioattn.gpu.<module>)
    #: Positions, among the launch's array arguments, of the arrays every block of a head
    #: re-reads (``K`` and ``V`` of a forward: the L2 assumption of the module docstring).
    reread: tuple = ()


#: The kernels, by label.
KERNELS: dict[str, Kernel] = {}


def register(kernel: Kernel) -> Kernel:
    """Add ``kernel`` to :data:`KERNELS` (a label seen before is replaced)."""
    KERNELS[kernel.label] = kernel
    return kernel


register(Kernel("flash", "flash", role="readable", reread=(1, 2)))
register(Kernel("flash_fa2", "flash_fa2", role="fast", reread=(1, 2)))
register(Kernel("flash backward", "flash", backward=True, role="readable", module="backward"))
try:                                   # a fast backward, when the package has one
    importlib.import_module("ioattn.gpu.flash_fa2_backward")
    register(Kernel("flash_fa2 backward", "flash_fa2_backward", backward=True, role="fast",
                    module="flash_fa2_backward"))
except ImportError:
    pass


@dataclass(frozen=True)
class Launch:
    """One kernel launch of the host code: source file, kernel, grid, threads, shared bytes, and
    the bytes of each array argument in order (``arrays``)."""

    file: str
    kernel: str
    grid: tuple
    threads: int
    shared: int
    arrays: tuple = ()

    @property
    def compulsory(self) -> int:
        """Sectors of the launch's arrays, each once: ``sum(ceil(bytes / 32))``."""
        return sum(-(-b // 32) for b in self.arrays)

    @property
    def blocks(self) -> int:
        return math.prod(self.grid)


class _Recorder(Backend):
    """A backend that records the host code's launches and runs nothing (the plan of a GPU of
    ``budget`` bytes of shared memory per block)."""

    name = "emulator"
    xp = np

    def __init__(self, budget: int):
        self.shared_memory_per_block = budget
        self.log: list[Launch] = []

    def function(self, file, kernel, count_io):
        def launch(grid, block, args, shared_mem=0):
            arrays = tuple(int(a.nbytes) for a in args if isinstance(a, np.ndarray) and a.ndim)
            self.log.append(Launch(file, kernel, tuple(grid), math.prod(block), int(shared_mem),
                                   arrays))
        return launch


def _gpu(gpu: str):
    if gpu not in GPUS:
        raise ValueError(f"gpu must be one of {', '.join(GPUS)}, got {gpu!r}")
    return GPUS[gpu]


def _kernel(label: str) -> Kernel:
    if label not in KERNELS:
        raise ValueError(f"kernel must be one of {', '.join(KERNELS)}, got {label!r}")
    return KERNELS[label]


def _plan(kernel: Kernel, N: int, d: int, dtype: str, budget: int, block=None):
    from .api import gpu_plan

    if kernel.backward:
        module = importlib.import_module(f"ioattn.gpu.{kernel.module}")
        if kernel.module == "backward":
            return gpu_plan("flash", N, d, block=block, budget=budget, backward=True)
        return module.plan(N, d, block=block, dtype=dtype, budget=budget)
    return gpu_plan(kernel.name, N, d, block=block, dtype=dtype, budget=budget)


def launches(label: str, N: int, d: int, *, heads: int = 1, dtype: str = "bfloat16",
             gpu: str = "H100", block=None) -> tuple:
    """The plan and the :class:`Launch` list of kernel ``label`` for ``heads`` problems of
    ``N x d`` on ``gpu``, from the host code itself (nothing runs; the arrays are not filled)."""
    from .api import KERNELS as HOSTS

    kernel, g = _kernel(label), _gpu(gpu)
    be = _Recorder(g.shared_per_block)
    plan = _plan(kernel, N, d, dtype, g.shared_per_block, block)
    storage = {"float32": np.float32, "float16": np.float16, "bfloat16": np.uint16}[dtype]
    f32 = (heads, N, d)
    if kernel.backward:
        module = importlib.import_module(f"ioattn.gpu.{kernel.module}")
        grads = [np.empty(f32, np.float32) for _ in range(3)]
        if kernel.module == "backward":          # the float32 backward
            x = [np.empty(f32, np.float32) for _ in range(5)]
            extra = {}
        else:                                    # Q, K, V, dO in 16 bits, O float32
            Q, K, V, dO = (np.empty(f32, storage) for _ in range(4))
            x, extra = [Q, K, V, np.empty(f32, np.float32), dO], {"dtype": dtype}
        go = module.backward(be, plan, *x, np.empty((heads, N), np.float32), *grads,
                             np.zeros(2, np.uint64), scale=1.0, count_io=False, **extra)
    else:
        Q, K, V = (np.empty(f32, storage) for _ in range(3))
        go = HOSTS[kernel.name].forward(be, plan, Q, K, V, np.empty(f32, np.float32),
                                        np.zeros(1, np.float32), np.zeros(2, np.uint64),
                                        scale=1.0, causal=False, save_lse=False, dtype=dtype,
                                        count_io=False)
    go()
    return plan, tuple(be.log)


@lru_cache(maxsize=None)
def _ptxas(file: str, arch: str) -> dict:
    from .sources import nvcc_check

    log = nvcc_check(file, arch)
    out, current = {}, None
    for line in log.splitlines():
        m = re.search(r"Compiling entry function '(\w+)' for '(\w+)'", line)
        if m:
            current = m.group(1)
        m = re.search(r"Used (\d+) registers", line)
        if m and current:
            out[current] = int(m.group(1))
    return out


def registers(file: str, kernel: str, gpu: str) -> int:
    """Registers per thread of ``kernel`` of ``file`` compiled for ``gpu``'s architecture, as
    ptxas reports them (``nvcc -Xptxas -v``; raises ``FileNotFoundError`` without nvcc)."""
    arch = "sm_" + _gpu(gpu).compute_capability.replace(".", "")
    found = _ptxas(file, arch)
    if kernel not in found:
        raise ValueError(f"ptxas reported no kernel {kernel!r} in {file} for {arch}")
    return found[kernel]


@dataclass(frozen=True)
class Occupancy:
    """Resident blocks of one launch per SM, and what limits them."""

    registers: int | None         # per thread (ptxas); None without nvcc
    blocks_per_sm: int
    limit: str                    # "registers", "shared", "threads" or "blocks"
    warps_per_sm: int


def occupancy(launch: Launch, gpu: str) -> Occupancy:
    """Blocks of ``launch`` resident on one SM of ``gpu``: the fewest that its registers (per
    warp rounded up to :data:`REGISTER_UNIT`), its shared memory (plus :data:`RESERVED` per
    block on compute capability 8.0 and 9.0), its threads and the per-SM block limit allow.
    Without nvcc the registers are unknown (``None``) and do not limit."""
    g = _gpu(gpu)
    try:
        regs = registers(launch.file, launch.kernel, gpu)
    except FileNotFoundError:
        regs = None
    warps = -(-launch.threads // 32)
    reserve = RESERVED if g.compute_capability >= "8.0" else 0
    limits = {}
    if regs is not None:
        per_warp = -(-regs * 32 // REGISTER_UNIT) * REGISTER_UNIT
        limits["registers"] = (g.registers_per_sm // 4 // per_warp) // warps
    limits["shared"] = g.shared_per_sm // (launch.shared + reserve) if launch.shared else 10**9
    limits["threads"] = g.max_threads_per_sm // (32 * warps)
    limits["blocks"] = g.max_blocks_per_sm
    limit = min(limits, key=limits.get)
    n = limits[limit]
    if n < 1:
        raise ValueError(f"{launch.kernel} does not fit on one SM of the {gpu} ({limit})")
    return Occupancy(regs, n, limit, n * warps)


@dataclass(frozen=True)
class Counts:
    """A kernel's counts for ``heads`` problems of ``N x d`` (all its launches).

    ``sectors`` (global), ``wavefronts`` (shared), ``fma`` (tensor-core multiply-adds; 0 for
    the float32 kernels), and the main loop's part of the wavefronts (``loop_wavefronts``, the
    ``b k^2`` terms) with the fewest its requests could take (``loop_minimum``)."""

    sectors: int
    wavefronts: int
    fma: int
    loop_wavefronts: int
    loop_minimum: int


@lru_cache(maxsize=64)
def _emulate(kernel: Kernel, N: int, d: int, dtype: str, block) -> tuple:
    """The counting build's site rows of one head of ``N x d`` with ``block``."""
    import ioattn.gpu as g
    from .backend import get_backend
    from .emulator import counting_sites

    rng = np.random.default_rng(0)
    Q, K, V = (rng.standard_normal((N, d)).astype(np.float32) for _ in range(3))
    be = get_backend("emulator")
    be.take_accesses()
    with counting_sites():
        if not kernel.backward:
            return g.run(kernel.name, Q, K, V, block=block, dtype=dtype,
                         backend="emulator").accesses
        fwd = g.run("flash", Q, K, V, save_lse=True, backend="emulator")
        dO = rng.standard_normal((N, d)).astype(np.float32)
        from .api import to_storage

        module = importlib.import_module(f"ioattn.gpu.{kernel.module}")
        plan = _plan(kernel, N, d, dtype, be.shared_memory_per_block, block)
        x = [np.ascontiguousarray(a[None], np.float32) for a in (Q, K, V, fwd.output, dO)]
        extra = {}
        if kernel.module != "backward":          # Q, K, V, dO in the kernel's 16 bits
            x = [to_storage(a, dtype, np) if i != 3 else a for i, a in enumerate(x)]
            extra = {"dtype": dtype}
        grads = [np.full((1, N, d), np.nan, np.float32) for _ in range(3)]
        module.backward(be, plan, *x, np.ascontiguousarray(fwd.lse[None], np.float32), *grads,
                        np.zeros(2, np.uint64), scale=1 / np.sqrt(d), count_io=False, **extra)()
        return be.take_accesses()


def _per_site(rows) -> dict:
    out: dict = {}
    for c in rows:
        key = (c.kernel, c.line, c.space, c.code)
        out[key] = tuple(a + b for a, b in zip(out.get(key, (0,) * 5),
                                               (c.requests, c.wavefronts, c.sectors,
                                                c.accesses, c.bytes)))
    return out


def counts(label: str, N: int, d: int, *, heads: int = 1, dtype: str = "bfloat16",
           gpu: str = "H100", block=None, only: str | None = None) -> Counts:
    """The counts of kernel ``label`` for ``heads`` problems of ``N x d`` with the blocks it
    takes on ``gpu`` (or ``block``), scaled from the emulator at ``N = L`` and ``2 L`` (module
    docstring).

    With ``only``, the counts of that one kernel of the launch sequence (its site rows).

    Raises ``ValueError`` when ``N`` is not a multiple of ``L = lcm(B_r, B_c)``, or when the
    two counts do not fit ``a k + b k^2`` in integers (a kernel whose work is not uniform)."""
    kernel = _kernel(label)
    plan = _plan(kernel, N, d, dtype, _gpu(gpu).shared_per_block, block)
    block = (plan.B_r, plan.B_c)
    L = math.lcm(*block)
    if N % L:
        raise ValueError(f"N = {N} is not a multiple of lcm(B_r, B_c) = {L}: the scaled count "
                         "covers whole blocks only")
    k = N // L
    one, two = (_per_site(row for row in _emulate(kernel, m * L, d, dtype, tuple(block))
                          if only is None or row.kernel == only) for m in (1, 2))
    total = [0] * 5
    loop_wf = loop_min = 0
    for key in one.keys() | two.keys():
        c1, c2 = one.get(key, (0,) * 5), two.get(key, (0,) * 5)
        at_k = []
        for i, (x, y) in enumerate(zip(c1, c2)):
            if (y - 2 * x) % 2:
                raise ValueError(f"{label}: site {key[:3]} does not scale as a k + b k^2")
            b = (y - 2 * x) // 2
            a = x - b
            at_k.append(a * k + b * k * k)
            if i == 0:
                loop_requests = b
            if i == 1 and key[2] == "shared":
                loop_wf += b * k * k * heads
            if i == 4 and key[2] == "shared" and loop_requests:
                per = b // loop_requests if b % loop_requests == 0 else None
                if per is None:
                    raise ValueError(f"{label}: site {key[:3]}'s loop requests differ in size")
                least = max(1, -(-per // SHARED_BYTES_PER_CLOCK))
                loop_min += loop_requests * least * k * k * heads
        if key[2] == "tensor":
            total[3] += at_k[3]
        elif key[2] == "shared":
            total[1] += at_k[1]
        else:
            total[2] += at_k[2]
    return Counts(sectors=total[2] * heads, wavefronts=total[1] * heads, fma=total[3] * heads,
                  loop_wavefronts=loop_wf, loop_minimum=loop_min)


@dataclass(frozen=True)
class Prediction:
    """:func:`predict`'s answer: the time of each level (seconds, Fractions: ``"HBM"``,
    ``"L2"`` where the GPU has an L2 figure, ``"shared"``, ``"compute"``), the bound (the level of
    the largest), ``time`` (that largest), the flops of the matrix products, and what went in.
    ``hbm_only`` is the time of every counted sector at HBM; ``l2_resident`` says, per launch,
    whether the L2 assumption (module docstring) was applied."""

    label: str
    gpu: str
    N: int
    d: int
    heads: int
    dtype: str
    plan: object
    counts: Counts
    launches: tuple
    occupancy: tuple
    sms_used: int
    waves: int
    times: dict = field(default_factory=dict)

    @property
    def time(self) -> Fraction:
        return max(self.times.values())

    @property
    def bound(self) -> str:
        return max(self.times, key=self.times.get)

    @property
    def flops(self) -> int:
        from ..roofline import attention_flops

        return attention_flops(self.N, self.d, self.heads, backward=self.plan_backward)

    plan_backward: bool = False
    hbm_only: Fraction = Fraction(0)
    l2_resident: tuple = ()
    #: The index in ``launches`` of the launch with the most shared-memory wavefronts (whose
    #: occupancy, SMs and waves are reported).
    main: int = 0

    @property
    def tflops(self) -> float:
        """The matrix products' flops over the predicted time, in 10^12 per second."""
        return float(self.flops / self.time) / 1e12

    @property
    def pessimistic(self) -> Fraction:
        """The predicted time with every counted sector at HBM (no L2 reuse): the largest of
        :attr:`hbm_only`, the shared and the compute levels."""
        return max(self.hbm_only, self.times["shared"], self.times["compute"])


def predict(label: str, N: int, d: int, *, heads: int = 1, dtype: str = "bfloat16",
            gpu: str = "H100", block=None) -> Prediction:
    """The three-level prediction of kernel ``label`` (:data:`KERNELS`) on ``gpu`` for ``heads``
    problems of ``N x d`` in ``dtype`` (see the module docstring for what it leaves out).

    The float32 backward kernel runs in float32 whatever ``dtype`` says; on the T4, which has no
    bfloat16, pass ``dtype="float16"``. ``block`` replaces the plan's blocks (both must divide
    ``N``: see :func:`counts`)."""
    from ..roofline import attention_flops

    kernel, g = _kernel(label), _gpu(gpu)
    if dtype not in ("float32", "float16", "bfloat16"):
        raise ValueError(f"dtype must be float32, float16 or bfloat16, got {dtype!r}")
    if kernel.backward and kernel.module == "backward":
        dtype = "float32"
    if dtype not in g.peak:
        raise ValueError(f"the {gpu} has no {dtype} peak (use float16)")
    plan, runs = launches(label, N, d, heads=heads, dtype=dtype, gpu=gpu, block=block)
    c = counts(label, N, d, heads=heads, dtype=dtype, gpu=gpu, block=block)
    occ = tuple(occupancy(r, gpu) for r in runs)
    main = max(range(len(runs)), key=lambda i: counts(label, N, d, heads=heads, dtype=dtype,
                                                      gpu=gpu, block=block,
                                                      only=runs[i].kernel).wavefronts)
    clock = g.clock()
    l2 = g.l2_bandwidth()
    times = {"HBM": Fraction(0), **({"L2": Fraction(0)} if l2 else {}), "shared": Fraction(0),
             "compute": Fraction(0)}
    hbm_only, resident = Fraction(0), []
    for r, o in zip(runs, occ):          # launches run one after another: their times add
        part = counts(label, N, d, heads=heads, dtype=dtype, gpu=gpu, block=block, only=r.kernel)
        sms = min(g.sms, r.blocks)
        busy = Fraction(min(4, o.warps_per_sm if r.blocks >= g.sms else
                            -(-r.threads // 32)), 4)     # sub-partitions kept busy
        fits = bool(l2) and _l2_holds(kernel, r, o, g, heads)
        resident.append(fits)
        hbm = min(part.sectors, r.compulsory) if fits else part.sectors
        times["HBM"] += Fraction(32 * hbm, g.bandwidth)
        hbm_only += Fraction(32 * part.sectors, g.bandwidth)
        if l2:
            times["L2"] += Fraction(32 * part.sectors) / l2
        times["shared"] += Fraction(part.wavefronts) / (clock * sms)
        if part.fma:
            times["compute"] += Fraction(2 * part.fma) / (g.peak[dtype] * Fraction(sms, g.sms)
                                                          * busy)
        elif r is runs[main]:            # the float32 kernels: the closed form, in the main one
            flops = attention_flops(N, d, heads, backward=kernel.backward)
            times["compute"] += Fraction(flops) / (g.peak["float32"] * Fraction(sms, g.sms)
                                                   * busy)
    blocks = runs[main].blocks
    waves = -(-blocks // (g.sms * occ[main].blocks_per_sm))
    return Prediction(label, gpu, N, d, heads, dtype, plan, c, runs, occ, min(g.sms, blocks),
                      waves, times, plan_backward=kernel.backward, hbm_only=hbm_only,
                      l2_resident=tuple(resident), main=main)


def l2_span(launch: Launch, occ: Occupancy, gpu: str, heads: int) -> int:
    """The most heads one wave of ``launch``'s resident blocks spans on ``gpu``:
    ``min(heads, ceil(W / (blocks / heads)) + 1)`` with ``W = min(SMs, blocks) x blocks per SM``
    (blocks launched query block first, the L2 assumption of the module docstring)."""
    g = _gpu(gpu)
    if launch.blocks % heads:
        raise ValueError(f"{launch.blocks} blocks do not split into {heads} heads")
    wave = min(g.sms, launch.blocks) * occ.blocks_per_sm
    return min(heads, -(-wave // (launch.blocks // heads)) + 1)


def _l2_holds(kernel: Kernel, launch: Launch, occ: Occupancy, g, heads: int) -> bool:
    """Whether the re-read arrays (:attr:`Kernel.reread`) of the heads one wave of resident
    blocks spans (:func:`l2_span`) fit in ``g``'s L2 cache."""
    if not kernel.reread or launch.blocks % heads:
        return False
    reread = sum(launch.arrays[i] for i in kernel.reread) // heads
    return l2_span(launch, occ, g.name, heads) * reread <= g.l2
