// Sampling on the device: each block finds the best of its part of the vocabulary, then one block
// finds the best of the blocks and advances the state. With top-k or top-p, a kernel before them
// finds the kept set first, as a threshold on the logits.
//
//   score_i = logits_i                                          greedy (inv_temperature = 0)
//   score_i = logits_i / T + g_i,   g_i = −log(−log u_i)        Gumbel-max: argmax_i score_i is a draw
//                                                               from softmax(logits / T)
//   score_i = −∞ for a token outside the kept set               a draw from softmax over the kept set:
//                                                               the host's filter_logits, then softmax
//   u_i = counter_uniform(seed, state[STEP], i): a pure function of three counters (decode_common.cuh)
//   tok = argmax_i score_i, ties to the lowest index (as np.argmax)
//
// decode_sample_filter   grid = (1,), block = (FILTER_THREADS,): bounds = (threshold, last), the kept set
//                        being {i : logits_i > threshold, or logits_i = threshold and i ≤ last}.
// decode_sample_blocks   grid = (n_blocks,), block = (256,): block b takes [b·chunk, min(v, (b+1)·chunk)),
//                        chunk = ⌈v / n_blocks⌉, and writes its best (best_v[b], best_i[b]); an empty
//                        block writes (−∞, v). bounds = NULL: every token is kept.
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

extern "C" __global__ void decode_sample_blocks(const float* logits, const float* bounds, float* best_v, int* best_i,
                                                const int* state, int v, float inv_temperature, unsigned int seed)
{
    if (state[DONE]) return;
    __shared__ float warp_v[32];
    __shared__ int warp_i[32];
    const int n_blocks = gridDim.x, chunk = (v + n_blocks - 1) / n_blocks;
    const int lo = blockIdx.x * chunk, hi = min(v, lo + chunk);
    const unsigned int step = state[STEP];
    const float threshold = bounds ? bounds[0] : -INFINITY;  // no bounds: every logit is kept
    const int last = bounds ? (int)bounds[1] : v;
    float best = -INFINITY;
    int arg = v;  // an empty block's answer
    for (int i = lo + threadIdx.x; i < hi; i += blockDim.x) {
        float score = logits[i];
        if (inv_temperature != 0.f) score = score * inv_temperature - logf(-logf(counter_uniform(seed, step, i)));
        if (!(logits[i] > threshold || (logits[i] == threshold && i <= last))) score = -INFINITY;  // filtered out
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

// ---------------------------------------------------------------- top-k and top-p: the kept set

#define FILTER_THREADS 512  // decode_sample_filter's block: its tree holds 15 × 512 floats (30 KiB of shared memory)
#define CANDIDATES 15       // thresholds one pass of select_key tries: 4 bits of the key a pass, 8 passes for 32
#ifndef CAPACITY
#define CAPACITY 2048       // candidates in shared memory (16 KiB; with the tree, 46 of a block's static 48)
#endif

// The order key of a float: a uint32 whose order is the floats' (−∞ < … < 0 < … < +∞). A positive gets its
// sign bit set, a negative every bit flipped; x + 0 makes −0 into +0 first, so the two tie as floats do.
__device__ __forceinline__ unsigned int order_key(float x) {
    const unsigned int bits = __float_as_uint(x + 0.f);
    return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

// The float whose order key this is.
__device__ __forceinline__ float key_value(unsigned int key) {
    return __uint_as_float((key & 0x80000000u) ? (key & 0x7fffffffu) : ~key);
}

// Each thread's acc[0 … N) reduced over the block by op (+ or max), the totals on every thread: a tree in
// shared memory (log₂ 512 = 9 levels) that adds in the same order at every launch, so the same bits each time.
template <int N, class Op>
__device__ __forceinline__ void block_reduce(float (&acc)[N], float (*tree)[FILTER_THREADS], Op op) {
#pragma unroll  // acc stays in registers: every index is known at compile time
    for (int j = 0; j < N; ++j) tree[j][threadIdx.x] = acc[j];
    for (int half = FILTER_THREADS / 2; half > 0; half >>= 1) {
        __syncthreads();  // the level below is written
        if (threadIdx.x < half)
            for (int j = 0; j < N; ++j) tree[j][threadIdx.x] = op(tree[j][threadIdx.x], tree[j][threadIdx.x + half]);
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < N; ++j) acc[j] = tree[j][0];
    __syncthreads();  // every thread has its totals before the tree is written again
}

// The largest key K with G(K) = Σ_{i : key(i) ≥ K} weight(i) ≥ target (G(0) ≥ target), 4 bits a pass from the
// top: a pass sums G at the candidates prefix + d·2^shift, d = 1 … 15, and keeps the largest d whose G still
// reaches the target (G falls as K grows). A token below the first candidate adds to none: no weight computed.
template <class Key, class Weight>
__device__ unsigned int select_key(int v, float target, Key key, Weight weight, float (*tree)[FILTER_THREADS]) {
    unsigned int prefix = 0;
    for (int shift = 28; shift >= 0; shift -= 4) {
        float acc[CANDIDATES] = {};
#pragma unroll 4  // four loads in flight: a pass is ~100 loads a thread, each waiting on L2 otherwise
        for (int i = threadIdx.x; i < v; i += FILTER_THREADS) {
            const unsigned int k = key(i);
            if (k < prefix + (1u << shift)) continue;
            const float w = weight(i);
#pragma unroll
            for (int d = 1; d <= CANDIDATES; ++d) acc[d - 1] += k >= prefix + ((unsigned int)d << shift) ? w : 0.f;
        }
        block_reduce(acc, tree, [](float a, float b) { return a + b; });
        int digit = 0;
#pragma unroll
        for (int d = 1; d <= CANDIDATES; ++d)
            if (acc[d - 1] >= target) digit = d;
        prefix += (unsigned int)digit << shift;
    }
    return prefix;
}

// The first-tied-token search of top-p and the mass counts, over n tokens given by their logit x(c) and id
// id(c) (the vocabulary, or the candidates in shared memory): the threshold key K, the largest with
// G(K) = Σ_{key_c ≥ K} w_c ≥ target, and `last` (v: every token at K kept). w(c) is 0 outside the top-k.
template <class X, class Id, class W>
__device__ void top_p_cut(int n, int v, float target, float x_max, float inv_temperature, X x, Id id, W w,
                          float (*tree)[FILTER_THREADS], unsigned int& p_key, int& last) {
    const auto plus = [](float a, float b) { return a + b; };
    const auto key = [&](int c) { return order_key(x(c)); };
    p_key = select_key(n, target, key, w, tree);
    float above_tied[2] = {0.f, 0.f};  // S = the mass above the threshold, n = the tokens at it
#pragma unroll 4
    for (int c = threadIdx.x; c < n; c += FILTER_THREADS) {
        above_tied[0] += key(c) > p_key ? w(c) : 0.f;
        above_tied[1] += key(c) == p_key ? 1.f : 0.f;
    }
    block_reduce(above_tied, tree, plus);
    const float w_at = expf((key_value(p_key) - x_max) * inv_temperature);
    const float keep = fminf(ceilf((target - above_tied[0]) / w_at), above_tied[1]);
    last = v;
    if (keep < above_tied[1])  // the keep-th tied token in vocabulary order: the keep-th largest key ~id
        last = (int)~select_key(n, keep, [&](int c) { return ~(unsigned int)id(c); },
                                [&](int c) { return key(c) == p_key ? 1.f : 0.f; }, tree);
}

// Each thread's count, and the sum of the counts of the threads before it (and of all), over the block:
// a Hillis–Steele scan in shared memory (counts are exact in float32 up to 2²⁴).
__device__ __forceinline__ int block_offset(int count, int& total, float (*tree)[FILTER_THREADS]) {
    tree[0][threadIdx.x] = (float)count;
    for (int step = 1; step < FILTER_THREADS; step <<= 1) {
        __syncthreads();  // the previous step is written
        const float before = threadIdx.x >= step ? tree[0][threadIdx.x - step] : 0.f;
        __syncthreads();  // every thread has read it
        tree[0][threadIdx.x] += before;
    }
    __syncthreads();
    total = (int)tree[0][FILTER_THREADS - 1];
    const int offset = (int)tree[0][threadIdx.x] - count;
    __syncthreads();  // every thread has its offset before the tree is written again
    return offset;
}

// The tokens i with keep(i), in vocabulary order, into shared memory (cand_x their logits, cand_i their ids):
// a count, a scan over the block, a copy, each thread its own tokens, so the same order at every launch.
// Returns how many, or −1 where more than CAPACITY (nothing copied).
template <class Keep>
__device__ int gather_candidates(const float* logits, int v, Keep keep, float* cand_x, int* cand_i,
                                 float (*tree)[FILTER_THREADS]) {
    int count = 0;
#pragma unroll 4
    for (int i = threadIdx.x; i < v; i += FILTER_THREADS) count += keep(i);
    int n_cand;
    int at = block_offset(count, n_cand, tree);  // its barriers: every thread is done with what cand_i held
    if (n_cand > CAPACITY) return -1;
    for (int i = threadIdx.x; i < v; i += FILTER_THREADS)
        if (keep(i)) {
            cand_x[at] = logits[i];
            cand_i[at++] = i;
        }
    __syncthreads();  // every candidate is in
    return n_cand;
}

// Top-k's candidates (k ≤ FILTER_THREADS) in shared memory, in vocabulary order: the tokens whose key is at
// least the k-th largest of the threads' own largest keys. k threads each hold a token at or above that
// bound, so the k largest tokens are among them, and every token tied with the k-th. Returns how many (for an
// LM's logits about k), or −1 where more than CAPACITY (many ties at the bound): the vocabulary is searched.
// x_max: the largest logit (fmaxf's: NaN left out), from the same pass.
__device__ int top_k_candidates(const float* logits, int v, int top_k, float* cand_x, int* cand_i,
                                float (*tree)[FILTER_THREADS], float& x_max) {
    unsigned int own_key = 0;  // below every float's key: a thread without tokens counts for none
    float own_max[1] = {-INFINITY};
#pragma unroll 4
    for (int i = threadIdx.x; i < v; i += FILTER_THREADS) {
        own_key = max(own_key, order_key(logits[i]));
        own_max[0] = fmaxf(own_max[0], logits[i]);
    }
    cand_i[threadIdx.x] = (int)own_key;  // CAPACITY ≥ FILTER_THREADS: the candidates' place, not yet in use
    block_reduce(own_max, tree, [](float a, float b) { return fmaxf(a, b); });  // its barriers: cand_i is in
    x_max = own_max[0];
    const unsigned int bound = select_key(FILTER_THREADS, (float)top_k, [&](int t) { return (unsigned int)cand_i[t]; },
                                          [](int) { return 1.f; }, tree);
    return gather_candidates(logits, v, [&](int i) { return order_key(logits[i]) >= bound; }, cand_x, cand_i, tree);
}

// Both searches over top-k's candidates (n of them, top_k_candidates): every token either filter weighs is one.
__device__ void cut_over_top_k_candidates(int n, int v, int top_k, float top_p, float x_max, float inv_temperature,
                                          const float* cand_x, const int* cand_i, float (*tree)[FILTER_THREADS],
                                          unsigned int& p_key, int& last) {
    const auto cand_key = [&](int c) { return order_key(cand_x[c]); };
    const unsigned int k_key = select_key(n, (float)top_k, cand_key, [](int) { return 1.f; }, tree);
    p_key = k_key;
    last = v;
    if (top_p < 1.f) {
        const auto w = [&](int c) {  // w_c, 0 outside the top-k
            return cand_key(c) >= k_key ? expf((cand_x[c] - x_max) * inv_temperature) : 0.f;
        };
        float z[1] = {0.f};
        for (int c = threadIdx.x; c < n; c += FILTER_THREADS) z[0] += w(c);
        block_reduce(z, tree, [](float a, float b) { return a + b; });
        top_p_cut(n, v, top_p * z[0], x_max, inv_temperature, [&](int c) { return cand_x[c]; },
                  [&](int c) { return cand_i[c]; }, w, tree, p_key, last);
    }
}

// Top-k over the vocabulary (top_k = 0: off), then top-p over top-p's candidates where it can.
__device__ void cut_over_vocabulary(const float* logits, int v, int top_k, float top_p, float inv_temperature,
                                    float* cand_x, int* cand_i, float (*tree)[FILTER_THREADS],
                                    unsigned int& p_key, int& last) {
    const auto plus = [](float a, float b) { return a + b; };
    const auto key = [&](int i) { return order_key(logits[i]); };
    const unsigned int k_key = top_k  // top-k: weight 1, the count at or above K reaches k
        ? select_key(v, (float)top_k, key, [](int) { return 1.f; }, tree) : order_key(-INFINITY);
    p_key = k_key;
    last = v;
    if (!(top_p < 1.f)) return;  // top-p off
    float x_max[1] = {-INFINITY};
#pragma unroll 4
    for (int i = threadIdx.x; i < v; i += FILTER_THREADS) x_max[0] = fmaxf(x_max[0], logits[i]);
    block_reduce(x_max, tree, [](float a, float b) { return fmaxf(a, b); });
    const auto weight = [&](int i) {  // w_i, 0 outside the top-k
        return key(i) >= k_key ? expf((logits[i] - x_max[0]) * inv_temperature) : 0.f;
    };
    float z[1] = {0.f};
#pragma unroll 4
    for (int i = threadIdx.x; i < v; i += FILTER_THREADS) z[0] += weight(i);
    block_reduce(z, tree, plus);
    const float target = top_p * z[0], tau = (1.f - top_p) * z[0] / (2.f * v);

    // The candidates, and their mass checked.
    const int n_cand = gather_candidates(logits, v, [&](int i) { return weight(i) >= tau; }, cand_x, cand_i, tree);
    float mass[1] = {0.f};
    if (n_cand >= 0) {
        for (int c = threadIdx.x; c < n_cand; c += FILTER_THREADS)
            mass[0] += expf((cand_x[c] - x_max[0]) * inv_temperature);
        block_reduce(mass, tree, plus);
    }
    if (n_cand >= 0 && mass[0] >= target)
        top_p_cut(n_cand, v, target, x_max[0], inv_temperature, [&](int c) { return cand_x[c]; },
                  [&](int c) { return cand_i[c]; },
                  [&](int c) { return expf((cand_x[c] - x_max[0]) * inv_temperature); }, tree, p_key, last);
    else
        top_p_cut(v, v, target, x_max[0], inv_temperature, [&](int i) { return logits[i]; },
                  [](int i) { return i; }, weight, tree, p_key, last);
}

// The kept set of top-k, then top-p, as the host's filter_logits keeps it, on the logits' order keys:
//   top-k   the k-th largest key; every token at or above it is kept (ties at it all kept). With k ≤ FILTER_THREADS
//           it is searched over top-k's candidates (top_k_candidates), and so is top-p after it: they hold every
//           token top-p weighs. 3 passes over the vocabulary in all; over the vocabulary, 8 passes for top-k alone.
//   top-p   over those, w_i = e^{(x_i − max)·inv_temperature} and Z = Σ w_i. Token j is kept iff the mass of the
//           tokens before it (falling logit, ties in vocabulary order) is < top_p·Z: the threshold is the largest
//           key with G(key) = Σ_{key_i ≥ key} w_i ≥ top_p·Z, and of its n tied tokens (w each, S the mass above
//           them) the first ⌈(top_p·Z − S) / w⌉ in vocabulary order are kept, the last of them `last`.
//           Otherwise the search runs over top-p's own candidates in shared memory where it can: the tokens
//           with w_i ≥ τ = (1 − top_p)·Z / (2v). The others weigh less than (1 − top_p)·Z / 2 together, so the
//           candidates hold more than top_p·Z (checked on their sum) and every token at or above the
//           threshold: G is the same over them. Found in the vocabulary order (a count, a scan, a copy), so
//           the sums run in the same order at every launch. More than CAPACITY of them (a flat distribution),
//           or a sum short of the target (rounding, top_p within ~1e-6 of 1): the search runs over the
//           vocabulary.
// bounds = (the threshold's logit, last); top_k = 0 (or ≥ v) and top_p = 1 are off; inv_temperature > 0.
extern "C" __global__ void decode_sample_filter(const float* logits, float* bounds, const int* state, int v,
                                                float inv_temperature, int top_k, float top_p)
{
    if (state[DONE]) return;
    __shared__ float tree[CANDIDATES][FILTER_THREADS];
    __shared__ float cand_x[CAPACITY];  // candidates' logits and ids, in vocabulary order
    __shared__ int cand_i[CAPACITY];
    if (!(0 < top_k && top_k < v)) top_k = 0;  // off
    unsigned int p_key;
    int last;
    int n_cand = -1;  // −1: top-k (if on) over the vocabulary
    float x_max;
#if CAPACITY >= FILTER_THREADS
    if (0 < top_k && top_k <= FILTER_THREADS)
        n_cand = top_k_candidates(logits, v, top_k, cand_x, cand_i, tree, x_max);
#endif
    if (n_cand >= 0)
        cut_over_top_k_candidates(n_cand, v, top_k, top_p, x_max, inv_temperature, cand_x, cand_i, tree, p_key, last);
    else
        cut_over_vocabulary(logits, v, top_k, top_p, inv_temperature, cand_x, cand_i, tree, p_key, last);
    if (threadIdx.x == 0) {
        bounds[0] = key_value(p_key);
        bounds[1] = (float)last;
    }
}
