// The steps of the two tensor-core backward kernels' block (bwd_mma_block.cuh; flash_attention_bwd_mma.cu,
// float16, and flash_attention_bwd_mma_tf32.cu, float32) that work on a warp's accumulators: P and dS,
// dQ's atomic adds, and dK, dV written out. Each works on the mma accumulator layout:
// lane 4g + t holds rows g and g + 8, columns 2t and 2t + 1 of each 8 (mma_ptx.cuh). Include after
// mma_operands.cuh and packed_rows.cuh.
#pragma once

// Pᵀ and dSᵀ in place of Sᵀ and dPᵀ (16 keys × QUERIES), for query rows r0 … r0 + QUERIES − 1:
//   P = e^(S·scale − L) = 2^((S·scale − L)·log2 e),   dS = P (dP − D),
// L and D per query column (Li, Di: the tile's, in shared memory). L is the forward's lse in natural
// units (mma_softmax.cuh), and log2 e multiplies only the difference: S·scale − L is then rounded as the
// forward's S·scale − m was, exactly 0 for the max key of a row whose l rounds to 1. A pair is masked (P = dS = 0)
// only when `edge`: a tile with a pair some row may not see (past n_k or n_q, across the causal
// diagonal, of another document). keys, key_doc: the lane's two keys (rows g and g + 8) and their documents.
template <int QUERIES>
__device__ __forceinline__ void p_and_ds(float (&s)[QUERIES / 8][4], float (&dp)[QUERIES / 8][4], const float* Li,
                                         const float* Di, int r0, int t, const int (&keys)[2],
                                         const int (&key_doc)[2], bool edge, int n_q, int n_k, int causal,
                                         int offset, const int* doc, float scale) {
#pragma unroll
    for (int nb = 0; nb < QUERIES / 8; ++nb) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int c = 8 * nb + 2 * t + e % 2;  // the query column in the tile
            const int i = r0 + c, j = keys[e / 2];
            const bool seen = !edge || (j < n_k && i < n_q && (!causal || j <= i + offset)
                                        && in_document(doc, i, key_doc[e / 2]));
            const float p = seen ? exp2f((s[nb][e] * scale - Li[c]) * 1.4426950408889634f) : 0.f;  // P = e^(S·scale - L)
            s[nb][e] = p;
            dp[nb][e] = seen ? p * (dp[nb][e] - Di[c]) : 0.f;                  // dS = P (dP - D)
        }
    }
}

// dQ[row, col …] += dq · scale: the warp's 16 rows row … row + 15 (those < n_q) of a tile of
// N_COLS 8-column blocks starting at column col; dQ is (n_q, DIMS) float32, other blocks add to it too
// (two floats an instruction from compute capability 9.0, which has vector atomics).
template <int N_COLS, int DIMS>
__device__ __forceinline__ void add_to_dq(float* dQ, const float (&dq)[N_COLS][4], int row, int col, int n_q,
                                          int g, int t, float scale) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int i = row + g + 8 * r;
        if (i >= n_q) continue;
        float* dq_row = dQ + (size_t)i * DIMS + col + 2 * t;
#pragma unroll
        for (int db = 0; db < N_COLS; ++db) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900  // one vector atomic for the lane's two columns
            atomicAdd(reinterpret_cast<float2*>(dq_row + 8 * db), make_float2(dq[db][2 * r] * scale,
                                                                              dq[db][2 * r + 1] * scale));
#else
            atomicAdd(dq_row + 8 * db, dq[db][2 * r] * scale);
            atomicAdd(dq_row + 8 * db + 1, dq[db][2 * r + 1] * scale);
#endif
        }
    }
}

// dK = dk · scale and dV = dv for the lane's two keys (those < n_k): rows of (n_k, DIMS) float32.
template <int DIMS>
__device__ __forceinline__ void write_dk_dv(float* dK, float* dV, const float (&dk)[DIMS / 8][4],
                                            const float (&dv)[DIMS / 8][4], const int (&keys)[2], int n_k, int t,
                                            float scale) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        if (keys[r] >= n_k) continue;
        const size_t out = (size_t)keys[r] * DIMS + 2 * t;
#pragma unroll
        for (int db = 0; db < DIMS / 8; ++db) {
            store_pair(dK + out + 8 * db, dk[db][2 * r] * scale, dk[db][2 * r + 1] * scale);
            store_pair(dV + out + 8 * db, dv[db][2 * r], dv[db][2 * r + 1]);
        }
    }
}
