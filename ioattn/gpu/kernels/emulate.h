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
// What it cannot show: timing, bank conflicts, occupancy, and the behaviour of races that happen
// to be harmless in the orders it tries.
#pragma once

#include <math.h>
#include <ucontext.h>

#include <algorithm>
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
};

struct Runtime {
    uint3 block_idx{0, 0, 0};
    dim3 block_dim, grid_dim;
    std::vector<Fiber> fibers;
    Fiber* cur = nullptr;
    ucontext_t scheduler;
    std::vector<unsigned char> shared;
    std::vector<uint64_t> exchange;          // one slot per thread, for shuffles
    std::function<void()> body;
    std::string error;
    bool reverse = false;                    // run the fibers of a block in reverse order
    static constexpr size_t stack_size = 256 * 1024;
    std::vector<char*> stacks;               // reused by every launch

    ~Runtime() { for (char* s : stacks) delete[] s; }
};

inline Runtime& rt() { static Runtime r; return r; }
inline unsigned char* dynamic_shared() { return rt().shared.data(); }

// Leave the current fiber in `state` and return to the scheduler.
inline void yield(State state) {
    Runtime& r = rt();
    Fiber* f = r.cur;
    f->state = state;
    swapcontext(&f->ctx, &r.scheduler);
}

inline void warp_barrier() { yield(State::warp_wait); }

inline void entry() {
    Runtime& r = rt();
    r.body();
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

// Run one block to completion; false (with r.error set) on a barrier that cannot complete.
inline bool run_block() {
    Runtime& r = rt();
    const int n = int(r.fibers.size());
    std::fill(r.shared.begin(), r.shared.end(), (unsigned char)0xFF);
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
            swapcontext(&r.scheduler, &f.ctx);
            r.cur = nullptr;
        }
        int live = 0, at_block = 0, done = 0;
        for (Fiber& f : r.fibers) {
            if (f.state == State::done) ++done; else ++live;
            if (f.state == State::block_wait) ++at_block;
        }
        if (live == 0) return true;
        if (at_block == live) {
            if (done > 0) {
                fail("__syncthreads() was not reached by every thread: " + std::to_string(done) +
                     " thread(s) had returned");
                return false;
            }
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
    r.shared.assign(shared_bytes + 16, 0);
    r.body = std::move(body);
    for (unsigned z = 0; z < grid[2]; ++z)
        for (unsigned y = 0; y < grid[1]; ++y)
            for (unsigned x = 0; x < grid[0]; ++x) {
                r.block_idx = uint3{x, y, z};
                if (!run_block()) {
                    std::snprintf(err, errlen, "%s", r.error.c_str());
                    return 1;
                }
            }
    return 0;
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
inline void __syncwarp(unsigned = 0xffffffffu) { ioattn_emu::warp_barrier(); }

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

// One OS thread runs every fiber, so atomics are plain read-modify-writes.
template <class T> T atomicAdd(T* p, T v) { T old = *p; *p = old + v; return old; }
inline int atomicMax(int* p, int v) { int old = *p; *p = std::max(old, v); return old; }

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
// barriers on entry and exit, as on the hardware (all lanes take part in each of them).
namespace nvcuda {
namespace wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

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
void load_matrix_sync(fragment<Use, m, n, k, T, L>& f, const std::type_identity_t<T>* p,
                      unsigned ldm) {
    static_assert(!std::is_same<Use, accumulator>::value, "accumulators take a layout_t");
    ioattn_emu::warp_barrier();
    constexpr bool row = std::is_same<L, row_major>::value;
    for (int r = 0; r < f.rows; ++r)
        for (int c = 0; c < f.cols; ++c)
            f.x[r * f.cols + c] = row ? p[size_t(r) * ldm + c] : p[size_t(c) * ldm + r];
    ioattn_emu::warp_barrier();
}

template <int m, int n, int k, class T>
void load_matrix_sync(fragment<accumulator, m, n, k, T, void>& f, const std::type_identity_t<T>* p, unsigned ldm,
                      layout_t layout) {
    ioattn_emu::warp_barrier();
    for (int r = 0; r < f.rows; ++r)
        for (int c = 0; c < f.cols; ++c)
            f.x[r * f.cols + c] = layout == mem_row_major ? p[size_t(r) * ldm + c]
                                                          : p[size_t(c) * ldm + r];
    ioattn_emu::warp_barrier();
}

template <int m, int n, int k, class T>
void store_matrix_sync(T* p, const fragment<accumulator, m, n, k, T, void>& f, unsigned ldm,
                       layout_t layout) {
    ioattn_emu::warp_barrier();
    if (ioattn_emu::me().lane == 0)
        for (int r = 0; r < f.rows; ++r)
            for (int c = 0; c < f.cols; ++c)
                (layout == mem_row_major ? p[size_t(r) * ldm + c] : p[size_t(c) * ldm + r]) =
                    f.x[r * f.cols + c];
    ioattn_emu::warp_barrier();
}

template <int m, int n, int k, class TA, class LA, class TB, class LB, class TC>
void mma_sync(fragment<accumulator, m, n, k, TC, void>& d,
              const fragment<matrix_a, m, n, k, TA, LA>& a,
              const fragment<matrix_b, m, n, k, TB, LB>& b,
              const fragment<accumulator, m, n, k, TC, void>& c) {
    ioattn_emu::warp_barrier();
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

// One C entry point per kernel, called from Python through ctypes (ioattn/gpu/emulator.py).
#define IOATTN_EMU_EXPORT(name)                                                               \
    extern "C" int ioattn_emu_##name(const unsigned* grid, const unsigned* block, size_t smem, \
                                     void** args, const size_t* sizes, int nargs, char* err,  \
                                     size_t errlen) {                                         \
        return ioattn_emu::launch(name, #name, grid, block, smem, args, sizes, nargs, err,     \
                                  errlen);                                                    \
    }

extern "C" void ioattn_emu_set_reverse(int reverse) { ioattn_emu::rt().reverse = reverse != 0; }
