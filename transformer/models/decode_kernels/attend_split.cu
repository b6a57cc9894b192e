// Attention of the new token's query heads over the KV cache, split by key ranges (flash-decoding), and
// the splits merged by the block that finishes last:
//
//   block (kvh, s) takes keys k ∈ [s·split, min(s·split + split, pos + 1))   (pos = state[POS]: the new
//   token's key is in the cache already) and the g = h / h_kv query heads that share KV head kvh (GQA),
//   reading each key and value once for all of them. For each of those heads:
//
//     score_k = q · K[kvh, k]                    (q is scaled by 1/√d_h already)
//     m = max_k score_k,   ℓ = Σ_k e^{score_k − m},   o = Σ_k e^{score_k − m} V[kvh, k]   (not divided by ℓ)
//
//   grid  = (h_kv, n_splits)   n_splits = ⌈max_len / split⌉: fixed, so one graph serves every length; a block
//                              past pos (s·split > pos) returns at once and writes nothing (the merge reads
//                              the splits up to pos only)
//   block = (256,)             8 warps; warp w takes keys in runs of U: k0 + U·w … k0 + U·w + U − 1, then
//                              U·WARPS further on (split = 32: one run a warp); lane c holds dims c, c + 32, …
//
// A warp loads its U keys and values before it scores any of them, so their loads overlap (one memory
// latency a run, not one a key). It keeps its own (m, ℓ, o) by the online softmax: for a run of scores,
// m' = max(m, scores), ℓ = ℓ·e^{m − m'} + Σ e^{score − m'}, o = o·e^{m − m'} + Σ e^{score − m'}·v. Then
// the 8 warps' statistics meet in shared memory and merge the same way. A warp with no key keeps
// m = −∞, ℓ = 0, o = 0. d_h ≤ 128; any g (MAX_G heads a pass).
//
// The merge of the splits (the online softmax across blocks), for the g heads of KV head kvh:
//
//   M = max_s m_s,   w_s = e^{m_s − M},   o = Σ_s w_s · o_s / Σ_s w_s · ℓ_s      over the used splits
//
// is done by whichever of kvh's used splits (s ≤ pos / split) finishes last, so that it needs no
// kernel of its own: each block writes its partials, makes them visible to every block
// (__threadfence), then counts itself in arrivals[kvh]; the block that brings the count to the number
// of used splits reads all their partials (from L2, past its own L1) and writes o, then sets the
// count back to 0 for the next step. Split 0 always holds key 0, so M is finite.
//
// The merge reads in parallel, not split after split (each read from L2 waits ~1 µs): the (m, ℓ) of
// every head and split at once into shared memory, then warp a takes head a's max and weights, then
// each thread one (head, dim) and the splits' o_s in batches of B loads in flight. Splits come in
// chunks of CHUNK, merged into the running (M, Σ w ℓ, Σ w o) by the same rule: one chunk up to
// max_len = CHUNK · split (4,096 keys at split = 32).
// q [h·d_h]; K, V [h_kv, max_len, d_h]; part_o [h, n_splits, d_h]; part_ml [h, n_splits, 2] = (m, ℓ);
// o [h·d_h]; arrivals [h_kv] int32, zero between steps.

#include "decode_common.cuh"

#define WARPS 8     // 256 threads
#define DIMS 4      // dims a lane holds: d_h ≤ 32·DIMS = 128
#define MAX_G 8     // query heads a pass holds in registers (SmolLM2: g = 3, one pass); ≤ WARPS: the
                    // merge gives each head of a pass a warp
#define U 4         // keys a warp loads before it scores them
#define CHUNK 128   // splits the merge holds in shared memory at once
#define B 16        // loads of o_s a thread has in flight in the merge

// The last block's merge of kvh's `used` splits into o, for its g query heads (see the top).
__device__ void merge_splits(const float* part_o, const float* part_ml, float* o, int kvh, int g, int d_h,
                             int n_splits, int used)
{
    __shared__ float w[MAX_G][CHUNK], l[MAX_G][CHUNK];  // per split: m, then the weight e^{m_s − M}; ℓ
    __shared__ float M_run[MAX_G], den_run[MAX_G], rescale[MAX_G];  // the chunks so far: M, Σ w ℓ; e^{M_old − M}
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int a0 = 0; a0 < g; a0 += MAX_G) {  // query heads kvh·g + a0 + a, a < n_a
        const int n_a = min(MAX_G, g - a0);
        const size_t row0 = (size_t)(kvh * g + a0) * n_splits;  // row (head, s) = row0 + a·n_splits + s
        for (int c0 = 0; c0 < used; c0 += CHUNK) {  // splits c0 … c0 + n_c − 1
            const int n_c = min(CHUNK, used - c0);
            for (int t = threadIdx.x; t < n_a * n_c; t += blockDim.x) {  // every (m, ℓ) of the chunk at once
                const int a = t / n_c, u = t % n_c;
                const size_t row = row0 + (size_t)a * n_splits + c0 + u;
                w[a][u] = __ldcg(part_ml + 2 * row);
                l[a][u] = __ldcg(part_ml + 2 * row + 1);
            }
            __syncthreads();  // the chunk's (m, ℓ) are in shared memory
            if (warp < n_a) {  // warp a: head a's M over the chunk and the chunks before it, its weights
                const int a = warp;
                float M = c0 == 0 ? -INFINITY : M_run[a];
                for (int u = lane; u < n_c; u += 32) M = fmaxf(M, w[a][u]);
                M = warp_max(M);  // finite: split 0 holds key 0
                float den = 0.f;
                for (int u = lane; u < n_c; u += 32) {
                    w[a][u] = expf(w[a][u] - M);  // e^{m_s − M}
                    den += w[a][u] * l[a][u];
                }
                den = warp_sum(den);
                __syncwarp();  // every lane has read M_run and den_run before lane 0 writes them
                if (lane == 0) {
                    const float r = c0 == 0 ? 0.f : expf(M_run[a] - M);  // the chunks before, to the new M
                    rescale[a] = r;
                    den_run[a] = (c0 == 0 ? 0.f : den_run[a] * r) + den;
                    M_run[a] = M;
                }
            }
            __syncthreads();  // the weights, rescale and Σ w ℓ are in shared memory
            const bool last_chunk = c0 + CHUNK >= used;
            for (int t = threadIdx.x; t < n_a * d_h; t += blockDim.x) {  // head a, dim j: Σ_s w_s o_s
                const int a = t / d_h, j = t % d_h;
                const float* o_s = part_o + (row0 + (size_t)a * n_splits + c0) * d_h + j;  // split c0, dim j
                float num = 0.f;
                for (int u0 = 0; u0 < n_c; u0 += B) {
                    float v[B];
#pragma unroll
                    for (int i = 0; i < B; ++i) v[i] = u0 + i < n_c ? __ldcg(o_s + (size_t)(u0 + i) * d_h) : 0.f;
#pragma unroll
                    for (int i = 0; i < B; ++i) num += u0 + i < n_c ? w[a][u0 + i] * v[i] : 0.f;
                }
                float* out = o + (kvh * g + a0 + a) * d_h + j;
                if (c0 > 0) num += rescale[a] * *out;  // the chunks before: Σ w o, written by this thread
                *out = last_chunk ? num / den_run[a] : num;
            }
            __syncthreads();  // shared memory is read before the next chunk writes it
        }
    }
}

extern "C" __global__ void decode_attend_split(const float* q, const float* K, const float* V, float* part_o,
                                               float* part_ml, float* o, int* arrivals, const int* state, int h,
                                               int h_kv, int d_h, int max_len, int split)
{
    if (state[DONE]) return;
    __shared__ float warp_m[WARPS][MAX_G], warp_l[WARPS][MAX_G], warp_o[WARPS][MAX_G][32 * DIMS];
    __shared__ bool last;  // this block is the last of kvh's used splits to finish
    const int kvh = blockIdx.x, s = blockIdx.y, g = h / h_kv, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int k0 = s * split, k1 = min(k0 + split, state[POS] + 1);
    if (k0 >= k1) return;  // a split past pos: nothing to write, the merge does not read it
    const float *Kh = K + (size_t)kvh * max_len * d_h, *Vh = V + (size_t)kvh * max_len * d_h;  // [max_len, d_h]
    for (int a0 = 0; a0 < g; a0 += MAX_G) {  // query heads kvh·g + a0 + a, a < n_a
        const int n_a = min(MAX_G, g - a0);
        float qr[MAX_G][DIMS], o[MAX_G][DIMS] = {}, m[MAX_G], l[MAX_G] = {};  // registers: constant indices only
        for (int a = 0; a < MAX_G; ++a) {
            m[a] = -INFINITY;
            for (int c = 0; c < DIMS; ++c) {
                const int j = lane + 32 * c;
                qr[a][c] = (a < n_a && j < d_h) ? q[(kvh * g + a0 + a) * d_h + j] : 0.f;
            }
        }
        for (int kb = k0 + U * warp; kb < k1; kb += U * WARPS) {  // this warp's run of keys kb … kb + U − 1
            float kr[U][DIMS], vr[U][DIMS];
#pragma unroll
            for (int u = 0; u < U; ++u) {  // every load of the run first
                const int k = kb + u;
                for (int c = 0; c < DIMS; ++c) {
                    const int j = lane + 32 * c;
                    kr[u][c] = (k < k1 && j < d_h) ? Kh[(size_t)k * d_h + j] : 0.f;
                    vr[u][c] = (k < k1 && j < d_h) ? Vh[(size_t)k * d_h + j] : 0.f;
                }
            }
#pragma unroll
            for (int a = 0; a < MAX_G; ++a) {
                if (a < n_a) {
                    float score[U], m_new = m[a];
#pragma unroll
                    for (int u = 0; u < U; ++u) {
                        float dot = 0.f;
                        for (int c = 0; c < DIMS; ++c) dot += qr[a][c] * kr[u][c];
                        score[u] = kb + u < k1 ? warp_sum(dot) : -INFINITY;  // past k1: weighs e^{−∞} = 0
                        m_new = fmaxf(m_new, score[u]);  // finite: key kb is in the range
                    }
                    const float rescale = expf(m[a] - m_new);  // 0 on the first run (m = −∞)
                    l[a] *= rescale;
                    for (int c = 0; c < DIMS; ++c) o[a][c] *= rescale;
#pragma unroll
                    for (int u = 0; u < U; ++u) {
                        const float p = expf(score[u] - m_new);
                        l[a] += p;
                        for (int c = 0; c < DIMS; ++c) o[a][c] += p * vr[u][c];
                    }
                    m[a] = m_new;
                }
            }
        }
        for (int a = 0; a < MAX_G; ++a) {  // this warp's (m, ℓ, o), for the merge
            if (lane == 0) {  // m and ℓ are the same on every lane: one writes them
                warp_m[warp][a] = m[a];
                warp_l[warp][a] = l[a];
            }
            for (int c = 0; c < DIMS; ++c) warp_o[warp][a][lane + 32 * c] = o[a][c];
        }
        __syncthreads();  // every warp's statistics are in shared memory
        for (int t = threadIdx.x; t < n_a * d_h; t += blockDim.x) {  // M = max_w m_w, weights e^{m_w − M}
            const int a = t / d_h, j = t % d_h;
            float M = -INFINITY, l_sum = 0.f, o_sum = 0.f;
            for (int w = 0; w < WARPS; ++w) M = fmaxf(M, warp_m[w][a]);
            for (int w = 0; w < WARPS; ++w) {
                const float weight = warp_m[w][a] == -INFINITY ? 0.f : expf(warp_m[w][a] - M);  // no keys: 0
                l_sum += weight * warp_l[w][a];
                o_sum += weight * warp_o[w][a][j];
            }
            const size_t row = (size_t)(kvh * g + a0 + a) * gridDim.y + s;  // (head, s)
            part_o[row * d_h + j] = o_sum;
            if (j < 2) part_ml[2 * row + j] = (j == 0) ? M : l_sum;  // (m, ℓ)
        }
        __syncthreads();  // the merge has read shared memory before the next pass writes it
    }

    // Count this block in; the last of the used splits merges them all.
    const int n_splits = gridDim.y, used = min(n_splits, state[POS] / split + 1);  // the splits that hold a key
    __threadfence();  // this thread's partials are visible to every block before the count says so
    __syncthreads();  // every thread of the block has written and fenced
    if (threadIdx.x == 0) last = atomicAdd(&arrivals[kvh], 1) == used - 1;
    __syncthreads();  // every thread knows whether to merge
    if (!last) return;
    __threadfence();  // read the other blocks' partials only after seeing their count
    merge_splits(part_o, part_ml, o, kvh, g, d_h, n_splits, used);
    if (threadIdx.x == 0) arrivals[kvh] = 0;  // every used split has counted itself: ready for the next step
}
