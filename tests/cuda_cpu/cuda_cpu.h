// Runs CUDA C kernels on the CPU, for tests on machines without a GPU.
//
// Every CUDA thread of a block becomes one std::thread; blocks run one after another.
// __syncthreads() is a std::barrier over the block, __syncwarp() one over the thread's warp
// of 32 (shuffles and the warp-wide PTX instructions swap values through a slot per lane between
// two of those), and a thread that returns drops out of both (as an exited CUDA thread does).
// __shared__ arrays become function statics: one copy, which is right because only one
// block runs at a time. Registers are the threads' own locals.
//
// This checks a kernel's arithmetic, indexing, masking and synchronisation; it says nothing
// about its speed. Only what the project's kernels use is here.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ static

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
    dim3() = default;
    dim3(unsigned x_, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

struct alignas(8) float2 { float x, y; };
inline float2 make_float2(float x, float y) { return {x, y}; }
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }

namespace cuda_cpu {
using Barrier = std::barrier<>;
inline thread_local Barrier* block_barrier = nullptr;
inline thread_local Barrier* warp_barrier = nullptr;
constexpr std::size_t SLOT = 32;  // bytes each lane may post in one exchange
inline thread_local unsigned char* warp_exchange = nullptr;  // 32 slots: what the lanes of a warp swap
inline thread_local unsigned lane_id = 0;

// Every lane of the warp posts `value`; each gets all 32 (entry l is lane l's).
template <class T>
inline std::array<T, 32> warp_gather(const T& value) {
    static_assert(sizeof(T) <= SLOT, "one slot per lane");
    warp_barrier->arrive_and_wait();  // the last exchange's reads are done
    std::memcpy(warp_exchange + SLOT * lane_id, &value, sizeof(T));
    warp_barrier->arrive_and_wait();
    std::array<T, 32> all;
    for (unsigned l = 0; l < 32; ++l) std::memcpy(&all[l], warp_exchange + SLOT * l, sizeof(T));
    return all;
}
}  // namespace cuda_cpu

inline thread_local dim3 threadIdx, blockIdx, blockDim, gridDim;

inline void __syncthreads() { cuda_cpu::block_barrier->arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) { cuda_cpu::warp_barrier->arrive_and_wait(); }

// __shfl_xor_sync: every lane of the warp posts its value, then reads lane (lane ^ lane_mask)'s.
template <class T>
inline T __shfl_xor_sync(unsigned, T value, int lane_mask, int = 32) {
    return cuda_cpu::warp_gather(value)[cuda_cpu::lane_id ^ unsigned(lane_mask)];
}

inline float __expf(float x) { return std::exp(x); }
// atomicAdd: the threads of a block run as std::threads, so two may add to one address at once.
inline float atomicAdd(float* address, float value) { return std::atomic_ref<float>(*address).fetch_add(value); }
inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, sizeof f); return f; }
inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, sizeof u); return u; }
using std::max;
using std::min;

namespace cuda_cpu {

// A kernel's dynamic shared memory (`extern __shared__`, sized at launch on a GPU): a buffer of
// exactly the launch's size, filled with 0xFF bytes (NaN as float and as half) before every block.
// A GPU leaves a block's shared memory holding whatever was there, so a kernel that reads what
// this block did not write gets NaN here, never a tile an earlier block left behind; and a kernel
// that reaches past the size the host asked for leaves the buffer (AddressSanitizer builds say so).
inline unsigned char* dynamic_shared = nullptr;

struct SharedBuffer {  // 128-byte aligned, as a GPU aligns a block's shared memory at least
    std::size_t bytes;
    unsigned char* p;
    explicit SharedBuffer(std::size_t n) : bytes(n), p(static_cast<unsigned char*>(
        ::operator new[](n, std::align_val_t(128)))) {}
    ~SharedBuffer() { ::operator delete[](p, std::align_val_t(128)); }
};

// Launch kernel() on grid × block threads with `shared_bytes` of dynamic shared memory. Blocks
// run in order; the threads of one block run concurrently so that barriers inside the kernel work.
inline void launch(dim3 grid, dim3 block, std::size_t shared_bytes, const std::function<void()>& kernel) {
    const unsigned n_threads = block.x * block.y * block.z;
    const unsigned n_warps = (n_threads + 31) / 32;
    SharedBuffer shared(std::max<std::size_t>(shared_bytes, 16));
    dynamic_shared = shared.p;
    for (unsigned bz = 0; bz < grid.z; ++bz)
        for (unsigned by = 0; by < grid.y; ++by)
            for (unsigned bx = 0; bx < grid.x; ++bx) {
                std::memset(shared.p, 0xFF, shared.bytes);
                Barrier block_bar(n_threads);
                std::vector<std::unique_ptr<Barrier>> warp_bars;
                for (unsigned w = 0; w < n_warps; ++w)
                    warp_bars.emplace_back(new Barrier(std::min(32u, n_threads - 32 * w)));
                std::vector<unsigned char> exchange(32 * SLOT * n_warps);
                std::vector<std::thread> threads;
                threads.reserve(n_threads);
                for (unsigned t = 0; t < n_threads; ++t)
                    threads.emplace_back([&, t] {
                        threadIdx = dim3(t % block.x, t / block.x % block.y, t / (block.x * block.y));
                        blockIdx = dim3(bx, by, bz);
                        blockDim = block;
                        gridDim = grid;
                        block_barrier = &block_bar;
                        warp_barrier = warp_bars[t / 32].get();
                        warp_exchange = &exchange[32 * SLOT * (t / 32)];
                        lane_id = t % 32;
                        kernel();
                        warp_barrier->arrive_and_drop();  // an exited thread no longer holds others up
                        block_barrier->arrive_and_drop();
                    });
                for (auto& th : threads) th.join();
            }
    dynamic_shared = nullptr;
}

// Converts a void* argument to whatever pointer type the kernel's parameter has.
struct AnyPtr {
    void* p;
    template <class T> operator T*() const { return static_cast<T*>(p); }
};

}  // namespace cuda_cpu
