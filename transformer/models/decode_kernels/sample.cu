// Sampling on the device, in two kernels: each block finds the best of its part of the vocabulary,
// then one block finds the best of the blocks and advances the state.
//
//   score_i = logits_i                                          greedy (inv_temperature = 0)
//   score_i = logits_i / T + g_i,   g_i = −log(−log u_i)        Gumbel-max: argmax_i score_i is a draw
//                                                               from softmax(logits / T)
//   u_i = counter_uniform(seed, state[STEP], i): a pure function of three counters (decode_common.cuh)
//   tok = argmax_i score_i, ties to the lowest index (as np.argmax)
//
// decode_sample_blocks   grid = (n_blocks,), block = (256,): block b takes [b·chunk, min(v, (b+1)·chunk)),
//                        chunk = ⌈v / n_blocks⌉, and writes its best (best_v[b], best_i[b]); an empty
//                        block writes (−∞, v).
// decode_sample_finish   grid = (1,), block = (256,): tok = the best of the n_blocks; out[step] = tok;
//                        tok, pos, step advance; done = (tok == eos) or (step ≥ max_new)  (eos = −1: none).

#include "decode_common.cuh"

// (v, i) is better than (best_v, best_i): a larger value, or the same one at a lower index
__device__ __forceinline__ bool better(float v, int i, float best_v, int best_i) {
    return v > best_v || (v == best_v && i < best_i);
}

// The best (value, index) of each thread of the block, in place: the block's best ends on thread 0.
__device__ __forceinline__ void block_best(float& v, int& i, float* shared_v, int* shared_i) {
    for (int lane_mask = 16; lane_mask > 0; lane_mask >>= 1) {  // the warp's best, on every lane
        const float other_v = __shfl_xor_sync(FULL_MASK, v, lane_mask);
        const int other_i = __shfl_xor_sync(FULL_MASK, i, lane_mask);
        if (better(other_v, other_i, v, i)) {
            v = other_v;
            i = other_i;
        }
    }
    if (threadIdx.x % 32 == 0) {
        shared_v[threadIdx.x / 32] = v;
        shared_i[threadIdx.x / 32] = i;
    }
    __syncthreads();  // every warp's best is in shared memory
    const int n_warps = blockDim.x / 32;
    for (int w = 1; threadIdx.x == 0 && w < n_warps; ++w)
        if (better(shared_v[w], shared_i[w], v, i)) {
            v = shared_v[w];
            i = shared_i[w];
        }
}

extern "C" __global__ void decode_sample_blocks(const float* logits, float* best_v, int* best_i, const int* state,
                                                int v, float inv_temperature, unsigned int seed)
{
    if (state[DONE]) return;
    __shared__ float warp_v[32];
    __shared__ int warp_i[32];
    const int n_blocks = gridDim.x, chunk = (v + n_blocks - 1) / n_blocks;
    const int lo = blockIdx.x * chunk, hi = min(v, lo + chunk);
    const unsigned int step = state[STEP];
    float best = -INFINITY;
    int arg = v;  // an empty block's answer
    for (int i = lo + threadIdx.x; i < hi; i += blockDim.x) {
        float score = logits[i];
        if (inv_temperature != 0.f) score = score * inv_temperature - logf(-logf(counter_uniform(seed, step, i)));
        if (better(score, i, best, arg)) {
            best = score;
            arg = i;
        }
    }
    block_best(best, arg, warp_v, warp_i);
    if (threadIdx.x == 0) {
        best_v[blockIdx.x] = best;
        best_i[blockIdx.x] = arg;
    }
}

extern "C" __global__ void decode_sample_finish(const float* best_v, const int* best_i, int* state, int* out,
                                                int n_blocks, int max_new, int eos)
{
    if (state[DONE]) return;
    __shared__ float warp_v[32];
    __shared__ int warp_i[32];
    float best = -INFINITY;
    int tok = 0x7fffffff;  // above every id
    for (int b = threadIdx.x; b < n_blocks; b += blockDim.x)
        if (better(best_v[b], best_i[b], best, tok)) {
            best = best_v[b];
            tok = best_i[b];
        }
    block_best(best, tok, warp_v, warp_i);  // its barrier: every thread has read state[DONE] before it changes
    if (threadIdx.x != 0) return;
    const int step = state[STEP];
    out[step] = tok;
    state[TOK] = tok;
    state[POS] += 1;
    state[STEP] = step + 1;
    state[DONE] = (tok == eos) || (step + 1 >= max_new);
}
