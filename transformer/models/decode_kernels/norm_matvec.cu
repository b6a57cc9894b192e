// RMSNorm then a matrix–vector product, one kernel (the norm costs d_in reads; a kernel of its own
// would cost a launch):
//
//   y = W · (γ ⊙ x / rms(x)),   rms(x) = √(Σ_j x_j² / d_in + ε)
//   y_r = inv · Σ_j W[r, j] · γ_j · x_j,   inv = 1 / rms(x)
//
//   grid  = (⌈n_rows / 8⌉,)   8 output rows a block
//   block = (256,)            8 warps; warp w computes row r = 8·blockIdx.x + w
//
// Each block computes Σ x² itself (every thread a strided part, each warp a shuffle sum, the 8
// warps' sums through shared memory): x is small and read from cache, and no other kernel or grid-wide
// barrier is needed. Then a warp's lanes read row r at j = lane, lane + 32, … (consecutive addresses)
// and sum by shuffles. W [n_rows, d_in] row-major (decode_plan.device_matrices); any d_in.

#include "decode_common.cuh"

extern "C" __global__ void decode_norm_matvec(const float* x, const float* gamma, const float* W, float* y,
                                              const int* state, int n_rows, int d_in, float eps)
{
    if (state[DONE]) return;
    __shared__ float warp_sums[32];  // Σ x² of each warp's share of x
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, n_warps = blockDim.x / 32;

    const float inv = block_inv_rms(x, d_in, eps, warp_sums);  // 1 / rms(x), by the whole block

    // y_r = inv · Σ_j W[r, j] γ_j x_j, a warp per row
    const int r = blockIdx.x * n_warps + warp;
    if (r >= n_rows) return;  // after the block's only barrier: the last block's spare warps
    const float* row = W + (size_t)r * d_in;
    float acc = 0.f;
    for (int j = lane; j < d_in; j += 32) acc += row[j] * gamma[j] * x[j];
    acc = warp_sum(acc);
    if (lane == 0) y[r] = inv * acc;
}
