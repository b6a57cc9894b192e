// Runs CUDA C kernels on the CPU, for tests on machines without a GPU.
//
// Blocks run one after another. The CUDA threads of a block run in one of two ways:
//
//   fibers (the default)  every CUDA thread is a fiber (its own stack, switched in user space) on
//                         one CPU thread. A fiber runs until it waits at a barrier or returns; then
//                         the lowest-numbered thread that may go on runs. A barrier lets its fibers
//                         go on once every thread that has not returned has reached it.
//                         Deterministic, and ~10× faster than threads. Under ThreadSanitizer
//                         each fiber is one of its fibers too (__tsan_switch_to_fiber): no switch
//                         orders memory, a barrier does (each arrival releases, each departure
//                         acquires), so it reports two accesses that no barrier orders.
//                         AddressSanitizer is told which fiber's stack is the running one.
//   threads               (-DCUDA_CPU_THREADS) every CUDA thread is a std::thread and a barrier a
//                         std::barrier: the same results under a real thread scheduler.
//
// __syncthreads() is a barrier over the block, __syncwarp() one over the thread's warp of 32
// (shuffles and the warp-wide PTX instructions swap values through a slot per lane between two of
// those), and a thread that returns drops out of both (as an exited CUDA thread does). Threads that
// wait at different barriers forever (a __syncthreads inside a branch some threads skip) end the
// fiber run with an error instead of a hang.
// __shared__ arrays become function statics: one copy, which is right because only one block
// runs at a time. Registers are the threads' own locals.
//
// This checks a kernel's arithmetic, indexing, masking and synchronisation; it says nothing
// about its speed. Only what the project's kernels use is here.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <vector>

#if (defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)) && !defined(CUDA_CPU_THREADS)
#define CUDA_CPU_SANITIZED_FIBERS  // every switch between fibers told to the sanitizer
#endif

#ifdef CUDA_CPU_THREADS
#include <barrier>
#include <thread>
#else
#include <csetjmp>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>
#ifdef __SANITIZE_THREAD__
#include <sanitizer/tsan_interface.h>
#endif
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/common_interface_defs.h>
#endif
#endif

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

// What a CUDA thread knows of itself. Fibers share one CPU thread, so the fiber engine sets these
// each time it switches to a fiber; a std::thread has its own.
inline thread_local dim3 threadIdx, blockIdx, blockDim, gridDim;

namespace cuda_cpu {
constexpr std::size_t SLOT = 32;  // bytes each lane may post in one exchange

struct PendingCopy { void* dst; const void* src; bool inside; };  // a cp.async copy not yet landed

struct ThreadState {
    dim3 idx;
    unsigned lane = 0;                   // threadIdx's place in its warp
    unsigned warp = 0;
    unsigned char* warp_exchange = nullptr;  // 32 slots: what the lanes of the warp swap
    std::vector<PendingCopy> pending_copies;
};
inline thread_local ThreadState* self = nullptr;
inline unsigned lane_id() { return self->lane; }

inline void enter(ThreadState& state) {  // from here on the running CUDA thread is this one
    self = &state;
    threadIdx = state.idx;
}

inline unsigned warp_members(unsigned n_threads, unsigned warp) { return std::min(32u, n_threads - 32 * warp); }

void sync_block();
void sync_warp();

#ifdef __SANITIZE_THREAD__
// On a GPU a shuffle (or an mma.sync, an ldmatrix) swaps registers and orders no memory: a lane's
// write to shared memory before a shuffle is not yet visible to the others after it (that takes
// __syncwarp). Here the swap goes through barriers, so ThreadSanitizer is told to ignore them and
// the slots, or it would take a shuffle for a memory barrier and miss such a race.
extern "C" void AnnotateIgnoreSyncBegin(const char*, int);
extern "C" void AnnotateIgnoreSyncEnd(const char*, int);
extern "C" void AnnotateIgnoreReadsBegin(const char*, int);
extern "C" void AnnotateIgnoreReadsEnd(const char*, int);
extern "C" void AnnotateIgnoreWritesBegin(const char*, int);
extern "C" void AnnotateIgnoreWritesEnd(const char*, int);
struct NotAMemoryBarrier {
    NotAMemoryBarrier() {
        AnnotateIgnoreSyncBegin(__FILE__, __LINE__);
        AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
        AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
    }
    ~NotAMemoryBarrier() {
        AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
        AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
        AnnotateIgnoreSyncEnd(__FILE__, __LINE__);
    }
};
// The engine's own bookkeeping (who runs, who waits, which thread this is) is read and written by
// the scheduler and every fiber with nothing ordering them: not the kernel's accesses, not reported.
struct EngineBookkeeping {
    EngineBookkeeping() {
        AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
        AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
    }
    ~EngineBookkeeping() {
        AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
        AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
    }
};
#else
struct NotAMemoryBarrier {};
struct EngineBookkeeping {};
#endif

// Every lane of the warp posts `value`; each gets all 32 (entry l is lane l's).
template <class T>
inline std::array<T, 32> warp_gather(const T& value) {
    static_assert(sizeof(T) <= SLOT, "one slot per lane");
    NotAMemoryBarrier swap_only;
    sync_warp();  // the last exchange's reads are done
    std::memcpy(self->warp_exchange + SLOT * lane_id(), &value, sizeof(T));
    sync_warp();
    std::array<T, 32> all;
    for (unsigned l = 0; l < 32; ++l) std::memcpy(&all[l], self->warp_exchange + SLOT * l, sizeof(T));
    return all;
}
}  // namespace cuda_cpu

inline void __syncthreads() { cuda_cpu::sync_block(); }
inline void __syncwarp(unsigned = 0xffffffffu) { cuda_cpu::sync_warp(); }

// __shfl_xor_sync: every lane of the warp posts its value, then reads lane (lane ^ lane_mask)'s.
template <class T>
inline T __shfl_xor_sync(unsigned, T value, int lane_mask, int = 32) {
    return cuda_cpu::warp_gather(value)[cuda_cpu::lane_id() ^ unsigned(lane_mask)];
}

// __all_sync: whether `predicate` holds on every lane of the warp (a vote, no memory ordering).
inline bool __all_sync(unsigned, bool predicate) {
    const auto votes = cuda_cpu::warp_gather(int(predicate));
    for (int v : votes)
        if (!v) return false;
    return true;
}

inline float __expf(float x) { return std::exp(x); }
// atomicAdd: with the threads engine two threads of a block may add to one address at once.
inline float atomicAdd(float* address, float value) { return std::atomic_ref<float>(*address).fetch_add(value); }
inline int atomicAdd(int* address, int value) { return std::atomic_ref<int>(*address).fetch_add(value); }
// __threadfence: this thread's writes are seen by every other block before its later ones. Blocks run one
// after another here, so only the threads engine's order inside a block is at stake: a full fence.
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
// __ldcg: a load that skips the SM's L1 (it reads what other blocks wrote, from L2); here a plain load.
inline float __ldcg(const float* address) { return *address; }
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

inline ThreadState thread_state(unsigned t, dim3 block, std::vector<unsigned char>& exchange) {
    ThreadState s;
    s.idx = dim3(t % block.x, t / block.x % block.y, t / (block.x * block.y));
    s.lane = t % 32;
    s.warp = t / 32;
    s.warp_exchange = &exchange[32 * SLOT * s.warp];
    return s;
}

#ifdef CUDA_CPU_THREADS

using Barrier = std::barrier<>;
inline thread_local Barrier* block_barrier = nullptr;
inline thread_local Barrier* warp_barrier = nullptr;
inline void sync_block() { block_barrier->arrive_and_wait(); }
inline void sync_warp() { warp_barrier->arrive_and_wait(); }

inline bool run_block(dim3 block, unsigned n_threads, const std::function<void()>& kernel) {
    const unsigned n_warps = (n_threads + 31) / 32;
    Barrier block_bar(n_threads);
    std::vector<std::unique_ptr<Barrier>> warp_bars;
    for (unsigned w = 0; w < n_warps; ++w) warp_bars.emplace_back(new Barrier(warp_members(n_threads, w)));
    std::vector<unsigned char> exchange(32 * SLOT * n_warps);
    const dim3 b_idx = blockIdx, b_dim = blockDim, g_dim = gridDim;
    std::vector<std::thread> threads;
    threads.reserve(n_threads);
    for (unsigned t = 0; t < n_threads; ++t)
        threads.emplace_back([&, t] {
            ThreadState state = thread_state(t, block, exchange);
            enter(state);
            blockIdx = b_idx, blockDim = b_dim, gridDim = g_dim;
            block_barrier = &block_bar;
            warp_barrier = warp_bars[state.warp].get();
            kernel();
            warp_barrier->arrive_and_drop();  // an exited thread no longer holds others up
            block_barrier->arrive_and_drop();
        });
    for (auto& th : threads) th.join();
    return true;  // a stuck block hangs here instead
}

#else  // fibers

// A fiber is entered once through its ucontext (which puts it on its own stack) and after that
// resumed and left with _setjmp/_longjmp, which switch stacks without the system call
// swapcontext makes to save the signal mask. Under a sanitizer every switch is a swapcontext,
// told to the sanitizer just before (ThreadSanitizer does not follow a _longjmp to a buffer saved
// on another fiber's stack; AddressSanitizer is told which stack it is on).
struct Fiber {
    ThreadState state;
    ucontext_t start;
    std::jmp_buf resume;
#ifdef CUDA_CPU_SANITIZED_FIBERS
    ucontext_t context;         // where it left off
#endif
#ifdef __SANITIZE_THREAD__
    void* tsan = nullptr;       // its ThreadSanitizer fiber
#endif
    bool started = false, done = false;
    int waits_at = 0;           // 0: free to run; 1: __syncthreads; 2: __syncwarp
    unsigned long phase = 0;    // which phase of that barrier it waits for to end
};

struct Barrier {  // counts the threads (not returned) that have arrived in the current phase
    unsigned members = 0, arrived = 0;
    unsigned long phase = 0;
    char sync[2];  // ThreadSanitizer: the addresses whose release and acquire order phase p's accesses (p % 2)
    void release_if_complete() {  // after an arrival or a member leaving: all there, so the phase ends
        if (members && arrived == members) {
            arrived = 0;
            ++phase;
        }
    }
};

struct BlockRun {
    std::vector<Fiber> fibers;
    Fiber* current = nullptr;
    std::jmp_buf scheduler;
#ifdef CUDA_CPU_SANITIZED_FIBERS
    ucontext_t scheduler_context;
    const void* scheduler_stack = nullptr;  // AddressSanitizer: the scheduler's stack, as the first switch gives it
    std::size_t scheduler_stack_bytes = 0;
#endif
#ifdef __SANITIZE_THREAD__
    void* tsan_scheduler = nullptr;
    char finished;  // every fiber releases here as it returns; the scheduler acquires it after the block
#endif
    Barrier block;
    std::vector<Barrier> warps;
    const std::function<void()>* kernel = nullptr;
};
inline BlockRun* block_run = nullptr;

#ifdef CUDA_CPU_SANITIZED_FIBERS
// From the scheduler to fiber f, and back here when it yields or returns.
inline void switch_to(BlockRun& run, Fiber& f) {
#ifdef __SANITIZE_THREAD__
    __tsan_switch_to_fiber(f.tsan, __tsan_switch_to_fiber_no_sync);  // a switch orders nothing
#endif
#ifdef __SANITIZE_ADDRESS__
    void* fake_stack = nullptr;
    __sanitizer_start_switch_fiber(&fake_stack, f.start.uc_stack.ss_sp, f.start.uc_stack.ss_size);
#endif
    const bool first = !f.started;
    f.started = true;
    swapcontext(&run.scheduler_context, first ? &f.start : &f.context);
#ifdef __SANITIZE_ADDRESS__
    __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
#endif
}

// From the running fiber back to the scheduler: `last` when it has returned (never resumed).
inline void switch_to_scheduler(BlockRun& run, Fiber& me, bool last) {
#ifdef __SANITIZE_THREAD__
    void* const scheduler = run.tsan_scheduler;
    if (last) __tsan_release(&run.finished);  // after its last read of the scheduler's data
    __tsan_switch_to_fiber(scheduler, __tsan_switch_to_fiber_no_sync);
#endif
#ifdef __SANITIZE_ADDRESS__
    void* fake_stack = nullptr;
    __sanitizer_start_switch_fiber(last ? nullptr : &fake_stack, run.scheduler_stack, run.scheduler_stack_bytes);
#endif
    swapcontext(&me.context, &run.scheduler_context);
#ifdef __SANITIZE_ADDRESS__
    __sanitizer_finish_switch_fiber(fake_stack, &run.scheduler_stack, &run.scheduler_stack_bytes);
#endif
}
#endif

inline void yield() {  // back to the scheduler; it resumes this fiber here later
#ifdef CUDA_CPU_SANITIZED_FIBERS
    switch_to_scheduler(*block_run, *block_run->current, false);
#else
    if (_setjmp(block_run->current->resume) == 0) _longjmp(block_run->scheduler, 1);
#endif
}

// What a barrier orders for ThreadSanitizer: the arrivals' accesses before the departures' (none
// while a shuffle's exchange asks it to ignore synchronisation).
inline void arrive(Barrier& bar, unsigned long phase) {
#ifdef __SANITIZE_THREAD__
    __tsan_release(&bar.sync[phase % 2]);
#endif
}
inline void depart(Barrier& bar, unsigned long phase) {
#ifdef __SANITIZE_THREAD__
    __tsan_acquire(&bar.sync[phase % 2]);  // phase p + 2 cannot start before this fiber has left p
#endif
}

inline void wait_at(Barrier& bar, int which) {
    EngineBookkeeping engine;
    Fiber& me = *block_run->current;
    const unsigned long phase = bar.phase;
    arrive(bar, phase);
    ++bar.arrived;
    bar.release_if_complete();
    if (bar.phase == phase) {  // the last to arrive goes straight on
        me.waits_at = which;
        me.phase = phase;
        yield();
    }
    depart(bar, phase);
}

inline void sync_block() { wait_at(block_run->block, 1); }
inline void sync_warp() { wait_at(block_run->warps[block_run->current->state.warp], 2); }

inline void fiber_main() {  // runs on the fiber's stack; never returns, it jumps back
    BlockRun& run = *block_run;
#ifdef __SANITIZE_ADDRESS__
    __sanitizer_finish_switch_fiber(nullptr, &run.scheduler_stack, &run.scheduler_stack_bytes);
#endif
    (*run.kernel)();
    Fiber* me;
    {
        EngineBookkeeping engine;
        me = run.current;
        me->done = true;
        --run.block.members;
        run.block.release_if_complete();
        Barrier& warp = run.warps[me->state.warp];
        --warp.members;
        warp.release_if_complete();
    }
#ifdef CUDA_CPU_SANITIZED_FIBERS
    switch_to_scheduler(run, *me, true);
#else
    _longjmp(run.scheduler, 1);
#endif
}

struct Stacks {  // one per thread of a block, with 64 KiB of guard pages below each: an overflow faults
    static constexpr std::size_t BYTES = 256 * 1024, GUARD = 64 * 1024;
    unsigned char* base = nullptr;
    std::size_t total = 0;
    explicit Stacks(unsigned n) : total(n * (BYTES + GUARD)) {
        void* p = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            std::perror("cuda_cpu: mmap of the fiber stacks");
            std::abort();
        }
        base = static_cast<unsigned char*>(p);
        for (unsigned i = 0; i < n; ++i)
            if (mprotect(base + i * (BYTES + GUARD), GUARD, PROT_NONE) != 0) {
                std::perror("cuda_cpu: mprotect of a guard page");
                std::abort();
            }
    }
    unsigned char* stack(unsigned i) const { return base + i * (BYTES + GUARD) + GUARD; }
    ~Stacks() { munmap(base, total); }
};

inline bool can_run(const Fiber& f, const BlockRun& run) {
    if (f.done) return false;
    if (f.waits_at == 1) return run.block.phase != f.phase;
    if (f.waits_at == 2) return run.warps[f.state.warp].phase != f.phase;
    return true;
}

inline bool run_block(dim3 block, unsigned n_threads, const std::function<void()>& kernel, const Stacks& stacks) {
    EngineBookkeeping engine;  // the scheduler runs no kernel code
    const unsigned n_warps = (n_threads + 31) / 32;
    std::vector<unsigned char> exchange(32 * SLOT * n_warps);
    BlockRun run;
    run.kernel = &kernel;
    run.fibers.resize(n_threads);
    run.block.members = n_threads;
    run.warps.resize(n_warps);
    for (unsigned w = 0; w < n_warps; ++w) run.warps[w].members = warp_members(n_threads, w);
    block_run = &run;
#ifdef __SANITIZE_THREAD__
    run.tsan_scheduler = __tsan_get_current_fiber();
#endif
    for (unsigned t = 0; t < n_threads; ++t) {
        Fiber& f = run.fibers[t];
        f.state = thread_state(t, block, exchange);
        getcontext(&f.start);
        f.start.uc_stack.ss_sp = stacks.stack(t);
        f.start.uc_stack.ss_size = Stacks::BYTES;
        f.start.uc_link = nullptr;
        makecontext(&f.start, fiber_main, 0);
#ifdef __SANITIZE_THREAD__
        f.tsan = __tsan_create_fiber(0);  // after the writes above: its creation orders them first
#endif
    }
    // Always the lowest-numbered thread that may go on: warp 0 runs ahead of the others up to the
    // next __syncthreads (a warp of a GPU may run ahead as far), so a kernel that reads what another
    // warp writes without a barrier between them reads it unwritten and goes wrong.
    for (;;) {
        Fiber* next = nullptr;
        for (Fiber& f : run.fibers)
            if (can_run(f, run)) {
                next = &f;
                break;
            }
        if (next == nullptr) break;
        Fiber& f = *next;
        f.waits_at = 0;
        run.current = &f;
        enter(f.state);
#ifdef CUDA_CPU_SANITIZED_FIBERS
        switch_to(run, f);
#else
        if (_setjmp(run.scheduler) == 0) {
            if (!f.started) {
                f.started = true;
                ucontext_t here;
                swapcontext(&here, &f.start);
            } else {
                _longjmp(f.resume, 1);
            }
        }
#endif
    }
#ifdef __SANITIZE_THREAD__
    __tsan_acquire(&run.finished);  // the next block's threads come after this one's, as the shared arrays' reuse needs
    for (Fiber& f : run.fibers)
        if (f.done) __tsan_destroy_fiber(f.tsan);  // a stuck one is left as it is, as its stack is
#endif
    const auto stuck = std::count_if(run.fibers.begin(), run.fibers.end(), [](const Fiber& f) { return !f.done; });
    if (stuck)  // the stuck fibers are left as they are: their stacks go with the launch
        std::fprintf(stderr, "cuda_cpu: block (%u, %u, %u) is stuck: %ld threads wait at barriers the others "
                     "never reach (a __syncthreads or __syncwarp that only some threads run)\n",
                     blockIdx.x, blockIdx.y, blockIdx.z, long(stuck));
    block_run = nullptr;
    self = nullptr;
    return stuck == 0;
}

#endif

// Launch kernel() on grid × block threads with `shared_bytes` of dynamic shared memory.
// Returns 0, or 1 where a block got stuck at its barriers (and the launch stopped there).
inline int launch(dim3 grid, dim3 block, std::size_t shared_bytes, const std::function<void()>& kernel) {
    const unsigned n_threads = block.x * block.y * block.z;
    SharedBuffer shared(std::max<std::size_t>(shared_bytes, 16));
    dynamic_shared = shared.p;
#ifndef CUDA_CPU_THREADS
    Stacks stacks(n_threads);
#endif
    blockDim = block;
    gridDim = grid;
    for (unsigned bz = 0; bz < grid.z; ++bz)
        for (unsigned by = 0; by < grid.y; ++by)
            for (unsigned bx = 0; bx < grid.x; ++bx) {
                std::memset(shared.p, 0xFF, shared.bytes);
                blockIdx = dim3(bx, by, bz);
#ifdef CUDA_CPU_THREADS
                const bool finished = run_block(block, n_threads, kernel);
#else
                const bool finished = run_block(block, n_threads, kernel, stacks);
#endif
                if (!finished) {
                    dynamic_shared = nullptr;
                    return 1;
                }
            }
    dynamic_shared = nullptr;
    return 0;
}

// Converts a void* argument to whatever pointer type the kernel's parameter has.
struct AnyPtr {
    void* p;
    template <class T> operator T*() const { return static_cast<T*>(p); }
};

}  // namespace cuda_cpu
