// The MLP's second half: the SwiGLU gate, then the down projection added to the residual stream:
//
//   act = silu(g) ⊙ u,   silu(g) = g / (1 + e^{−g}),   [g | u] = gu   (the gate and up projections)
//   x += W_down · act,   x_r += Σ_j W[r, j] · act_j
//
//   grid  = (⌈n_rows / 8⌉,)   8 output rows a block
//   block = (256,)            8 warps; warp w computes row r = 8·blockIdx.x + w
//   dynamic shared memory     d_ff floats: act, computed once per block by all its threads
//
// gu [2·d_ff] (the gate's d_ff, then the up's); W [n_rows, d_ff] row-major; x [n_rows].

#include "decode_common.cuh"

extern "C" __global__ void decode_swiglu_matvec_residual(const float* gu, const float* W, float* x, const int* state,
                                                         int n_rows, int d_ff)
{
    if (state[DONE]) return;
    extern __shared__ float act[];  // [d_ff]
    for (int j = threadIdx.x; j < d_ff; j += blockDim.x) {
        const float g = gu[j];
        act[j] = g / (1.f + expf(-g)) * gu[d_ff + j];  // silu(g) · u
    }
    __syncthreads();  // act is complete: every warp reads all of it

    const int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (r >= n_rows) return;  // after the block's only barrier: the last block's spare warps
    const float* row = W + (size_t)r * d_ff;
    float acc = 0.f;
    for (int j = lane; j < d_ff; j += 32) acc += row[j] * act[j];
    acc = warp_sum(acc);
    if (lane == 0) x[r] += acc;
}
