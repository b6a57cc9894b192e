// FlashAttention-2's forward for float32 Q, K, V on tensor cores: mma.sync.m16n8k8 in TF32,
// with the float32 accuracy kept by splitting each number in two ("3xTF32").
//
// Tensor cores multiply float32 numbers only as TF32: 10 mantissa bits instead of 23, so one
// product is off by up to 2^-11 of its size, and attention's outputs by ~1e-4 (float16's level).
// Write each number as a TF32 pair, x = x_hi + x_lo with x_hi = tf32(x), x_lo = tf32(x - x_hi);
// together they hold 21 of x's 24 bits. Then
//
//   a b ≈ a_lo b_hi + a_hi b_lo + a_hi b_hi     (a_lo b_lo, ~2^-22 of a b, is left out)
//
// is three tensor-core products, each exact in the float32 accumulator, and as accurate as the
// float32 kernel on the ordinary cores ("simt"). TF32_PRODUCTS=1 keeps only a_hi b_hi: 3× fewer
// products, float16-level accuracy (tests/test_flash_cuda.py shows the difference).
//
// Otherwise this is flash_attention_fwd_mma.cu: per warp 16 query rows, S, P and O in
// registers, K_j/V_j double-buffered with cp.async, the online softmax of mma_softmax.cuh.
// What differs is the layout of an m16n8k8 TF32 operand (mma_ptx.cuh), one float a register:
//
//   S = Q_w K_jᵀ   A = Q_w[·][8kk … 8kk+7]:   a[0] = Q[g][t], a[1] = Q[g+8][t], a[2] = Q[g][t+4], a[3] = Q[g+8][t+4]
//                  B = K_jᵀ (d × keys):        b[0] = K[g][t], b[1] = K[g][t+4]   (key g of the 8)
//   O += P V_j     the S accumulator holds P[g][2t, 2t+1] of each 8 keys, but A wants P[g][t, t+4].
//                  The sum Σ_key P[·][key] V[key][·] can run over the 8 keys in any order, so
//                  take the order 0, 2, 4, 6, 1, 3, 5, 7: position t is key 2t, position t + 4
//                  key 2t + 1. Then A = (P[g][2t], P[g+8][2t], P[g][2t+1], P[g+8][2t+1]) is the
//                  accumulator as it stands, and B = V_j in that order: b[0] = V[2t][g], b[1] = V[2t+1][g].
//
//   grid  = (Tr, b·h)   one block per (batch·head, tile of Br = 64 query rows)
//   block = 4 warps     warp w owns query rows 16w … 16w+15 of the tile
//
// Compile-time constants (-D options): D_H head size (a multiple of 8), BC keys per K/V tile,
// SMEM_BYTES the dynamic shared memory the host gives each block (checked below).

#include <cuda_fp16.h>
#include "mma_ptx.cuh"
#include "mma_operands.cuh"
#include "mma_softmax.cuh"

#ifndef D_H
#define D_H 64
#endif
#ifndef BC
#define BC 64
#endif
#ifndef SMEM_BYTES
#define SMEM_BYTES 0
#endif

constexpr int BR = 64;                  // query rows per block
constexpr int WARPS = BR / 16;          // one warp per 16 query rows
constexpr int THREADS = 32 * WARPS;
// A shared row is padded by 4 floats: with LD ≡ 4 (mod 32), Q[g][t] and K[g][t] fall in bank
// 4g + t and V[2t][g] in bank 8t + g, so each load of a warp touches all 32 banks once.
constexpr int LD = D_H + 4;
constexpr int Q_TILE = BR * LD;         // floats in the Q tile
constexpr int KV_TILE = BC * LD;        // floats in one K_j or V_j buffer
constexpr int LAYOUT_BYTES = 4 * (Q_TILE + 4 * KV_TILE);  // Q, then K_j and V_j twice each
static_assert(D_H % 8 == 0 && BC % 8 == 0, "mma.m16n8k8 takes d_h and keys in steps of 8");
static_assert(LD % 32 == 4, "the padding that spreads fragment loads over the banks");
static_assert(LAYOUT_BYTES <= SMEM_BYTES, "the host must give each block SMEM_BYTES >= LAYOUT_BYTES");
static_assert(TF32_PRODUCTS == 1 || TF32_PRODUCTS == 3, "1 (TF32) or 3 (3xTF32) products");

extern "C" __global__ void __launch_bounds__(THREADS, 2) flash_attention_fwd_mma_tf32(
    const float* __restrict__ Q, const float* __restrict__ K, const float* __restrict__ V,
    float* __restrict__ O, float* __restrict__ LSE,
    const int n_q, const int n_k, const int h, const int h_kv, const float scale, const int causal,
    const int* __restrict__ DOC, const int* __restrict__ DOC_KEYS)
{
    extern __shared__ __align__(128) unsigned char smem[];
    float* Qs = reinterpret_cast<float*>(smem);  // [64][LD]
    float* Ks = Qs + Q_TILE;                     // K_j at Ks + (j % 2)·KV_TILE
    float* Vs = Ks + 2 * KV_TILE;                // V_j at Vs + (j % 2)·KV_TILE

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int g = lane / 4, t = lane % 4;        // this lane: rows g, g+8 of the warp's 16
    const int bh = blockIdx.y;                   // which (batch, query head)
    const int b = bh / h, head = bh % h;
    const int kv_head = head / (h / h_kv);       // GQA: the key/value head this query head reads
    const int row0 = blockIdx.x * BR;            // first query row of this tile
    const int offset = n_k - n_q;                // absolute position of query row r is r + offset
    const int rows[2] = {row0 + 16 * warp + g, row0 + 16 * warp + g + 8};  // this lane's query rows
    const float* Qg = Q + (size_t)bh * n_q * D_H;
    const float* Kg = K + ((size_t)b * h_kv + kv_head) * n_k * D_H;
    const float* Vg = V + ((size_t)b * h_kv + kv_head) * n_k * D_H;
    const int* doc = DOC ? DOC + (size_t)b * n_k : nullptr;  // this batch row's documents, or none
    const int my_doc[2] = {doc_of_row(doc, rows[0], n_q), doc_of_row(doc, rows[1], n_q)};
    const int block_doc = block_document(doc, row0, BR, n_q, lane);  // the one document of all the block's rows, or -1
    const float* Qw = Qs + 16 * warp * LD;       // this warp's 16 rows of the Q tile

    // Tile skipping: the keys the tile's documents span (all n_k without documents), and,
    // when causal, none past the tile's last row, which sees keys up to row0 + BR - 1 + offset.
    int key_first, key_end;
    doc_key_span(DOC_KEYS, b, blockIdx.x, gridDim.x, n_k, key_first, key_end);
    if (causal) key_end = min(key_end, row0 + BR + offset);
    const int j_first = key_first / BC;                        // key tiles j_first … Tc-1 to visit
    const int Tc = key_end > 0 ? (key_end + BC - 1) / BC : 0;

    // The Q tile and the first K_j, V_j: HBM -> SRAM. Q stays in shared memory (its TF32 pairs would
    // take 2·d_h registers), read again for every key tile.
    if (j_first < Tc) {
        copy_rows_async<BR, D_H, LD, THREADS>(Qs, Qg, row0, n_q);
        copy_rows_async<BC, D_H, LD, THREADS>(Ks + (j_first % 2) * KV_TILE, Kg, j_first * BC, n_k);
        copy_rows_async<BC, D_H, LD, THREADS>(Vs + (j_first % 2) * KV_TILE, Vg, j_first * BC, n_k);
    }
    cp_async_commit();

    float o[D_H / 8][4] = {};                    // O_w: 2 rows × 2 columns of each 8-column block
    float m[2] = {-INFINITY, -INFINITY};         // running max of each of the lane's rows' S · scale
    float l[2] = {0.f, 0.f};                     // running sum, over this lane's columns only

    for (int j = j_first; j < Tc; ++j) {
        const int j0 = j * BC;
        const float* Kj = Ks + (j % 2) * KV_TILE;
        const float* Vj = Vs + (j % 2) * KV_TILE;
        cp_async_wait_all();                     // this thread's part of tile j (and Q) has landed
        __syncthreads();                         // everyone's has; every warp is done with tile j-1
        if (j + 1 < Tc) {                        // start tile j+1 into the buffer tile j-1 used
            copy_rows_async<BC, D_H, LD, THREADS>(Ks + ((j + 1) % 2) * KV_TILE, Kg, j0 + BC, n_k);
            copy_rows_async<BC, D_H, LD, THREADS>(Vs + ((j + 1) % 2) * KV_TILE, Vg, j0 + BC, n_k);
            cp_async_commit();
        }

        // S = Q_w K_jᵀ, 8 dimensions of d_h at a time.
        float s[BC / 8][4];
#pragma unroll
        for (int nb = 0; nb < BC / 8; ++nb) s[nb][0] = s[nb][1] = s[nb][2] = s[nb][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < D_H / 8; ++kk) {
            const float* q = Qw + 8 * kk;
            unsigned q_hi[4], q_lo[4];
            split_tf32(q[g * LD + t], q_hi[0], q_lo[0]);
            split_tf32(q[(g + 8) * LD + t], q_hi[1], q_lo[1]);
            split_tf32(q[g * LD + t + 4], q_hi[2], q_lo[2]);
            split_tf32(q[(g + 8) * LD + t + 4], q_hi[3], q_lo[3]);
#pragma unroll
            for (int nb = 0; nb < BC / 8; ++nb) {
                const float* k = Kj + (8 * nb + g) * LD + 8 * kk;  // key 8nb + g
                unsigned k_hi[2], k_lo[2];
                split_tf32(k[t], k_hi[0], k_lo[0]);
                split_tf32(k[t + 4], k_hi[1], k_lo[1]);
                mma_3xtf32(s[nb], q_hi, q_lo, k_hi, k_lo);
            }
        }

        // Scale, mask only where this tile holds a key some row of the block cannot see, and
        // take the online softmax of the lane's two rows (mma_softmax.cuh): P replaces S in s.
        const bool other_docs = doc && !tile_in_document(doc, j0, BC, n_k, block_doc, lane);  // packed rows
        const bool edge = j0 + BC > n_k || (causal && j0 + BC - 1 > row0 + offset) || other_docs;
        scale_and_mask(s, rows, t, j0, n_k, causal, offset, doc, my_doc, edge, scale);
        online_softmax(s, o, m, l);

        // O_w += P V_j, 8 keys at a time, in the order 0, 2, 4, 6, 1, 3, 5, 7 (see the top; mma_operands.cuh).
        tf32_acc_times_rows<BC, D_H, LD>(o, s, Vj, g, t);
    }

    // One final normalisation (FlashAttention-2): O = O_w / l, lse = m + log l.
    float inv_l[2], lse[2];
    finish_rows(m, l, inv_l, lse);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int i = rows[r];
        if (i >= n_q) continue;                  // the last tile may be partial
        float* o_out = O + ((size_t)bh * n_q + i) * D_H;
#pragma unroll
        for (int db = 0; db < D_H / 8; ++db)
            store_pair(o_out + 8 * db + 2 * t, o[db][2 * r] * inv_l[r], o[db][2 * r + 1] * inv_l[r]);
        if (t == 0) LSE[(size_t)bh * n_q + i] = lse[r];
    }
}
