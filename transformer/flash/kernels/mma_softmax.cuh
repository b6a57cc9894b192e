// The online softmax of the register kernels (flash_attention_fwd_mma*.cu), on the scores one
// lane holds.
//
// In both kernels S = Q_w K_jᵀ is a row of mma C tiles, one per 8 keys (mma_ptx.cuh): lane 4g + t
// holds s[nb][0], s[nb][1] = S[g][8nb + 2t, 8nb + 2t + 1] and s[nb][2], s[nb][3] the same keys of
// row g + 8; O_w is laid out the same way over d_h. So a lane owns two query rows (r = 0: g,
// r = 1: g + 8), sees 2 of every 8 of their keys, and holds m and l for those two rows.
// Scores, m and lse are in natural units, those of the lse the backward kernels read back.
// e^x is one ex2 instruction, 2^(x · log2 e), the product taken after the subtraction:
// e^(S - m) = 2^((S - m) · log2 e). Folding log2 e into the scale (m in units of log2, one
// multiply fewer) would save lse as (m + log2 l) · ln 2 for the backward to multiply back by
// log2 e: at scores of ~3e3 that round trip moves L by 1 to 3 ulps (4.9e-4 each), and P rebuilt
// from it is up to 3.4e-4 off. Here the backward rounds S - L as this kernel rounds S - m:
// exactly 0 for a row's max key when l rounds to 1, as in the SIMT kernels.
#pragma once
#include "packed_rows.cuh"
#define LOG2E 1.4426950408889634f  // e^x = 2^(x · log2 e)
#ifndef INFINITY  // NVRTC, which CuPy compiles with, has no <math.h>: +∞ from its bits
#define INFINITY __int_as_float(0x7f800000)
#endif

// S · scale; where the tile holds a key some row of the block cannot see
// (edge), the keys this lane's rows cannot see become -∞. Query row i sits at position
// i + offset; key tile j starts at key j0. Packed rows: doc is this batch row's documents
// and my_doc those of the lane's two rows (packed_rows.cuh); null and unused otherwise.
// Most tiles are not edges, and the whole block takes the same branch: there the mask's
// index arithmetic is not done at all (it cost as much time as the exponentials).
template <int NB>
__device__ __forceinline__ void scale_and_mask(float (&s)[NB][4], const int rows[2], int t, int j0, int n_k,
                                               int causal, int offset, const int* doc, const int my_doc[2],
                                               bool edge, float scale) {
    if (!edge) {
#pragma unroll
        for (int nb = 0; nb < NB; ++nb)
#pragma unroll
            for (int e = 0; e < 4; ++e) s[nb][e] *= scale;
        return;
    }
#pragma unroll
    for (int nb = 0; nb < NB; ++nb)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int key = j0 + 8 * nb + 2 * t + e % 2, row = rows[e / 2];
            const bool visible = key < n_k && (!causal || key <= row + offset) && in_document(doc, key, my_doc[e / 2]);
            s[nb][e] = visible ? s[nb][e] * scale : -INFINITY;
        }
}

// One tile's update, for each of the lane's rows:
//   m_new = max(m, rowmax(S))               the 4 lanes of a group hold the whole row: 2 shuffles
//   P     = e^(S - m_new)                   in place of S
//   l     = l · e^(m - m_new) + rowsum(P)   each lane sums only its own columns
//   O_w   = diag(e^(m - m_new)) O_w         before P V_j is added
template <int NB, int DB>
__device__ __forceinline__ void online_softmax(float (&s)[NB][4], float (&o)[DB][4], float m[2], float l[2]) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {              // r = 0 holds s[·][0, 1], r = 1 holds s[·][2, 3]
        float m_new = m[r];
#pragma unroll
        for (int nb = 0; nb < NB; ++nb) m_new = fmaxf(m_new, fmaxf(s[nb][2 * r], s[nb][2 * r + 1]));
        m_new = fmaxf(m_new, __shfl_xor_sync(0xffffffffu, m_new, 1));
        m_new = fmaxf(m_new, __shfl_xor_sync(0xffffffffu, m_new, 2));
        const float m_ref = (m_new == -INFINITY) ? 0.f : m_new;   // nothing visible yet: P = 0, not NaN
        const float correction = exp2f((m[r] - m_ref) * LOG2E);    // e^(m - m_new); 0 on the first tile
        float p_sum = 0.f;
#pragma unroll
        for (int nb = 0; nb < NB; ++nb) {
            s[nb][2 * r] = exp2f((s[nb][2 * r] - m_ref) * LOG2E);
            s[nb][2 * r + 1] = exp2f((s[nb][2 * r + 1] - m_ref) * LOG2E);
            p_sum += s[nb][2 * r] + s[nb][2 * r + 1];
        }
        l[r] = l[r] * correction + p_sum;
        m[r] = m_new;
#pragma unroll
        for (int db = 0; db < DB; ++db) {
            o[db][2 * r] *= correction;
            o[db][2 * r + 1] *= correction;
        }
    }
}

// After the last tile (FlashAttention-2's single normalisation): a row's l is the sum of its 4
// lanes' partial sums; returns 1 / l for each row (0 for a row that saw no key: O = 0) and sets
// lse = m + log l = m + log2 l · ln 2 (-∞ for such a row).
__device__ __forceinline__ void finish_rows(const float m[2], float l[2], float inv_l[2], float lse[2]) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
        inv_l[r] = (l[r] != 0.f) ? 1.f / l[r] : 0.f;  // NaN stays NaN
        lse[r] = (l[r] != 0.f) ? m[r] + log2f(l[r]) * 0.6931471805599453f : -INFINITY;
    }
}
