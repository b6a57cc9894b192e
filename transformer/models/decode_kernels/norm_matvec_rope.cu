// The attention's input projection, RoPE and the KV-cache write, one kernel:
//
//   y = W_qkv · (γ ⊙ x / rms(x))                      [(h + 2·h_kv)·d_h] = [q heads | k heads | v heads]
//   pair i of a head, (a, b) = (y_{2i}, y_{2i+1}),  c = cos θ_{pos,i},  s = sin θ_{pos,i}:
//     RoPE: (a·c − b·s, a·s + b·c)                   (core.positions.apply_rope_interleaved)
//   q = RoPE(q) · q_scale   (q_scale = 1/√d_h, folded in here once instead of into every score)
//   K[kvh, pos] = RoPE(k),   V[kvh, pos] = v          (the cache write, pos = state[POS])
//
//   grid  = (⌈rows / 8⌉,)   8 output rows a block: 4 pairs
//   block = (128,)          4 warps; warp w computes rows 2p and 2p + 1, p = 4·blockIdx.x + w
//
// A RoPE pair is two neighbouring rows of W_qkv (the interleaved layout; decode_plan.device_matrices
// reorders a rotate-half model's columns so), so the warp that computes both turns them at once: no
// kernel of its own, no launch, no trip of y through memory. Σ x² as in norm_matvec.cu: each block
// computes it itself. The warp's lanes read rows 2p and 2p + 1 at j = lane, lane + 32, … and sum each
// by shuffles; lane 0 turns the pair and writes it where it belongs.
// cos, sin [max_len, d_h/2]; q [h·d_h]; K, V [h_kv, max_len, d_h]: one layer's cache. d_h even.

#include "decode_common.cuh"

extern "C" __global__ void decode_norm_matvec_rope(const float* x, const float* gamma, const float* W,
                                                   const float* cos, const float* sin, float* q, float* K, float* V,
                                                   const int* state, int h, int h_kv, int d_h, int max_len, int d_in,
                                                   float eps, float q_scale)
{
    if (state[DONE]) return;
    __shared__ float warp_sums[32];  // Σ x² of each warp's share of x
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, n_warps = blockDim.x / 32;

    const float inv = block_inv_rms(x, d_in, eps, warp_sums);  // 1 / rms(x), by the whole block

    // rows 2p, 2p + 1: y = inv · Σ_j W[r, j] γ_j x_j, a warp per pair
    const int p = blockIdx.x * n_warps + warp, half = d_h / 2;
    if (p >= (h + 2 * h_kv) * half) return;  // after the block's only barrier: the last block's spare warps
    const float *row_a = W + (size_t)(2 * p) * d_in, *row_b = row_a + d_in;
    float acc_a = 0.f, acc_b = 0.f;
    for (int j = lane; j < d_in; j += 32) {
        const float gx = gamma[j] * x[j];
        acc_a += row_a[j] * gx;
        acc_b += row_b[j] * gx;
    }
    acc_a = warp_sum(acc_a);
    acc_b = warp_sum(acc_b);
    if (lane != 0) return;
    const float a = inv * acc_a, b = inv * acc_b;
    const int head = p / half, i = p % half, pos = state[POS];  // pair i of head `head`: q, then k, then v heads
    if (head >= h + h_kv) {  // a value: into the cache as it is
        float* slot = V + ((size_t)(head - h - h_kv) * max_len + pos) * d_h;  // V[kvh, pos]
        slot[2 * i] = a;
        slot[2 * i + 1] = b;
        return;
    }
    const float c = cos[(size_t)pos * half + i], s = sin[(size_t)pos * half + i];
    const float re = a * c - b * s, im = a * s + b * c;
    if (head < h) {
        q[head * d_h + 2 * i] = re * q_scale;
        q[head * d_h + 2 * i + 1] = im * q_scale;
    } else {
        float* slot = K + ((size_t)(head - h) * max_len + pos) * d_h;  // K[kvh, pos]
        slot[2 * i] = re;
        slot[2 * i + 1] = im;
    }
}
