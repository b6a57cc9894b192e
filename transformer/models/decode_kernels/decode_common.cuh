// What every kernel of the decode step shares: the device state's indices, warp reductions, the
// random stream of on-device sampling (decode_plan.py holds the same names and the same bits in NumPy).
#pragma once
#ifndef INFINITY  // NVRTC, which CuPy compiles with, has no <math.h>: +∞ from its bits
#define INFINITY __int_as_float(0x7f800000)
#endif

// state[4] int32, read and advanced by the kernels themselves, so that one CUDA graph serves every step
#define TOK 0   // the input id of this step
#define POS 1   // its position: the KV cache holds positions 0 … POS − 1 before the step
#define STEP 2  // which new token this step samples (out[STEP])
#define DONE 3  // 1 once the run is over: every kernel returns at once

#define FULL_MASK 0xffffffffu  // all 32 lanes take part in a shuffle

// Σ over the 32 lanes of a warp, the result on every lane (a butterfly: 5 shuffles, no shared memory).
__device__ __forceinline__ float warp_sum(float x) {
    for (int lane_mask = 16; lane_mask > 0; lane_mask >>= 1) x += __shfl_xor_sync(FULL_MASK, x, lane_mask);
    return x;
}

// max over the 32 lanes of a warp, the result on every lane.
__device__ __forceinline__ float warp_max(float x) {
    for (int lane_mask = 16; lane_mask > 0; lane_mask >>= 1) x = fmaxf(x, __shfl_xor_sync(FULL_MASK, x, lane_mask));
    return x;
}

// Chris Wellons' lowbias32: every output bit depends on every input bit (unsigned arithmetic wraps, as in NumPy).
__device__ __forceinline__ unsigned int lowbias32(unsigned int x) {
    x ^= x >> 16;
    x *= 0x7FEB352Du;
    x ^= x >> 15;
    x *= 0x846CA68Bu;
    x ^= x >> 16;
    return x;
}

// u(seed, step, i) in (0, 1): h = lowbias32(lowbias32(lowbias32(seed ^ 0x9E3779B9) ^ step) ^ i),
// u = ((h >> 9) + 0.5) · 2⁻²³, exact in float32 (decode_plan.counter_uniforms).
// The seed is mixed first because lowbias32(0) = 0: seed 0 must not start the stream at 0.
__device__ __forceinline__ float counter_uniform(unsigned int seed, unsigned int step, unsigned int i) {
    const unsigned int h = lowbias32(lowbias32(lowbias32(seed ^ 0x9E3779B9u) ^ step) ^ i);
    return ((float)(h >> 9) + 0.5f) * 1.1920928955078125e-07f;  // 2⁻²³
}

// 1 / rms(x) = 1 / √(Σ_j x_j² / d_in + ε), computed by the whole block (every thread a strided part, each
// warp a shuffle sum, the warps' sums through shared memory), the same on every thread. Its one
// __syncthreads needs every thread of the block to call it.
__device__ __forceinline__ float block_inv_rms(const float* x, int d_in, float eps, float* warp_sums) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, n_warps = blockDim.x / 32;
    float sq = 0.f;
    for (int j = threadIdx.x; j < d_in; j += blockDim.x) sq += x[j] * x[j];
    sq = warp_sum(sq);
    if (lane == 0) warp_sums[warp] = sq;
    __syncthreads();  // every warp's sum is in shared memory
    float sum_sq = 0.f;
    for (int w = 0; w < n_warps; ++w) sum_sq += warp_sums[w];
    return 1.f / sqrtf(sum_sq / d_in + eps);
}
