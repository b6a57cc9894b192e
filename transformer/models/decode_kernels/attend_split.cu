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
//   block = (128,)             4 warps; warp w takes keys in runs of U: k0 + U·w … k0 + U·w + U − 1, then
//                              U·WARPS further on; lane c holds dims c, c + 32, …
//
// A warp loads its U keys and values before it scores any of them, so their loads overlap (one memory
// latency a run, not one a key). It keeps its own (m, ℓ, o) by the online softmax: for a run of scores,
// m' = max(m, scores), ℓ = ℓ·e^{m − m'} + Σ e^{score − m'}, o = o·e^{m − m'} + Σ e^{score − m'}·v. Then
// the 4 warps' statistics meet in shared memory and merge the same way. A warp with no key keeps
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
// q [h·d_h]; K, V [h_kv, max_len, d_h]; part_o [h, n_splits, d_h]; part_ml [h, n_splits, 2] = (m, ℓ);
// o [h·d_h]; arrivals [h_kv] int32, zero between steps.

#include "decode_common.cuh"

#define WARPS 4     // 128 threads
#define DIMS 4      // dims a lane holds: d_h ≤ 32·DIMS = 128
#define MAX_G 8     // query heads a pass holds in registers (SmolLM2: g = 3, one pass)
#define U 4         // keys a warp loads before it scores them

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
    for (int t = threadIdx.x; t < g * d_h; t += blockDim.x) {  // head kvh·g + a, dim j
        const int head = kvh * g + t / d_h, j = t % d_h;
        const float* ml = part_ml + (size_t)head * n_splits * 2;
        float M = -INFINITY, num = 0.f, den = 0.f;
        for (int u = 0; u < used; ++u) M = fmaxf(M, __ldcg(ml + 2 * u));
        for (int u = 0; u < used; ++u) {
            const float w = expf(__ldcg(ml + 2 * u) - M);  // e^{m_s − M}
            num += w * __ldcg(part_o + ((size_t)head * n_splits + u) * d_h + j);
            den += w * __ldcg(ml + 2 * u + 1);
        }
        o[head * d_h + j] = num / den;
    }
    if (threadIdx.x == 0) arrivals[kvh] = 0;  // every used split has counted itself: ready for the next step
}
