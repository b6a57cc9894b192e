// FlashAttention-2's backward pass as a CUDA kernel: the gradients by recomputation, the tiles
// in shared memory, as `flash_attention_backward` in transformer/flash.py does it in NumPy.
//
// The forward saved only O and L = m + log l (the log-sum-exp of each query row). With
// D_i = rowsum(dO_i ∘ O_i), computed on the host, every gradient comes from tiles:
//
//   P_ij  = e^(S_ij - L_i)          S_ij = (q_i · scale) · k_j, recomputed; already normalised
//   dV_j += P_ijᵀ dO_i
//   dP_ij = dO_i · v_j
//   dS_ij = P_ij (dP_ij - D_i)
//   dK_j += dS_ijᵀ (Q_i · scale)
//   dQ_i += dS_ij K_j · scale
//
// The loops are FlashAttention-2's for the backward: the outer one over key tiles, so that a
// block owns dK_j and dV_j and writes them once,
//
//   grid  = (Tc, b·h)   one thread block per (batch·head, key tile of BC keys)
//   block = BC threads  thread j owns key row j of the tile: its rows of dK_j and dV_j in registers
//
// and the inner one over query tiles of BR = BC rows, staged with dO_i, L_i and D_i through
// shared memory. For each query row r of the tile, thread j computes the pair (r, j): P, dP,
// dS, and adds to its dK, dV rows. dQ_i = dS_ij K_j needs every key of the tile: the block
// writes dS_ij to shared memory, then thread t computes row t of dS_ij K_j and adds it to dQ
// in HBM with atomicAdd, since the blocks of other key tiles add to the same rows.
//
// dK and dV are written per query head, (b, h, n_k, d_h): under GQA/MQA the host sums the
// h / h_kv query heads that share a key/value head. dQ is float32, zero on entry. L arrives
// with -∞ (a row that saw no key) replaced by +∞, so that its P = e^(s - ∞) = 0; NaN stays NaN.
// causal: query row i sits at position i + n_k - n_q and sees keys j ≤ that position; a block
// starts at the first query tile holding a row that sees one of its keys. Packed rows (DOC,
// DOC_KEYS; null for one sequence a row, packed_rows.cuh): the same-document relation is
// symmetric, so the span the host computes for a tile of BC positions is both the keys its
// queries may see and the queries that may see its keys; the block visits only the query tiles
// inside it. A masked pair gets P = dS = 0 exactly.
//
// S_ij is rounded as the forward kernel rounded it, the scale folded into Q_i before the dot
// product: L_i holds the forward's own max, and with float32 scores of a few thousand,
// (q_i · k_j) · scale is a few ulps (5e-4 each at 4e3) away from it, so P_ij = e^(S_ij - L_i)
// of a row whose attention is almost one-hot came out 1 ± 1e-3 instead of 1.
//
// Compile-time constants (CuPy passes -D options): D_H head size, BC keys per tile (and query
// rows per tile), SCALAR_T the element type of Q, K, V, dO (float or __half). Shared memory is
// (4·BC·D_H + BC·(BC + 1) + 2·BC) floats, within the 48 KiB a block has statically: the host
// halves BC for d_h = 128.

#include "scalars.cuh"
#include "packed_rows.cuh"

#ifndef D_H
#define D_H 64
#endif
#ifndef BC
#define BC 32
#endif
#ifndef SCALAR_T
#define SCALAR_T float
#endif
#define BR BC  // query rows per tile: thread t also owns query row t of the tile for dQ

extern "C" __global__ void flash_attention_bwd(
    const SCALAR_T* __restrict__ Q, const SCALAR_T* __restrict__ K, const SCALAR_T* __restrict__ V,
    const SCALAR_T* __restrict__ dO, const float* __restrict__ L, const float* __restrict__ D,
    float* __restrict__ dQ, float* __restrict__ dK, float* __restrict__ dV,
    const int n_q, const int n_k, const int h, const int h_kv, const float scale, const int causal,
    const int* __restrict__ DOC, const int* __restrict__ DOC_KEYS)
{
    // K_j and V_j stored transposed, Ks[c][j] = k_j[c]: thread j reads its own key's element c,
    // 32 threads 32 consecutive words. Q_i (· scale) and dO_i row by row: all threads read the same element.
    __shared__ float Ks[D_H][BC];
    __shared__ float Vs[D_H][BC];
    __shared__ float Qs[BR][D_H];
    __shared__ float dOs[BR][D_H];
    __shared__ float dSs[BR][BC + 1];  // +1: thread t reading row t, column j, hits bank t + j
    __shared__ float Ls[BR], Ds[BR];

    const int tid = threadIdx.x;
    const int bh = blockIdx.y;                    // which (batch, query head)
    const int b = bh / h, head = bh % h;
    const int kv_head = head / (h / h_kv);        // GQA: the key/value head this query head reads
    const int j0 = blockIdx.x * BC;               // first key of this tile
    const int j = j0 + tid;                       // this thread's key
    const int offset = n_k - n_q;                 // absolute position of query row r is r + offset
    const size_t q_base = (size_t)bh * n_q * D_H;
    const size_t kv_base = ((size_t)b * h_kv + kv_head) * n_k * D_H;
    const int* doc = DOC ? DOC + (size_t)b * n_k : nullptr;  // this batch row's documents, or none
    const int my_doc = doc_of_row(doc, j, n_k);  // this key's document

    // K_j, V_j: HBM -> SRAM once.
    for (int e = tid; e < BC * D_H; e += BC) {
        const int r = e / D_H, c = e % D_H;
        const bool in = j0 + r < n_k;
        Ks[c][r] = in ? to_float(K[kv_base + (size_t)(j0 + r) * D_H + c]) : 0.f;
        Vs[c][r] = in ? to_float(V[kv_base + (size_t)(j0 + r) * D_H + c]) : 0.f;
    }
    float dk[D_H], dv[D_H];  // this key's rows of dK_j, dV_j
#pragma unroll
    for (int c = 0; c < D_H; ++c) dk[c] = dv[c] = 0.f;

    // The query rows that may see our keys: those of our keys' documents (all n_q without
    // documents), and, causal, none before j0 - offset, the first row that sees key j0.
    int row_first, row_end;
    doc_key_span(DOC_KEYS, b, blockIdx.x, gridDim.x, n_q, row_first, row_end);
    if (causal) row_first = max(row_first, j0 - offset);
    for (int r0 = max(0, row_first) / BR * BR; r0 < row_end; r0 += BR) {
        __syncthreads();  // everyone is done with the previous Q_i, dO_i, dS_ij (and K_j, V_j are in)
        for (int e = tid; e < BR * D_H; e += BC) {  // stage Q_i · scale, dO_i: HBM -> SRAM
            const int r = e / D_H, c = e % D_H;
            const bool in = r0 + r < n_q;
            // the scale folded in as the forward folds it, so that S_ij below is the forward's to the bit
            Qs[r][c] = in ? to_float(Q[q_base + (size_t)(r0 + r) * D_H + c]) * scale : 0.f;
            dOs[r][c] = in ? to_float(dO[q_base + (size_t)(r0 + r) * D_H + c]) : 0.f;
        }
        const bool row_in = r0 + tid < n_q;
        Ls[tid] = row_in ? L[(size_t)bh * n_q + r0 + tid] : INFINITY;  // rows past n_q: P = 0
        Ds[tid] = row_in ? D[(size_t)bh * n_q + r0 + tid] : 0.f;
        __syncthreads();

        for (int r = 0; r < BR; ++r) {  // the pairs (r0 + r, j), one query row at a time
            const bool visible = j < n_k && r0 + r < n_q && (!causal || j <= r0 + r + offset)
                                 && in_document(doc, r0 + r, my_doc);
            float s = 0.f, dp = 0.f;
#pragma unroll
            for (int c = 0; c < D_H; ++c) {
                s += Qs[r][c] * Ks[c][tid];   // S_ij = (q_i · scale) · k_j
                dp += dOs[r][c] * Vs[c][tid];  // dP_ij = dO_i · v_j
            }
            const float p = visible ? __expf(s - Ls[r]) : 0.f;  // P_ij = e^(S_ij - L_i)
            const float ds = visible ? p * (dp - Ds[r]) : 0.f;        // dS_ij = P_ij (dP_ij - D_i)
#pragma unroll
            for (int c = 0; c < D_H; ++c) {
                dv[c] += p * dOs[r][c];   // dV_j += P_ijᵀ dO_i
                dk[c] += ds * Qs[r][c];   // dK_j += dS_ijᵀ (Q_i · scale)
            }
            dSs[r][tid] = ds;
        }
        __syncthreads();  // dS_ij is complete

        if (row_in) {  // dQ_i += dS_ij K_j · scale: thread t, query row r0 + t
            float* dq_row = dQ + q_base + (size_t)(r0 + tid) * D_H;
            for (int c = 0; c < D_H; ++c) {
                float acc = 0.f;
#pragma unroll
                for (int jj = 0; jj < BC; ++jj) acc += dSs[tid][jj] * Ks[c][jj];
                atomicAdd(dq_row + c, acc * scale);
            }
        }
    }

    if (j >= n_k) return;
    const size_t out = ((size_t)bh * n_k + j) * D_H;  // dK, dV per query head: (b, h, n_k, d_h)
#pragma unroll
    for (int c = 0; c < D_H; ++c) {
        dK[out + c] = dk[c];
        dV[out + c] = dv[c];
    }
}
