// A matrix–vector product added to the residual stream (the attention's output projection W_o):
//
//   x += W · a,   x_r += Σ_j W[r, j] · a_j
//
//   grid  = (⌈n_rows / 8⌉,)   8 output rows a block
//   block = (256,)            8 warps; warp w computes row r = 8·blockIdx.x + w
//
// A warp's lanes read row r at j = lane, lane + 32, … (consecutive addresses) and sum by shuffles.
// W [n_rows, d_in] row-major; a [d_in]; x [n_rows], read and written by lane 0 of row r's warp only.

#include "decode_common.cuh"

extern "C" __global__ void decode_matvec_residual(const float* a, const float* W, float* x, const int* state,
                                                  int n_rows, int d_in)
{
    if (state[DONE]) return;
    const int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (r >= n_rows) return;  // the last block's spare warps (no barrier follows)
    const float* row = W + (size_t)r * d_in;
    float acc = 0.f;
    for (int j = lane; j < d_in; j += 32) acc += row[j] * a[j];
    acc = warp_sum(acc);
    if (lane == 0) x[r] += acc;
}
