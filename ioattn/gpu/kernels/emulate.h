// emulate.h: enough of CUDA C++ to run ioattn's kernels on a CPU, exactly and slowly.
//
// A kernel source compiled with g++ -DIOATTN_EMULATE -include this header becomes plain C++.
// A launch runs the grid one block at a time; each CUDA thread of the block is a fiber (a
// ucontext with its own stack) on one OS thread. A fiber runs until it reaches a barrier
// (__syncthreads, __syncwarp, a shuffle, a WMMA operation) or ends; the scheduler then runs the
// next one, and releases a barrier once every live thread of its scope (block or warp) waits at
// it. So the order of memory accesses between two barriers is one legal order of the real
// machine (thread 0's, then thread 1's, ... or the reverse), and:
//   * a __syncthreads that some thread of the block never reaches is reported as an error;
//   * a thread that reads what another thread of its warp wrote without a barrier in between
//     reads the old value when the writer runs later: such a race changes the result;
//   * dynamic shared memory starts as NaN bytes at every block, so reading an entry before it is
//     written shows up.
//   * shared memory and every array argument end at a guard page: an out-of-bounds access stops
//     the launch with an error naming the buffer (see Guarded below).
// What it cannot show: timing, occupancy, and the behaviour of races that happen to be harmless
// in the orders it tries. The race-check and counting builds also count, per instruction site, the
// shared-memory wavefronts (bank conflicts) and global sectors of every warp request (see
// "Warp-level access counts" below); WMMA loads and stores are counted as 16-byte row accesses
// (see count_tile), ldmatrix and cp.async as the hardware makes them.
//
// The counting build (-DIOATTN_RACECHECK with the runtime compiled -DIOATTN_COUNT_ONLY) is the
// race-check build without the race check: the same instrumentation, counts and bounds checks,
// none of the per-byte records below, so it raises no race and costs less.
//
// The race check (a build with -DIOATTN_RACECHECK, ioattn/gpu/emulator.py) finds those too: the
// kernel is compiled with g++ -fsanitize=thread, which calls __tsan_read4(p), __tsan_write8(p),
// ... before each load and store, but is linked without libtsan: the second half of this file,
// compiled as a separate, uninstrumented translation unit (-DIOATTN_RACE_RUNTIME), defines those
// functions. They record, for every byte of the block's shared memory, who read, wrote or
// atomically updated it since the last __syncthreads, and report two accesses of different
// threads, at least one a write and not both atomic, that no barrier orders (see there).
#pragma once

#ifndef IOATTN_RACE_RUNTIME

#include <math.h>
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __restrict__ __restrict
#define __shared__ static
#define __launch_bounds__(...)
#define __align__(n) alignas(n)

// The race check's events (defined by the race runtime below); nothing in a normal build.
#ifdef IOATTN_RACECHECK
extern "C" {
void ioattn_race_launch(const unsigned* block, void* shared, size_t bytes, const void* lo,
                        const void* hi);
int ioattn_race_out_of_bounds(char* out, size_t len);
void ioattn_race_global(const void* lo, size_t bytes, int arg);
void ioattn_race_flush();
void ioattn_race_warp_access(const void* p, size_t len);
void ioattn_race_block(unsigned x, unsigned y, unsigned z);
void ioattn_race_current(int thread);
void ioattn_race_syncthreads();
void ioattn_race_syncwarp(int warp);
void ioattn_race_exit(int thread);
void ioattn_race_mode(int mode);
int ioattn_race_count();
void ioattn_race_message(char* out, size_t len);
}
#define IOATTN_RACE(call) call
#else
#define IOATTN_RACE(call) ((void)0)
#endif

struct uint3 { unsigned x, y, z; };
struct dim3 {
    unsigned x = 1, y = 1, z = 1;
    dim3() = default;
    dim3(unsigned x_, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

namespace ioattn_emu {

enum class State { ready, block_wait, warp_wait, done };

struct Fiber {
    ucontext_t ctx;
    char* stack = nullptr;
    uint3 tid{0, 0, 0};
    int index = 0, lane = 0, warp = 0;
    State state = State::ready;
#ifdef IOATTN_RACECHECK
    bool join = false;                       // waits at a __syncwarp (not a shuffle or WMMA)
#endif
};

// Memory with 1 MiB of PROT_NONE guard pages on either side, the data placed at the end of its pages so
// that its last byte abuts the guard after it: an access past the end (or far enough before the
// start) faults, and the fault handler of a launch (below) turns that into an error naming the
// buffer. `align` is the data's alignment; the < align bytes between the data's end and the
// guard ("slack") are checked otherwise (shared memory: a canary; the race check: every access).
struct Guarded {
    unsigned char* map = nullptr;
    size_t map_len = 0, page = 0;
    unsigned char* data = nullptr;
    size_t bytes = 0;
    std::string name;                        // "shared memory", "argument 3"

    static constexpr size_t guard = size_t(1) << 20;   // PROT_NONE bytes on either side

    bool allocate(size_t n, size_t align, std::string what) {
        page = guard;                        // a multiple of the page size
        const size_t sys = size_t(sysconf(_SC_PAGESIZE));
        const size_t body = (n + align + sys - 1) / sys * sys;
        map_len = body + 2 * page;
        void* m = mmap(nullptr, map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                       -1, 0);
        if (m == MAP_FAILED) { map = nullptr; return false; }
        map = static_cast<unsigned char*>(m);
        mprotect(map, page, PROT_NONE);
        mprotect(map + page + body, page, PROT_NONE);
        const uintptr_t end = uintptr_t(map + page + body);
        data = reinterpret_cast<unsigned char*>((end - n) & ~uintptr_t(align - 1));
        bytes = n;
        name = std::move(what);
        return true;
    }
    void release() {
        if (map) munmap(map, map_len);
        map = data = nullptr;
    }
    unsigned char* end() const { return map + map_len - page; }
    size_t slack() const { return size_t(end() - data) - bytes; }
    // Does `p` lie in a guard page of this buffer? (its offset from data in `off`)
    bool guards(const void* p, long long& off) const {
        const unsigned char* q = static_cast<const unsigned char*>(p);
        if (!map || !((q >= map && q < map + page) || (q >= end() && q < map + map_len)))
            return false;
        off = (long long)(q - data);
        return true;
    }
};

struct Runtime {
    uint3 block_idx{0, 0, 0};
    dim3 block_dim, grid_dim;
    std::vector<Fiber> fibers;
    Fiber* cur = nullptr;
    ucontext_t scheduler;
    unsigned char* shared = nullptr;         // the block's dynamic shared memory (a Guarded)
    size_t shared_bytes = 0;
    std::vector<uint64_t> exchange;          // one slot per thread, for shuffles
    std::function<void()> body;
    std::string error;
    bool reverse = false;                    // run the fibers of a block in reverse order
    static constexpr size_t stack_size = 256 * 1024;
    std::vector<char*> stacks;               // reused by every launch
    Guarded shared_mem;                      // the launch's shared memory
    std::vector<unsigned __int128> rows;     // ldmatrix: each lane's row
    std::vector<std::array<uint32_t, 12>> frags;   // mma: each lane's A, B, C registers
    std::vector<Guarded> globals;            // the launch's array arguments (emulator.py)
    // Tensor-core instructions, one per warp (counted by its lane 0): mma.sync m16n8k16,
    // m16n8k8, wmma::mma_sync, and the multiply-adds of the wmma ones (m n k each).
    uint64_t mma[4] = {0, 0, 0, 0};

    ~Runtime() { for (char* s : stacks) delete[] s; }
};

inline Runtime& rt() { static Runtime r; return r; }
inline void reset_copies(size_t threads);   // cp.async's queues (below)
inline unsigned char* dynamic_shared() { return rt().shared; }

// Leave the current fiber in `state` and return to the scheduler.
inline void yield(State state) {
    Runtime& r = rt();
    Fiber* f = r.cur;
    f->state = state;
    swapcontext(&f->ctx, &r.scheduler);
}

// A warp barrier: `join` for __syncwarp, which orders memory; shuffles and WMMA operations
// only wait for the warp (see the race runtime below).
inline void warp_barrier(bool join = false) {
#ifdef IOATTN_RACECHECK
    rt().cur->join = join;
#else
    (void)join;
#endif
    yield(State::warp_wait);
}

inline void entry() {
    Runtime& r = rt();
    r.body();
    IOATTN_RACE(ioattn_race_exit(r.cur->index));
    yield(State::done);
}

inline void fail(const std::string& what) {
    Runtime& r = rt();
    if (r.error.empty()) {
        char where[96];
        std::snprintf(where, sizeof where, " (block %u,%u,%u)", r.block_idx.x, r.block_idx.y,
                      r.block_idx.z);
        r.error = what + where;
    }
}

// Stop the block at once with an error: the running thread returns to the scheduler for good
// (run_block sees the error and abandons the block; the next launch starts every fiber afresh).
[[noreturn]] inline void abort_block(const std::string& what) {
    Runtime& r = rt();
    fail(what);
    Fiber* f = r.cur;
    f->state = State::done;
    swapcontext(&f->ctx, &r.scheduler);
    std::abort();                            // never resumed
}

// A launch's SIGSEGV handler: a fault in a guard page of the launch's shared memory or of one of
// its array arguments stops the block with an error naming the buffer and the byte offset; any
// other fault goes to the handler that was there before (the process's own behaviour).
inline struct sigaction& previous_segv() { static struct sigaction a; return a; }

inline void on_segv(int sig, siginfo_t* info, void* uctx) {
    Runtime& r = rt();
    long long off = 0;
    const Guarded* hit = nullptr;
    if (r.shared_mem.guards(info->si_addr, off)) hit = &r.shared_mem;
    for (const Guarded& g : r.globals)
        if (!hit && g.guards(info->si_addr, off)) hit = &g;
    if (hit && r.cur) {
        char what[200];
        std::snprintf(what, sizeof what, "out-of-bounds access to %s: byte %lld of a %zu-byte "
                      "buffer, by thread (%u,%u,%u)", hit->name.c_str(), off, hit->bytes,
                      r.cur->tid.x, r.cur->tid.y, r.cur->tid.z);
        abort_block(what);
    }
    sigaction(SIGSEGV, &previous_segv(), nullptr);   // not ours: fault again, as before
    (void)sig; (void)uctx;
}

// The bytes between the end of shared memory and its guard page hold 0xFF at the start of a
// block; a byte changed at its end is a write past the end of shared memory.
inline bool slack_intact() {
    Runtime& r = rt();
    for (size_t i = 0; i < r.shared_mem.slack(); ++i)
        if (r.shared[r.shared_bytes + i] != 0xFF) {
            fail("out-of-bounds access to shared memory: byte " +
                 std::to_string(r.shared_bytes + i) + " of a " +
                 std::to_string(r.shared_bytes) + "-byte buffer was written");
            return false;
        }
    return true;
}

// Run one block to completion; false (with r.error set) on a barrier that cannot complete.
inline bool run_block() {
    Runtime& r = rt();
    const int n = int(r.fibers.size());
    std::memset(r.shared, 0xFF, r.shared_bytes + r.shared_mem.slack());
    reset_copies(size_t(n));                 // cp.async: no copy pending
    IOATTN_RACE(ioattn_race_block(r.block_idx.x, r.block_idx.y, r.block_idx.z));
    for (Fiber& f : r.fibers) {
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = f.stack;
        f.ctx.uc_stack.ss_size = Runtime::stack_size;
        f.ctx.uc_link = nullptr;
        makecontext(&f.ctx, entry, 0);
        f.state = State::ready;
    }
    const int warps = (n + 31) / 32;
    for (;;) {
        for (int k = 0; k < n; ++k) {
            Fiber& f = r.fibers[r.reverse ? n - 1 - k : k];
            if (f.state != State::ready) continue;
            r.cur = &f;
            IOATTN_RACE(ioattn_race_current(f.index));
            swapcontext(&r.scheduler, &f.ctx);
            IOATTN_RACE(ioattn_race_current(-1));
            r.cur = nullptr;
            if (!r.error.empty()) return false;          // abort_block
        }
        int live = 0, at_block = 0, done = 0;
        for (Fiber& f : r.fibers) {
            if (f.state == State::done) ++done; else ++live;
            if (f.state == State::block_wait) ++at_block;
        }
        if (live == 0) return slack_intact();
        if (at_block == live) {
            if (done > 0) {
                fail("__syncthreads() was not reached by every thread: " + std::to_string(done) +
                     " thread(s) had returned");
                return false;
            }
            IOATTN_RACE(ioattn_race_syncthreads());
            for (Fiber& f : r.fibers) f.state = State::ready;
            continue;
        }
        bool released = false;
        for (int w = 0; w < warps; ++w) {
            int lo = 32 * w, hi = std::min(n, lo + 32), waiting = 0, alive = 0;
            for (int i = lo; i < hi; ++i) {
                if (r.fibers[i].state != State::done) ++alive;
                if (r.fibers[i].state == State::warp_wait) ++waiting;
            }
            if (alive > 0 && waiting == alive) {
#ifdef IOATTN_RACECHECK
                bool join = true;         // a __syncwarp only if every waiting lane is at one
                for (int i = lo; i < hi; ++i)
                    if (r.fibers[i].state == State::warp_wait) join = join && r.fibers[i].join;
                if (join) ioattn_race_syncwarp(w);
#endif
                for (int i = lo; i < hi; ++i)
                    if (r.fibers[i].state == State::warp_wait) r.fibers[i].state = State::ready;
                released = true;
            }
        }
        if (!released) {
            fail("deadlock: threads wait at different barriers (a __syncthreads, __syncwarp, "
                 "shuffle or WMMA call inside divergent code)");
            return false;
        }
    }
}

inline int run_grid(const unsigned* grid, const unsigned* block, size_t shared_bytes,
                    std::function<void()> body, char* err, size_t errlen) {
    Runtime& r = rt();
    r.error.clear();
    r.grid_dim = dim3(grid[0], grid[1], grid[2]);
    r.block_dim = dim3(block[0], block[1], block[2]);
    const size_t n = size_t(block[0]) * block[1] * block[2];
    if (n == 0 || n > 1024) {
        std::snprintf(err, errlen, "a block must have 1 to 1024 threads, got %zu", n);
        return 1;
    }
    while (r.stacks.size() < n) r.stacks.push_back(new char[Runtime::stack_size]);
    r.fibers.assign(n, Fiber{});
    r.exchange.assign(n, 0);
    for (size_t i = 0; i < n; ++i) {
        Fiber& f = r.fibers[i];
        f.stack = r.stacks[i];
        f.index = int(i);
        f.lane = int(i % 32);
        f.warp = int(i / 32);
        f.tid = uint3{unsigned(i % block[0]), unsigned((i / block[0]) % block[1]),
                      unsigned(i / (size_t(block[0]) * block[1]))};
    }
    // Shared memory starts 16-byte aligned (relative offsets are what WMMA's checks look at)
    // and ends at a guard page.
    r.shared_mem.release();
    if (!r.shared_mem.allocate(shared_bytes, 16, "shared memory")) {
        std::snprintf(err, errlen, "cannot map %zu bytes of shared memory", shared_bytes);
        return 1;
    }
    r.shared = r.shared_mem.data;
    r.shared_bytes = shared_bytes;
    IOATTN_RACE(ioattn_race_launch(block, r.shared, shared_bytes, r.shared_mem.map,
                                   r.shared_mem.map + r.shared_mem.map_len));
    r.body = std::move(body);
    struct sigaction mine {};
    mine.sa_sigaction = on_segv;
    mine.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&mine.sa_mask);
    sigaction(SIGSEGV, &mine, &previous_segv());
    int rc = 0;
    for (unsigned z = 0; z < grid[2] && rc == 0; ++z)
        for (unsigned y = 0; y < grid[1] && rc == 0; ++y)
            for (unsigned x = 0; x < grid[0] && rc == 0; ++x) {
                r.block_idx = uint3{x, y, z};
#ifdef IOATTN_RACECHECK
                const bool ok = run_block();
                ioattn_race_flush();                     // the block's last warp accesses
                if (ioattn_race_out_of_bounds(err, errlen)) {   // the exact check comes first
                    rc = 3;
                    break;
                }
#else
                const bool ok = run_block();
#endif
                if (!ok) {
                    std::snprintf(err, errlen, "%s", r.error.c_str());
                    rc = r.error.rfind("out-of-bounds", 0) == 0 ? 3 : 1;
                    break;
                }
#ifdef IOATTN_RACECHECK
                if (ioattn_race_count() > 0) {          // 2: a race (SharedMemoryRace)
                    ioattn_race_message(err, errlen);
                    rc = 2;
                }
#endif
            }
    sigaction(SIGSEGV, &previous_segv(), nullptr);
    return rc;
}

template <class F, class... A, size_t... I>
void call(F* kernel, void** args, std::index_sequence<I...>) {
    kernel(*static_cast<std::remove_cv_t<A>*>(args[I])...);
}

template <class... A>
int launch(void (*kernel)(A...), const char* name, const unsigned* grid, const unsigned* block,
           size_t shared_bytes, void** args, const size_t* sizes, int nargs, char* err,
           size_t errlen) {
    constexpr size_t want[] = {sizeof(A)..., 0};
    if (nargs != int(sizeof...(A))) {
        std::snprintf(err, errlen, "%s takes %zu arguments, got %d", name, sizeof...(A), nargs);
        return 1;
    }
    for (int i = 0; i < nargs; ++i)
        if (sizes[i] != want[i]) {
            std::snprintf(err, errlen, "%s: argument %d has %zu bytes, the kernel takes %zu",
                          name, i, sizes[i], want[i]);
            return 1;
        }
    void (*k)(A...) = kernel;
    return run_grid(grid, block, shared_bytes,
                    [k, args] { call<void(A...), A...>(k, args, std::index_sequence_for<A...>{}); },
                    err, errlen);
}

inline Fiber& me() { return *rt().cur; }

template <class T>
T shuffle(T v, int src_lane) {
    static_assert(sizeof(T) <= 8, "shuffles move at most 8 bytes");
    Runtime& r = rt();
    Fiber& f = me();
    uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof(T));
    r.exchange[f.index] = bits;
    warp_barrier();                                   // every lane has put its value
    int src = 32 * f.warp + src_lane;
    T out = v;
    if (src_lane >= 0 && src_lane < 32 && src < int(r.fibers.size()))
        std::memcpy(&out, &r.exchange[src], sizeof(T));
    warp_barrier();                                   // every lane has taken its value
    return out;
}

}  // namespace ioattn_emu

#define threadIdx (ioattn_emu::me().tid)
#define blockIdx (ioattn_emu::rt().block_idx)
#define blockDim (ioattn_emu::rt().block_dim)
#define gridDim (ioattn_emu::rt().grid_dim)
#define warpSize 32

inline void __syncthreads() { ioattn_emu::yield(ioattn_emu::State::block_wait); }
inline void __syncwarp(unsigned = 0xffffffffu) { ioattn_emu::warp_barrier(true); }

template <class T>
T __shfl_sync(unsigned, T v, int src, int width = 32) {
    int lane = ioattn_emu::me().lane;
    return ioattn_emu::shuffle(v, (lane / width) * width + (src % width));
}
template <class T>
T __shfl_xor_sync(unsigned, T v, int mask, int width = 32) {
    int lane = ioattn_emu::me().lane, src = lane ^ mask;
    return ioattn_emu::shuffle(v, src / width == lane / width ? src : lane);
}
template <class T>
T __shfl_down_sync(unsigned, T v, unsigned delta, int width = 32) {
    int lane = ioattn_emu::me().lane, src = lane + int(delta);
    return ioattn_emu::shuffle(v, src / width == lane / width ? src : lane);
}
template <class T>
T __shfl_up_sync(unsigned, T v, unsigned delta, int width = 32) {
    int lane = ioattn_emu::me().lane, src = lane - int(delta);
    return ioattn_emu::shuffle(v, src >= 0 && src / width == lane / width ? src : lane);
}

// One OS thread runs every fiber, so atomics are plain read-modify-writes (which the race check
// records as atomic: they do not race with each other).
template <class T> T atomicAdd(T* p, T v) {
    IOATTN_RACE(ioattn_race_mode(1));
    T old = *p;
    *p = old + v;
    IOATTN_RACE(ioattn_race_mode(0));
    return old;
}
inline int atomicMax(int* p, int v) {
    IOATTN_RACE(ioattn_race_mode(1));
    int old = *p;
    *p = std::max(old, v);
    IOATTN_RACE(ioattn_race_mode(0));
    return old;
}

inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
inline int __float_as_int(float f) { int i; std::memcpy(&i, &f, 4); return i; }
inline unsigned __float_as_uint(float f) { unsigned i; std::memcpy(&i, &f, 4); return i; }
inline float __uint_as_float(unsigned i) { float f; std::memcpy(&f, &i, 4); return f; }
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __saturatef(float x) { return std::min(1.0f, std::max(0.0f, x)); }

inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline float min(float a, float b) { return std::fmin(a, b); }
inline float max(float a, float b) { return std::fmax(a, b); }

// 16-bit floating point: float16 through the compiler's _Float16 (correctly rounded), bfloat16
// as the upper half of a float, rounded to nearest even.
struct __half {
    unsigned short x;
    __half() = default;
    __half(float f) { _Float16 h = static_cast<_Float16>(f); std::memcpy(&x, &h, 2); }
    operator float() const { _Float16 h; std::memcpy(&h, &x, 2); return static_cast<float>(h); }
};
struct __nv_bfloat16 {
    unsigned short x;
    __nv_bfloat16() = default;
    __nv_bfloat16(float f) {
        uint32_t b = __float_as_uint(f);
        if ((b & 0x7fffffffu) > 0x7f800000u) { x = (unsigned short)((b >> 16) | 0x40); return; }
        b += 0x7fffu + ((b >> 16) & 1u);
        x = (unsigned short)(b >> 16);
    }
    operator float() const { return __uint_as_float(uint32_t(x) << 16); }
};
using half = __half;
inline __half __float2half(float f) { return __half(f); }
inline __half __float2half_rn(float f) { return __half(f); }
inline float __half2float(__half h) { return float(h); }
inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
inline float __bfloat162float(__nv_bfloat16 h) { return float(h); }

// WMMA: every lane holds the whole tile of its fragment, and the *_sync operations are warp
// barriers on entry and exit, as on the hardware (all lanes take part in each of them). The race
// check records their loads and stores as the warp's, not one lane's (mode 2): which lane moves
// which entry is unspecified.
namespace nvcuda {
namespace wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

// The CUDA C++ Programming Guide (Warp Matrix Functions, load_matrix_sync): "mptr must be a
// 256-bit aligned pointer pointing to the first element of the matrix in memory. ldm describes
// the stride in elements between consecutive rows (for row major layout) or columns (for column
// major layout) and must be a multiple of 8 for __half element type or multiple of 4 for float
// element type. (i.e., multiple of 16 bytes in both cases)"; the same for store_matrix_sync.
// A pointer into shared memory is checked by its offset from the start of dynamic shared
// memory (which a kernel declares __align__(32) or more).
template <class T>
void check_operand(const T* p, unsigned ldm, const char* op) {
    ioattn_emu::Runtime& r = ioattn_emu::rt();
    const unsigned char* q = reinterpret_cast<const unsigned char*>(p);
    const bool shared = q >= r.shared && q <= r.shared + r.shared_bytes;
    const uintptr_t at = shared ? uintptr_t(q - r.shared) : uintptr_t(q);
    char what[200];
    if (at % 32) {
        std::snprintf(what, sizeof what, "wmma::%s: the pointer (%s %zu) is not 256-bit "
                      "(32-byte) aligned", op, shared ? "shared-memory byte" : "address",
                      size_t(at));
        ioattn_emu::abort_block(what);
    }
    if (ldm * sizeof(T) % 16) {
        std::snprintf(what, sizeof what, "wmma::%s: ldm = %u elements of %zu bytes is not a "
                      "multiple of 16 bytes", op, ldm, sizeof(T));
        ioattn_emu::abort_block(what);
    }
}

// The race check's counts of a WMMA load or store of a tile of `rows` memory rows of `cols`
// entries of `size` bytes, `ldm` entries apart. Which lane moves which entry of a WMMA fragment
// is unspecified (the Programming Guide: "the mapping of matrix elements into fragment
// internal storage is unspecified"), so the counts model it as ldmatrix-like 16-byte row
// accesses: the tile's 16-byte pieces, in order of rows within a 16-byte column, 32 to a warp
// request, each lane one piece; so the 8 rows of one 16-byte column are one phase (8 lanes of
// 16 bytes), as ldmatrix's rows are. A lane's pieces are counted, not read: the fragment's
// entries are moved as the warp's (mode 2) for the race check.
template <class T>
__attribute__((always_inline)) inline void count_tile(const T* p, int rows, int cols,
                                                      unsigned ldm) {
#ifdef IOATTN_RACECHECK
    const int chunks = int(cols * sizeof(T) / 16), lane = ioattn_emu::me().lane;
    for (int s = lane; s < rows * chunks; s += 32) {
        const int row = s % rows, chunk = s / rows;
        ioattn_race_warp_access(reinterpret_cast<const unsigned char*>(p + size_t(row) * ldm) +
                                    16 * chunk, 16);
    }
#else
    (void)p; (void)rows; (void)cols; (void)ldm;
#endif
}

template <class Use, int m, int n, int k> struct extent;
template <int m, int n, int k> struct extent<matrix_a, m, n, k> { static constexpr int R = m, C = k; };
template <int m, int n, int k> struct extent<matrix_b, m, n, k> { static constexpr int R = k, C = n; };
template <int m, int n, int k> struct extent<accumulator, m, n, k> { static constexpr int R = m, C = n; };

template <class Use, int m, int n, int k, class T, class Layout = void>
struct fragment {
    static constexpr int rows = extent<Use, m, n, k>::R, cols = extent<Use, m, n, k>::C;
    static constexpr int num_elements = rows * cols;
    T x[num_elements];
};

template <class Use, int m, int n, int k, class T, class L>
void fill_fragment(fragment<Use, m, n, k, T, L>& f, const std::type_identity_t<T>& v) {
    for (int i = 0; i < f.num_elements; ++i) f.x[i] = v;
}

template <class Use, int m, int n, int k, class T, class L>
__attribute__((always_inline)) inline void load_matrix_sync(fragment<Use, m, n, k, T, L>& f,
                                                            const std::type_identity_t<T>* p,
                                                            unsigned ldm) {
    static_assert(!std::is_same<Use, accumulator>::value, "accumulators take a layout_t");
    check_operand(p, ldm, "load_matrix_sync");
    ioattn_emu::warp_barrier();
    constexpr bool row = std::is_same<L, row_major>::value;
    count_tile(p, row ? f.rows : f.cols, row ? f.cols : f.rows, ldm);
    IOATTN_RACE(ioattn_race_mode(2));
    for (int r = 0; r < f.rows; ++r)
        for (int c = 0; c < f.cols; ++c)
            f.x[r * f.cols + c] = row ? p[size_t(r) * ldm + c] : p[size_t(c) * ldm + r];
    IOATTN_RACE(ioattn_race_mode(0));
    ioattn_emu::warp_barrier();
}

template <int m, int n, int k, class T>
__attribute__((always_inline)) inline void load_matrix_sync(
    fragment<accumulator, m, n, k, T, void>& f, const std::type_identity_t<T>* p, unsigned ldm,
    layout_t layout) {
    check_operand(p, ldm, "load_matrix_sync");
    ioattn_emu::warp_barrier();
    const bool row = layout == mem_row_major;
    count_tile(p, row ? f.rows : f.cols, row ? f.cols : f.rows, ldm);
    IOATTN_RACE(ioattn_race_mode(2));
    for (int r = 0; r < f.rows; ++r)
        for (int c = 0; c < f.cols; ++c)
            f.x[r * f.cols + c] = layout == mem_row_major ? p[size_t(r) * ldm + c]
                                                          : p[size_t(c) * ldm + r];
    IOATTN_RACE(ioattn_race_mode(0));
    ioattn_emu::warp_barrier();
}

template <int m, int n, int k, class T>
__attribute__((always_inline)) inline void store_matrix_sync(
    T* p, const fragment<accumulator, m, n, k, T, void>& f, unsigned ldm, layout_t layout) {
    check_operand(p, ldm, "store_matrix_sync");
    ioattn_emu::warp_barrier();
    const bool row = layout == mem_row_major;
    count_tile(p, row ? f.rows : f.cols, row ? f.cols : f.rows, ldm);
    IOATTN_RACE(ioattn_race_mode(2));
    if (ioattn_emu::me().lane == 0)
        for (int r = 0; r < f.rows; ++r)
            for (int c = 0; c < f.cols; ++c)
                (layout == mem_row_major ? p[size_t(r) * ldm + c] : p[size_t(c) * ldm + r]) =
                    f.x[r * f.cols + c];
    IOATTN_RACE(ioattn_race_mode(0));
    ioattn_emu::warp_barrier();
}

template <int m, int n, int k, class TA, class LA, class TB, class LB, class TC>
void mma_sync(fragment<accumulator, m, n, k, TC, void>& d,
              const fragment<matrix_a, m, n, k, TA, LA>& a,
              const fragment<matrix_b, m, n, k, TB, LB>& b,
              const fragment<accumulator, m, n, k, TC, void>& c) {
    ioattn_emu::warp_barrier();
    if (ioattn_emu::me().lane == 0) {
        ioattn_emu::rt().mma[2] += 1;
        ioattn_emu::rt().mma[3] += uint64_t(m) * n * k;
    }
    TC out[m * n];
    for (int r = 0; r < m; ++r)
        for (int col = 0; col < n; ++col) {
            float s = float(c.x[r * n + col]);
            for (int i = 0; i < k; ++i) s += float(a.x[r * k + i]) * float(b.x[i * n + col]);
            out[r * n + col] = TC(s);
        }
    for (int i = 0; i < m * n; ++i) d.x[i] = out[i];
    ioattn_emu::warp_barrier();
}
}  // namespace wmma
}  // namespace nvcuda

// The warp-level instructions of kernels/mma.cuh (ldmatrix, mma.sync, cp.async), with the
// per-lane registers the PTX ISA's fragment tables give (mma.cuh lists them). ldmatrix and mma
// are warp barriers on entry and exit, as the .sync.aligned instructions are: every lane of the
// warp takes part. ldmatrix: lane 8i + j (j < 8) reads row j of matrix i, its 16 bytes at its
// own row address, as one 16-byte access, so that the race check counts it as the hardware
// serves it: the 8 rows of one matrix are one phase (the quarter-warp rule of 16-byte accesses,
// "Warp-level access counts" below), taking as many wavefronts as the most distinct 4-byte
// words of those 128 bytes in one bank (1 for 8 rows in distinct banks, 8 for rows 128 bytes
// apart); the lanes then exchange the rows, each taking its fragment.
// cp.async: the copy reads its source when issued (one legal order) and is held in the
// thread's queue; commit_group closes the open copies into a group; wait_group N completes all
// but the N most recent groups, wait_all every copy; only then are the bytes written. A read of
// the destination before the wait sees what was there before (the emulator's NaN fill), as it
// may on the hardware. The race check records the copy's shared-memory write at its issue
// (with its site), since the hardware may write it any time until the wait.
namespace ioattn_emu {

// An error of instruction `op` at shared-memory pointer `p` ("out-of-bounds ..." first: an
// OutOfBounds error in Python).
[[noreturn]] inline void fail_warp_op(const char* op, const char* what, const void* p) {
    char msg[240];
    Runtime& r = rt();
    const bool oob = std::strncmp(what, "out-of-bounds", 13) == 0;
    std::snprintf(msg, sizeof msg, "%s%s%s (shared-memory byte %lld), by thread (%u,%u,%u)",
                  oob ? what : op, oob ? " by " : ": ", oob ? op : what,
                  (long long)(static_cast<const unsigned char*>(p) - r.shared), r.cur->tid.x,
                  r.cur->tid.y, r.cur->tid.z);
    abort_block(msg);
}

// Is [p, p + n) inside the block's dynamic shared memory?
inline bool in_shared(const void* p, size_t n) {
    Runtime& r = rt();
    const unsigned char* q = static_cast<const unsigned char*>(p);
    return q >= r.shared && q + n <= r.shared + r.shared_bytes;
}

// The bytes of an earlier write, read and written without the race check's instrumentation.
__attribute__((noinline, no_sanitize_thread)) inline void raw_copy(void* dst, const void* src,
                                                                   size_t n) {
    auto* d = static_cast<unsigned char*>(dst);
    auto* s = static_cast<const unsigned char*>(src);
    for (size_t i = 0; i < n; ++i) d[i] = s[i];
}

// The .sync.aligned instructions need every lane of the warp to execute them.
inline void check_full_warp(const char* op) {
    Runtime& r = rt();
    const int w = me().warp;
    bool full = 32 * (w + 1) <= int(r.fibers.size());
    for (int i = 32 * w; full && i < 32 * (w + 1); ++i) full = r.fibers[i].state != State::done;
    if (!full) {
        char msg[160];
        std::snprintf(msg, sizeof msg, "%s: warp %d does not have 32 live lanes (a block of %zu "
                      "threads, or lanes that have returned): every lane must execute it", op, w,
                      r.fibers.size());
        abort_block(msg);
    }
}

struct Pending { unsigned char* dst; unsigned char bytes[16]; int n; };

inline std::vector<std::vector<Pending>>& open_copies() {
    static std::vector<std::vector<Pending>> q;
    return q;
}
inline std::vector<std::vector<std::vector<Pending>>>& copy_groups() {
    static std::vector<std::vector<std::vector<Pending>>> q;
    return q;
}
inline void reset_copies(size_t threads) {
    open_copies().assign(threads, {});
    copy_groups().assign(threads, {});
}

inline uint16_t half_of(uint32_t reg, int hi) { return uint16_t(hi ? reg >> 16 : reg & 0xFFFF); }
inline float to_float(uint16_t bits, bool bf16) {
    if (bf16) return __uint_as_float(uint32_t(bits) << 16);
    __half h;
    h.x = bits;
    return float(h);
}

}  // namespace ioattn_emu

template <int num, bool trans = false>
__attribute__((always_inline)) inline void ldmatrix(unsigned (&reg)[num], const void* row) {
    static_assert(num == 1 || num == 2 || num == 4, "ldmatrix loads 1, 2 or 4 matrices");
    using namespace ioattn_emu;
    Runtime& r = rt();
    Fiber& f = me();
    const char* op = trans ? "ldmatrix.trans" : "ldmatrix";
    if (r.rows.size() < r.fibers.size()) r.rows.resize(r.fibers.size());
    warp_barrier();
    check_full_warp(op);
    if (f.lane < 8 * num) {
        if (!in_shared(row, 16))
            fail_warp_op(op, "out-of-bounds access to shared memory: a row address outside it",
                         row);
        if (uintptr_t(static_cast<const unsigned char*>(row) - r.shared) % 16)
            fail_warp_op(op, "a row address not 16-byte aligned", row);
        const unsigned __int128 v = *static_cast<const unsigned __int128*>(row);
        r.rows[f.index] = v;                 // this lane's row, for the others
    }
    warp_barrier();
    const int g = f.lane >> 2, t = f.lane & 3, w = 32 * f.warp;
    for (int i = 0; i < num; ++i) {
        uint16_t e[2];
        for (int j = 0; j < 2; ++j) {
            // not transposed: row g, element 2t + j; transposed: row 2t + j, element g
            const int row_lane = w + 8 * i + (trans ? 2 * t + j : g);
            const int col = trans ? g : 2 * t + j;
            const unsigned __int128 v = r.rows[row_lane];
            e[j] = uint16_t(v >> (16 * col));
        }
        reg[i] = uint32_t(e[0]) | uint32_t(e[1]) << 16;
    }
    warp_barrier();
}

namespace ioattn_emu {

// D (16 x 8) = A (16 x k) B (k x 8) + C, k = 8 or 16, from every lane's fragments (the tables
// of mma.cuh); the products and sums in float32, in the order of k (the hardware's order of
// summation is unspecified).
template <int k>
void mma_model(float (&d)[4], const unsigned* a, const unsigned* b, const float (&c)[4],
               bool bf16) {
    constexpr int na = k / 4, nb = k / 8;    // registers per lane: A, B
    Runtime& r = rt();
    Fiber& f = me();
    if (r.frags.size() < r.fibers.size()) r.frags.resize(r.fibers.size());
    warp_barrier();
    check_full_warp("mma.sync");
    if (f.lane == 0) r.mma[k == 16 ? 0 : 1] += 1;
    std::array<uint32_t, 12>& mine = r.frags[f.index];
    for (int i = 0; i < na; ++i) mine[i] = a[i];
    for (int i = 0; i < nb; ++i) mine[4 + i] = b[i];
    for (int i = 0; i < 4; ++i) mine[6 + i] = __float_as_uint(c[i]);
    warp_barrier();
    float A[16][16], B[16][8], C[16][8];
    for (int lane = 0; lane < 32; ++lane) {
        const std::array<uint32_t, 12>& x = r.frags[32 * f.warp + lane];
        const int g = lane >> 2, t = lane & 3;
        for (int i = 0; i < na; ++i)             // a[i]: rows g (+8 if i odd), cols 2t (+8 if i >= 2)
            for (int j = 0; j < 2; ++j)
                A[g + 8 * (i & 1)][2 * t + j + 8 * (i >> 1)] = to_float(half_of(x[i], j), bf16);
        for (int i = 0; i < nb; ++i)             // b[i]: rows 2t + j (+8 if i = 1), col g
            for (int j = 0; j < 2; ++j)
                B[2 * t + j + 8 * i][g] = to_float(half_of(x[4 + i], j), bf16);
        for (int i = 0; i < 4; ++i)              // c[i]: row g (+8 if i >= 2), col 2t + (i & 1)
            C[g + 8 * (i >> 1)][2 * t + (i & 1)] = __uint_as_float(x[6 + i]);
    }
    const int g = f.lane >> 2, t = f.lane & 3;
    float out[4];
    for (int i = 0; i < 4; ++i) {
        const int row = g + 8 * (i >> 1), col = 2 * t + (i & 1);
        float s = C[row][col];
        for (int q = 0; q < k; ++q) s += A[row][q] * B[q][col];
        out[i] = s;
    }
    warp_barrier();                          // every lane has read the others' fragments
    for (int i = 0; i < 4; ++i) d[i] = out[i];
}

}  // namespace ioattn_emu

inline void mma_m16n8k8(float (&d)[4], const unsigned (&a)[2], const unsigned (&b)[1],
                        const float (&c)[4]) {
    ioattn_emu::mma_model<8>(d, a, b, c, false);
}

template <typename T>
void mma_m16n8k16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2],
                  const float (&c)[4]) {
    static_assert(std::is_same<T, __half>::value || std::is_same<T, __nv_bfloat16>::value,
                  "mma.m16n8k16 takes __half or __nv_bfloat16 inputs");
    ioattn_emu::mma_model<16>(d, a, b, c, std::is_same<T, __nv_bfloat16>::value);
}

template <int bytes, bool cg = false>
__attribute__((always_inline)) inline void cp_async(void* dst, const void* src) {
    static_assert(bytes == 4 || bytes == 8 || bytes == 16, "cp.async copies 4, 8 or 16 bytes");
    static_assert(!cg || bytes == 16, "cp.async.cg copies 16 bytes");
    using namespace ioattn_emu;
    Runtime& r = rt();
    const char* op = cg ? "cp.async.cg" : "cp.async.ca";
    if (!in_shared(dst, bytes))
        fail_warp_op(op, "out-of-bounds access to shared memory: a destination outside it", dst);
    if (uintptr_t(static_cast<unsigned char*>(dst) - r.shared) % bytes)
        fail_warp_op(op, "a destination not aligned to the copy's size", dst);
    if (uintptr_t(src) % bytes) fail_warp_op(op, "a source not aligned to the copy's size", dst);
    using W = std::conditional_t<bytes == 4, uint32_t,
                                 std::conditional_t<bytes == 8, uint64_t, unsigned __int128>>;
    Pending p{static_cast<unsigned char*>(dst), {0}, bytes};
    const W v = *static_cast<const W*>(src);               // the global read (its sectors)
    std::memcpy(p.bytes, &v, bytes);
    W old;
    raw_copy(&old, dst, bytes);
    *static_cast<W*>(dst) = old;                           // the shared write, as the race
    open_copies()[me().index].push_back(p);                // check sees it; the bytes: later
}

inline void cp_async_commit() {
    using namespace ioattn_emu;
    const int i = me().index;
    copy_groups()[i].push_back(std::move(open_copies()[i]));
    open_copies()[i].clear();
}

namespace ioattn_emu {
inline void complete_groups(size_t keep) {
    auto& groups = copy_groups()[me().index];
    while (groups.size() > keep) {
        for (const Pending& p : groups.front()) raw_copy(p.dst, p.bytes, size_t(p.n));
        groups.erase(groups.begin());
    }
}
}  // namespace ioattn_emu

template <int pending>
void cp_async_wait() {
    static_assert(pending >= 0, "cp.async.wait_group takes a count >= 0");
    ioattn_emu::complete_groups(size_t(pending));
}

inline void cp_async_wait_all() {        // cp.async.commit_group, then wait_group 0
    cp_async_commit();
    ioattn_emu::complete_groups(0);
}

// One C entry point per kernel, called from Python through ctypes (ioattn/gpu/emulator.py).
#define IOATTN_EMU_EXPORT(name)                                                               \
    extern "C" int ioattn_emu_##name(const unsigned* grid, const unsigned* block, size_t smem, \
                                     void** args, const size_t* sizes, int nargs, char* err,  \
                                     size_t errlen) {                                         \
        return ioattn_emu::launch(name, #name, grid, block, smem, args, sizes, nargs, err,     \
                                  errlen);                                                    \
    }

extern "C" void ioattn_emu_set_reverse(int reverse) { ioattn_emu::rt().reverse = reverse != 0; }

// The tensor-core counts since the last reset (Runtime::mma), into out[0..3]; then reset if asked.
extern "C" void ioattn_emu_mma(unsigned long long* out, int reset) {
    for (int i = 0; i < 4; ++i) {
        out[i] = ioattn_emu::rt().mma[i];
        if (reset) ioattn_emu::rt().mma[i] = 0;
    }
}

// The array arguments of the next launch, each in guarded memory (emulator.py copies an array
// in before the launch and back after it): ioattn_emu_guard returns where argument `arg` of
// `bytes` bytes goes, aligned to `align`; ioattn_emu_unguard frees them all.
extern "C" void* ioattn_emu_guard(int arg, size_t bytes, size_t align) {
    ioattn_emu::Guarded g;
    if (!g.allocate(bytes, align, "argument " + std::to_string(arg))) return nullptr;
    ioattn_emu::rt().globals.push_back(g);
    IOATTN_RACE(ioattn_race_global(g.data, bytes, arg));
    return g.data;
}
extern "C" void ioattn_emu_unguard() {
    for (ioattn_emu::Guarded& g : ioattn_emu::rt().globals) g.release();
    ioattn_emu::rt().globals.clear();
    IOATTN_RACE(ioattn_race_global(nullptr, 0, -1));
}

#else  // IOATTN_RACE_RUNTIME
// ---------------------------------------------------------------------------------------------
// The race runtime: compiled without instrumentation as its own translation unit, with only C
// library calls and internal-linkage code (an inline function or template shared with the
// instrumented kernel could be linked as the kernel's instrumented copy).
//
// Which accesses a barrier orders, after the CUDA C++ Programming Guide:
//   * __syncthreads() waits until every thread of the block has reached it "and all global and
//     shared memory accesses made by these threads prior to __syncthreads() are visible to all
//     threads in the block": it orders every access before it against every access after it.
//     (The emulator already refuses a __syncthreads that some thread of the block never reaches.)
//   * "Executing __syncwarp() guarantees memory ordering among threads participating in the
//     barrier": it orders the accesses of the lanes of one warp that take part, i.e. the lanes
//     that have not exited (the mask is not modelled: every live lane of the warp takes part).
//   * Warp shuffles (__shfl*_sync) "do not imply a memory barrier. They do not guarantee any
//     memory ordering": they order nothing, even though every lane waits for the others.
//   * WMMA load_matrix_sync, store_matrix_sync and mma_sync wait until every lane of the warp
//     has arrived, but the Guide states no memory ordering for them: they order nothing either.
//     Their loads and stores are the warp's as a whole (which lane moves which entry is
//     unspecified), so they conflict with a plain access by any lane, the same warp's included,
//     that no __syncwarp or __syncthreads orders. Two WMMA operations of one warp are taken to
//     be in the warp's program order (an accumulator tile loaded and stored back moves every
//     entry through the same lane's register).
//   * Atomics (atomicAdd, atomicMax) do not race with each other; they do race with plain reads
//     and writes that nothing orders. They order nothing.
// So two accesses in one __syncthreads interval are ordered only if they are in one warp, a
// __syncwarp lies between them, and the earlier thread took part in it (had not exited).
//
// The record, per byte of shared memory and per kind of access (read, write, atomic): the first
// warp to access it in the interval, the latest __syncwarp count ("epoch") of that warp at
// which it did, the lanes that did at that epoch (bit 32: the warp's WMMA operations), the lanes
// that did and then exited before the next __syncwarp, and one thread of a second warp if
// another warp accessed it too. That is exact for the question asked at every access: is there
// an earlier conflicting access of another thread that no barrier orders before this one?
// (Another warp's access always qualifies; in the same warp, one at the current epoch or by a
// lane that exited after it.) A __syncthreads starts a new interval: the record is emptied in
// O(1) by a generation number.
#include <dlfcn.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

enum Kind { READ = 0, WRITE = 1, ATOMIC = 2 };
enum Mode { PLAIN = 0, ATOMICS = 1, WMMA = 2 };
constexpr uint16_t NOBODY = 0xFFFF;
constexpr uint32_t LIVE = 0xFFFFFFFFu;
constexpr uint64_t WARP_BIT = uint64_t(1) << 32;    // the warp's WMMA operations, as a "lane"
constexpr int MAX_THREADS = 1024, MAX_WARPS = 32, MAX_RACES = 4;

struct Summary {              // one kind of access to one byte, in the current interval
    uint32_t gen;             // the interval it describes; any other value: no access yet
    uint32_t epoch;           // the latest __syncwarp count of warp0 at which warp0 accessed
    uint64_t lanes;           // warp0's lanes that accessed at `epoch` (bit 32: WMMA)
    uint64_t exited;          // warp0's lanes that accessed and then exited, no __syncwarp after
    uint16_t first;           // the first accessor (of warp0)
    uint16_t other;           // an accessor of another warp, or NOBODY
    uint8_t warp0;
    uint8_t unused[3];
};

struct Race {
    size_t byte, start, size;         // the conflicting byte; the access holding it
    int earlier, later;               // accessors: thread index, or threads + warp for WMMA
    int earlier_kind, later_kind;
    unsigned block[3];
    uint32_t syncthreads, syncwarps;
    bool exited;                      // the earlier thread exited without a later __syncwarp
};

struct Checker {
    uintptr_t base = 0;
    size_t size = 0;                  // the shared memory checked: [base, base + size)
    size_t bytes = 0;                 // the shared memory's size
    uintptr_t lo = 0, hi = 0;         // its mapping: an access there outside it is out of bounds
    char oob[256] = {0};              // the first out-of-bounds access of the launch
    Summary* shadow = nullptr;        // three per byte: READ, WRITE, ATOMIC
    size_t capacity = 0;
    int threads = 0;
    unsigned dim[3] = {1, 1, 1}, block[3] = {0, 0, 0};
    uint32_t gen = 0, syncthreads = 0;
    int cur = -1;                     // the running thread, -1 in the scheduler
    int mode = PLAIN;
    uint32_t warp_epoch[MAX_WARPS];   // __syncwarp count of each warp in this block
    uint32_t warp_exits[MAX_WARPS];   // exited lanes of each warp
    uint32_t exit_epoch[MAX_THREADS]; // a thread's warp epoch when it exited, else LIVE
    Race races[MAX_RACES];
    int count = 0;
    bool full = false;                // MAX_RACES found: stop checking
};

Checker C;

void next_interval() {
    if (++C.gen == 0) {               // wrapped: forget every record
        std::memset(C.shadow, 0, C.capacity * sizeof(Summary));
        C.gen = 1;
    }
}

int warp_of(int who) { return who < C.threads ? who / 32 : who - C.threads; }

// The lanes of `lanes` (warp w) that exited at `epoch`, i.e. took part in no later __syncwarp.
uint64_t exited_at(uint64_t lanes, int w, uint32_t epoch) {
    uint64_t out = 0, m = lanes & 0xFFFFFFFFu;
    while (m) {
        const int l = __builtin_ctzll(m);
        m &= m - 1;
        if (C.exit_epoch[32 * w + l] == epoch) out |= uint64_t(1) << l;
    }
    return out;
}

// An earlier access in `s` that no barrier orders before an access by lane `bit` of warp `w` at
// epoch `e`, or -1.
int unordered(const Summary& s, int w, uint64_t bit, uint32_t e) {
    if (s.warp0 != w) return s.first;
    if (s.other != NOBODY) return s.other;
    uint64_t c = s.exited & ~bit;
    if (s.epoch == e) c |= s.lanes & ~bit;
    else if (C.warp_exits[w]) c |= exited_at(s.lanes, w, s.epoch) & ~bit;
    if (!c) return -1;
    const int l = __builtin_ctzll(c);
    return l == 32 ? C.threads + w : 32 * w + l;
}

void record(Summary& s, int who, int w, uint64_t bit, uint32_t e) {
    if (s.gen != C.gen) {
        s = Summary{C.gen, e, bit, 0, uint16_t(who), NOBODY, uint8_t(w), {0, 0, 0}};
    } else if (s.warp0 == w) {
        if (s.epoch == e) {
            s.lanes |= bit;
        } else {                      // a __syncwarp since: keep only the lanes it left out
            if (C.warp_exits[w]) s.exited |= exited_at(s.lanes, w, s.epoch);
            s.epoch = e;
            s.lanes = bit;
        }
    } else if (s.other == NOBODY) {
        s.other = uint16_t(who);
    }
}

void report(size_t byte, size_t start, size_t size, int earlier, int earlier_kind, int later,
            int later_kind, uint32_t e) {
    for (int i = 0; i < C.count; ++i) {
        const Race& r = C.races[i];
        if (r.earlier == earlier && r.later == later && r.earlier_kind == earlier_kind &&
            r.later_kind == later_kind)
            return;                   // this pair is reported already (at a lower byte)
    }
    const bool exited = earlier < C.threads && C.exit_epoch[earlier] < e;
    C.races[C.count++] = Race{byte, start, size, earlier, later, earlier_kind, later_kind,
                              {C.block[0], C.block[1], C.block[2]}, C.syncthreads, e, exited};
    if (C.count == MAX_RACES) C.full = true;
}

// ---------------------------------------------------------------------------------------------
// Warp-level access counts (the race-check build). Every load and store the instrumentation
// reports is a lane's part of one warp instruction: lane l's k-th execution of instruction site
// s (the hook's return address) belongs to the warp request (warp, s, k), as SIMT execution
// pairs them (for loops whose lanes run different numbers of iterations, iteration k with
// iteration k). At every __syncthreads and at the end of a block the requests so far are
// complete and are counted, per site:
//   * shared memory: the wavefronts of the request. 32 banks of 4-byte words, word w in bank
//     w mod 32 (CUDA C++ Programming Guide, "Shared Memory" of Compute Capability 5.x and
//     later: "successive 32-bit words map to successive banks"; lanes that access the same
//     32-bit word do not conflict: a read is broadcast). Accesses of 8 bytes are processed one
//     half-warp at a time and of 16 bytes one quarter-warp at a time (the lanes l with the same
//     l / 16, or l / 8); 1- to 4-byte accesses by the whole warp at once. A phase takes as many
//     wavefronts as the most distinct words it touches in one bank (at least one), the request
//     the sum over its phases: 1 for 32 lanes reading 32 consecutive floats or one float, 2 for
//     stride 2, 32 for stride 32; 4 for 32 consecutive float4.
//   * global memory (an array argument): the 32-byte sectors the request's bytes touch,
//     counted from the array's start (allocations are 256-byte aligned on a GPU).
//   * WMMA loads and stores: an assumption, not a documented rule. NVIDIA documents neither
//     which lane moves which entry nor how wmma::load_matrix_sync and store_matrix_sync split
//     into wavefronts; they are counted as ldmatrix's 16-byte rows, 8 rows a phase (count_tile),
//     so their wavefronts are this model's, not measured.
namespace counts {

struct Rec {
    uint64_t site;
    uint32_t warp, k;
    uint32_t lane, size;
    uint64_t off;                     // byte offset in its buffer
    int32_t buffer;                   // -1: shared memory, else the argument's index
};

struct Site {                         // one (site, space) total
    uint64_t site;
    int32_t shared;
    uint64_t requests, wavefronts, sectors, accesses, bytes;
};

struct Buffer { uintptr_t lo; size_t bytes; int arg; };

Rec* recs = nullptr;
size_t n_recs = 0, cap_recs = 0;
Site* sites = nullptr;
size_t n_sites = 0, cap_sites = 0;
Buffer buffers[64];
int n_buffers = 0;
bool on = false;

// occurrences per (thread, site): open addressing, emptied at every flush
struct Occ { uint64_t key; uint32_t count; };
Occ* occ = nullptr;
size_t cap_occ = 0, n_occ = 0;

uint32_t occurrence(uint64_t site, uint32_t thread) {
    if (2 * (n_occ + 1) > cap_occ) {
        const size_t old = cap_occ;
        Occ* prev = occ;
        cap_occ = cap_occ ? 2 * cap_occ : 4096;
        occ = static_cast<Occ*>(std::calloc(cap_occ, sizeof(Occ)));
        n_occ = 0;
        for (size_t i = 0; i < old; ++i)
            if (prev[i].key) {
                size_t h = (prev[i].key * 0x9E3779B97F4A7C15ull) & (cap_occ - 1);
                while (occ[h].key) h = (h + 1) & (cap_occ - 1);
                occ[h] = prev[i];
                ++n_occ;
            }
        std::free(prev);
    }
    const uint64_t key = (site << 11) ^ (uint64_t(thread) + 1);
    size_t h = (key * 0x9E3779B97F4A7C15ull) & (cap_occ - 1);
    while (occ[h].key && occ[h].key != key) h = (h + 1) & (cap_occ - 1);
    if (!occ[h].key) { occ[h].key = key; ++n_occ; }
    return occ[h].count++;
}

void add(uint64_t site, uint32_t thread, uint64_t off, uint32_t size, int32_t buffer) {
    if (n_recs == cap_recs) {
        cap_recs = cap_recs ? 2 * cap_recs : 1 << 16;
        recs = static_cast<Rec*>(std::realloc(recs, cap_recs * sizeof(Rec)));
    }
    recs[n_recs++] = Rec{site ^ (buffer < 0 ? 0 : 1ull << 63), thread / 32,
                         occurrence(site, thread), thread % 32, size, off, buffer};
}

int by_request(const void* a, const void* b) {
    const Rec& x = *static_cast<const Rec*>(a);
    const Rec& y = *static_cast<const Rec*>(b);
    if (x.site != y.site) return x.site < y.site ? -1 : 1;
    if (x.warp != y.warp) return x.warp < y.warp ? -1 : 1;
    if (x.k != y.k) return x.k < y.k ? -1 : 1;
    if (x.lane != y.lane) return x.lane < y.lane ? -1 : 1;
    return x.off < y.off ? -1 : x.off > y.off;
}

Site& site_of(uint64_t site, int shared) {
    for (size_t i = 0; i < n_sites; ++i)
        if (sites[i].site == site && sites[i].shared == shared) return sites[i];
    if (n_sites == cap_sites) {
        cap_sites = cap_sites ? 2 * cap_sites : 64;
        sites = static_cast<Site*>(std::realloc(sites, cap_sites * sizeof(Site)));
    }
    sites[n_sites] = Site{site, shared, 0, 0, 0, 0, 0};
    return sites[n_sites++];
}

// The wavefronts of one shared-memory request: records [a, b) of one (site, warp, k).
uint64_t wavefronts(const Rec* a, const Rec* b) {
    uint32_t size = 0;
    for (const Rec* r = a; r < b; ++r) size = r->size > size ? r->size : size;
    const uint32_t group = size > 8 ? 8 : size > 4 ? 16 : 32;   // lanes per phase
    uint64_t total = 0;
    for (uint32_t first = 0; first < 32; first += group) {
        uint64_t words[32 * 4];                 // distinct words of the phase
        int n = 0;
        for (const Rec* r = a; r < b; ++r) {
            if (r->lane < first || r->lane >= first + group) continue;
            for (uint64_t w = r->off / 4; w <= (r->off + r->size - 1) / 4; ++w) {
                bool seen = false;
                for (int i = 0; i < n && !seen; ++i) seen = words[i] == w;
                if (!seen && n < 32 * 4) words[n++] = w;
            }
        }
        if (n == 0) continue;
        int per_bank[32] = {0}, most = 0;
        for (int i = 0; i < n; ++i) {
            const int c = ++per_bank[words[i] % 32];
            most = c > most ? c : most;
        }
        total += uint64_t(most);
    }
    return total;
}

// The 32-byte sectors of one global request.
uint64_t sectors(const Rec* a, const Rec* b) {
    uint64_t seen[32 * 4];
    int n = 0;
    for (const Rec* r = a; r < b; ++r)
        for (uint64_t s = r->off / 32; s <= (r->off + r->size - 1) / 32; ++s) {
            const uint64_t key = (uint64_t(r->buffer) << 48) ^ s;
            bool dup = false;
            for (int i = 0; i < n && !dup; ++i) dup = seen[i] == key;
            if (!dup && n < 32 * 4) seen[n++] = key;
        }
    return uint64_t(n);
}

void flush() {
    if (n_recs) {
        std::qsort(recs, n_recs, sizeof(Rec), by_request);
        for (size_t i = 0; i < n_recs;) {
            size_t j = i;
            while (j < n_recs && recs[j].site == recs[i].site && recs[j].warp == recs[i].warp &&
                   recs[j].k == recs[i].k)
                ++j;
            const bool shared = recs[i].buffer < 0;
            Site& s = site_of(recs[i].site & ~(1ull << 63), shared);
            s.requests += 1;
            s.accesses += j - i;
            for (size_t q = i; q < j; ++q) s.bytes += recs[q].size;
            if (shared) s.wavefronts += wavefronts(recs + i, recs + j);
            else s.sectors += sectors(recs + i, recs + j);
            i = j;
        }
    }
    n_recs = 0;
    if (occ) std::memset(occ, 0, cap_occ * sizeof(Occ));
    n_occ = 0;
}

void record(const volatile void* p, size_t len, uint64_t site, int thread, uintptr_t base,
            size_t shared_bytes) {
    const uintptr_t a = uintptr_t(p);
    if (a >= base && a + len <= base + shared_bytes) {
        add(site, uint32_t(thread), a - base, uint32_t(len), -1);
        return;
    }
    for (int i = 0; i < n_buffers; ++i)
        if (a >= buffers[i].lo && a + len <= buffers[i].lo + buffers[i].bytes) {
            add(site, uint32_t(thread), a - buffers[i].lo, uint32_t(len), buffers[i].arg);
            return;
        }
}

}  // namespace counts

// Check, then record, every byte of an access of `len` bytes at `p` by the running thread.
inline void access(const volatile void* p, size_t len, int kind, uint64_t site = 0) {
    const uintptr_t off = uintptr_t(p) - C.base;
    if (counts::on && C.cur >= 0 && site && C.mode == PLAIN)
        counts::record(p, len, site, C.cur, C.base, C.bytes);
    if (C.cur >= 0 && uintptr_t(p) + len > C.lo && uintptr_t(p) < C.hi &&
        (uintptr_t(p) < C.base || off + len > C.bytes)) {
        if (!C.oob[0]) {
            const unsigned i = unsigned(C.cur);
            std::snprintf(C.oob, sizeof C.oob, "out-of-bounds access to shared memory: a "
                          "%zu-byte %s at byte %lld of a %zu-byte buffer, by thread (%u,%u,%u) "
                          "of block (%u,%u,%u)", len, kind == READ ? "read" : "write",
                          (long long)(intptr_t(p) - intptr_t(C.base)), C.bytes, i % C.dim[0],
                          (i / C.dim[0]) % C.dim[1], i / (C.dim[0] * C.dim[1]), C.block[0],
                          C.block[1], C.block[2]);
        }
        return;
    }
#ifdef IOATTN_COUNT_ONLY
    return;                           // the counting build: counts and bounds, no race check
#endif
    if (off >= C.size || C.cur < 0 || C.full) return;
    if (C.mode == ATOMICS) kind = ATOMIC;
    const int w = C.cur / 32;
    const bool wmma = C.mode == WMMA;
    const int who = wmma ? C.threads + w : C.cur;
    const uint64_t bit = wmma ? WARP_BIT : uint64_t(1) << (C.cur % 32);
    const uint32_t e = C.warp_epoch[w];
    bool reported = false;
    Summary* s = C.shadow + 3 * off;
    for (size_t i = 0; i < len; ++i, s += 3) {
        for (int k = 0; k < 3 && !reported; ++k) {
            if (s[k].gen != C.gen || (k == READ && kind == READ) ||
                (k == ATOMIC && kind == ATOMIC))
                continue;
            const int other = unordered(s[k], w, bit, e);
            if (other >= 0) {
                report(off + i, off, len, other, k, who, kind, e);
                reported = true;
            }
        }
        record(s[kind], who, w, bit, e);
    }
}

int describe(char* out, size_t len, int who) {
    if (who >= C.threads)
        return std::snprintf(out, len, "a WMMA operation of warp %d", who - C.threads);
    const unsigned i = unsigned(who), x = i % C.dim[0], y = (i / C.dim[0]) % C.dim[1],
                   z = i / (C.dim[0] * C.dim[1]);
    return std::snprintf(out, len, "thread (%u,%u,%u)", x, y, z);
}

}  // namespace

extern "C" {

void ioattn_race_launch(const unsigned* block, void* shared, size_t bytes, const void* lo,
                        const void* hi) {
    C.lo = uintptr_t(lo), C.hi = uintptr_t(hi), C.bytes = bytes;
    C.oob[0] = 0;
#ifdef IOATTN_COUNT_ONLY
    if (false) {                      // the counting build keeps no shadow
#else
    if (3 * bytes > C.capacity) {
#endif
        std::free(C.shadow);
        C.shadow = static_cast<Summary*>(std::calloc(3 * bytes, sizeof(Summary)));
        C.capacity = C.shadow ? 3 * bytes : 0;
    }
    C.base = uintptr_t(shared);
    C.size = C.shadow ? bytes : 0;
    C.threads = int(block[0] * block[1] * block[2]);
    for (int i = 0; i < 3; ++i) C.dim[i] = block[i];
    C.cur = -1;
    C.mode = PLAIN;
    C.count = 0;
    C.full = false;
}

void ioattn_race_block(unsigned x, unsigned y, unsigned z) {
    next_interval();
    C.block[0] = x, C.block[1] = y, C.block[2] = z;
    C.syncthreads = 0;
    for (int w = 0; w < MAX_WARPS; ++w) C.warp_epoch[w] = C.warp_exits[w] = 0;
    for (int i = 0; i < MAX_THREADS; ++i) C.exit_epoch[i] = LIVE;
}

void ioattn_race_current(int thread) { C.cur = thread; }

void ioattn_race_syncthreads() {
    counts::flush();
    next_interval();
    ++C.syncthreads;
}

void ioattn_race_syncwarp(int warp) { ++C.warp_epoch[warp]; }

void ioattn_race_exit(int thread) {
    C.exit_epoch[thread] = C.warp_epoch[thread / 32];
    ++C.warp_exits[thread / 32];
}

void ioattn_race_mode(int mode) { C.mode = mode; }

int ioattn_race_count() { return C.count; }

void ioattn_race_global(const void* lo, size_t bytes, int arg) {
    if (lo == nullptr) { counts::n_buffers = 0; return; }     // the launch's arrays are freed
    if (counts::n_buffers < 64)
        counts::buffers[counts::n_buffers++] = counts::Buffer{uintptr_t(lo), bytes, arg};
}

void ioattn_race_flush() { counts::flush(); }

// A lane's part of a warp instruction whose bytes the emulator moves otherwise (a WMMA tile):
// counted at the caller's site, not checked for races.
void ioattn_race_warp_access(const void* p, size_t len) {
    if (counts::on && C.cur >= 0 && C.mode == PLAIN)
        counts::record(p, len, uint64_t(uintptr_t(__builtin_return_address(0))), C.cur, C.base,
                       C.bytes);
}

// The counts (Python, emulator.py): on/off, and the table since the last reset.
void ioattn_race_counts(int enable) {
    counts::flush();
    counts::on = enable != 0;
    counts::n_sites = 0;
}
size_t ioattn_race_sites() { counts::flush(); return counts::n_sites; }
void ioattn_race_site(size_t i, uint64_t* out) {      // site, shared, requests, wavefronts,
    const counts::Site& s = counts::sites[i];         // sectors, accesses
    Dl_info info;                                     // the site as an offset in the library
    out[0] = dladdr(reinterpret_cast<void*>(s.site), &info) && info.dli_fbase
                 ? s.site - uint64_t(uintptr_t(info.dli_fbase)) : s.site; out[1] = uint64_t(s.shared); out[2] = s.requests; out[3] = s.wavefronts;
    out[4] = s.sectors; out[5] = s.accesses; out[6] = s.bytes;
}

int ioattn_race_out_of_bounds(char* out, size_t len) {
    if (!C.oob[0]) return 0;
    std::snprintf(out, len, "%s", C.oob);
    return 1;
}

void ioattn_race_message(char* out, size_t len) {
    static const char* const now[] = {"reads", "writes", "updates atomically"};
    static const char* const before[] = {"read", "wrote", "updated atomically"};
    size_t at = 0;
    auto put = [&](int n) { at = n < 0 ? at : (at + size_t(n) < len ? at + size_t(n) : len - 1); };
    put(std::snprintf(out, len, "%d shared-memory race%s%s", C.count, C.count == 1 ? "" : "s",
                      C.full ? " (checking stopped there)" : ""));
    for (int i = 0; i < C.count && at + 1 < len; ++i) {
        const Race& r = C.races[i];
        char later[48], earlier[48];
        describe(later, sizeof later, r.later);
        describe(earlier, sizeof earlier, r.earlier);
        put(std::snprintf(out + at, len - at,
                          "\n  block (%u,%u,%u): %s %s byte %zu of shared memory (%zu-byte access "
                          "at bytes %zu..%zu, entry %zu) after %s %s it, and no barrier orders "
                          "the two: both come after %u __syncthreads of the block",
                          r.block[0], r.block[1], r.block[2], later, now[r.later_kind], r.byte,
                          r.size, r.start, r.start + r.size - 1, r.start / r.size, earlier,
                          before[r.earlier_kind], r.syncthreads));
        const int w = warp_of(r.later), v = warp_of(r.earlier);
        if (v != w)
            put(std::snprintf(out + at, len - at, ", in different warps (%d and %d)", v, w));
        else if (r.exited)
            put(std::snprintf(out + at, len - at, ", in warp %d, and %s exited before the "
                              "warp's next __syncwarp", w, earlier));
        else
            put(std::snprintf(out + at, len - at, ", in warp %d after %u of its __syncwarp", w,
                              r.syncwarps));
    }
}

// The ThreadSanitizer interface that g++ -fsanitize=thread calls (the instrumented kernel's only
// undefined __tsan_ symbols must be among these: the build links with -z defs).
void __tsan_init() {}
void __tsan_func_entry(void*) {}
void __tsan_func_exit() {}
void __tsan_vptr_update(void**, void*) {}
void __tsan_vptr_read(void**) {}
void __tsan_read_range(void* p, unsigned long n) { access(p, n, READ); }
void __tsan_write_range(void* p, unsigned long n) { access(p, n, WRITE); }

#define SITE uint64_t(uintptr_t(__builtin_return_address(0)))
#define IOATTN_TSAN_ACCESS(n)                                                                  \
    void __tsan_read##n(void* p) { access(p, n, READ, SITE); }                                 \
    void __tsan_write##n(void* p) { access(p, n, WRITE, SITE); }                               \
    void __tsan_unaligned_read##n(void* p) { access(p, n, READ, SITE); }                       \
    void __tsan_unaligned_write##n(void* p) { access(p, n, WRITE, SITE); }                     \
    void __tsan_volatile_read##n(void* p) { access(p, n, READ); }                              \
    void __tsan_volatile_write##n(void* p) { access(p, n, WRITE); }
IOATTN_TSAN_ACCESS(1)
IOATTN_TSAN_ACCESS(2)
IOATTN_TSAN_ACCESS(4)
IOATTN_TSAN_ACCESS(8)
IOATTN_TSAN_ACCESS(16)
#undef IOATTN_TSAN_ACCESS
#undef SITE

// C++ atomics of the kernel's translation unit (a static's guard, say), done for real. On shared
// memory they are recorded as atomic accesses.
#define SC __ATOMIC_SEQ_CST
#define IOATTN_TSAN_ATOMIC(bits, T)                                                            \
    T __tsan_atomic##bits##_load(const volatile T* a, int) {                                   \
        access(a, sizeof(T), ATOMIC);                                                          \
        return __atomic_load_n(a, SC);                                                         \
    }                                                                                          \
    void __tsan_atomic##bits##_store(volatile T* a, T v, int) {                                \
        access(a, sizeof(T), ATOMIC);                                                          \
        __atomic_store_n(a, v, SC);                                                            \
    }                                                                                          \
    T __tsan_atomic##bits##_exchange(volatile T* a, T v, int) {                                \
        access(a, sizeof(T), ATOMIC);                                                          \
        return __atomic_exchange_n(a, v, SC);                                                  \
    }                                                                                          \
    T __tsan_atomic##bits##_fetch_add(volatile T* a, T v, int) {                               \
        access(a, sizeof(T), ATOMIC);                                                          \
        return __atomic_fetch_add(a, v, SC);                                                   \
    }                                                                                          \
    T __tsan_atomic##bits##_fetch_sub(volatile T* a, T v, int) {                               \
        access(a, sizeof(T), ATOMIC);                                                          \
        return __atomic_fetch_sub(a, v, SC);                                                   \
    }                                                                                          \
    T __tsan_atomic##bits##_fetch_and(volatile T* a, T v, int) {                               \
        access(a, sizeof(T), ATOMIC);                                                          \
        return __atomic_fetch_and(a, v, SC);                                                   \
    }                                                                                          \
    T __tsan_atomic##bits##_fetch_or(volatile T* a, T v, int) {                                \
        access(a, sizeof(T), ATOMIC);                                                          \
        return __atomic_fetch_or(a, v, SC);                                                    \
    }                                                                                          \
    T __tsan_atomic##bits##_fetch_xor(volatile T* a, T v, int) {                               \
        access(a, sizeof(T), ATOMIC);                                                          \
        return __atomic_fetch_xor(a, v, SC);                                                   \
    }                                                                                          \
    T __tsan_atomic##bits##_fetch_nand(volatile T* a, T v, int) {                              \
        access(a, sizeof(T), ATOMIC);                                                          \
        return __atomic_fetch_nand(a, v, SC);                                                  \
    }                                                                                          \
    int __tsan_atomic##bits##_compare_exchange_strong(volatile T* a, T* c, T v, int, int) {    \
        access(a, sizeof(T), ATOMIC);                                                          \
        return __atomic_compare_exchange_n(a, c, v, false, SC, SC);                            \
    }                                                                                          \
    int __tsan_atomic##bits##_compare_exchange_weak(volatile T* a, T* c, T v, int, int) {      \
        access(a, sizeof(T), ATOMIC);                                                          \
        return __atomic_compare_exchange_n(a, c, v, false, SC, SC);                            \
    }                                                                                          \
    T __tsan_atomic##bits##_compare_exchange_val(volatile T* a, T c, T v, int, int) {          \
        access(a, sizeof(T), ATOMIC);                                                          \
        __atomic_compare_exchange_n(a, &c, v, false, SC, SC);                                  \
        return c;                                                                              \
    }
IOATTN_TSAN_ATOMIC(8, char)
IOATTN_TSAN_ATOMIC(16, short)
IOATTN_TSAN_ATOMIC(32, int)
IOATTN_TSAN_ATOMIC(64, long)
#undef IOATTN_TSAN_ATOMIC
#undef SC
void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
void __tsan_atomic_signal_fence(int) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }

}  // extern "C"
#endif
