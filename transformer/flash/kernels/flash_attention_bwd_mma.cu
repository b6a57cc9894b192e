// FlashAttention-2's backward pass on tensor cores: float16 Q, K, V, dO, float32 sums, the
// products as mma.sync.m16n8k16 with every fragment in registers (mma_ptx.cuh). The same
// formulas and loop order as flash_attention_bwd.cu, the readable one:
//
//   P_ij  = e^(S_ij - L_i)          S_ij = q_i · k_j · scale, recomputed from the saved L
//   dV_j += P_ijᵀ dO_i
//   dP_ij = dO_i · v_j
//   dS_ij = P_ij (dP_ij - D_i)      D_i = rowsum(dO_i ∘ O_i), computed on the host
//   dK_j += dS_ijᵀ Q_i · scale
//   dQ_i += dS_ij K_j · scale
//
//   grid  = (Tc, b·h)   one block per (batch·head, key tile of BC = 64 keys): it owns dK_j, dV_j;
//                       handed out as key tile 0 of every head, then tile 1, …: with causal, the
//                       first key tiles are seen by the most query rows, so the longest start first
//   block = 4 warps     warp w owns keys 16w … 16w + 15 of the tile: their rows of dK_j and dV_j
//                       stay in mma accumulators (registers) for the whole loop
//
// and the loop over query tiles of BR rows (64; 32 at d_h = 128, where dK_j and dV_j alone take
// 128 registers a lane), Q_i, dO_i, L_i and D_i double-buffered in shared memory (cp.async
// brings tile i+1 while the tensor cores work on tile i). A warp works on the transposes,
// its 16 keys as the rows:
//
//   Sᵀ   = K_w Q_iᵀ, dPᵀ = V_w dO_iᵀ       16 × BR each, float32 accumulators
//   Pᵀ   = 2^((Sᵀ·scale - L)·log2 e), dSᵀ = Pᵀ ∘ (dPᵀ - D), masked pairs 0
//   dV_w += Pᵀ dO_i,  dK_w += dSᵀ Q_i       Pᵀ and dSᵀ, as float16 pairs, already are the A
//                                           operands: the accumulator layout of two 8-column
//                                           blocks is the A layout of one 16-wide step
//
// dQ_i = dS_ij K_j needs all 64 keys of the tile, which four warps hold: each writes its dSᵀ
// (float16) to shared memory, and after a barrier warp w computes a 16-row × d_h slab of
// dS_ij K_j (at BR = 32: half the columns of one) and adds it to dQ in HBM with atomicAdd,
// since the blocks of the other key tiles add to the same rows (two floats an instruction from
// compute capability 9.0, which has vector atomics). dQ is float32, zero on entry.
//
// dK and dV are written per query head, (b, h, n_k, d_h), float32: under GQA/MQA the host sums
// the query heads that share a key/value head. L arrives with -∞ (a row that saw no key) as +∞,
// so its P = 0; rows past n_q get L = +∞, D = 0 and zero Q, dO. causal: query row i sits at
// position i + n_k - n_q and sees keys j ≤ that position; the block starts at the first query
// tile holding a row that sees one of its keys. Packed rows (DOC, DOC_KEYS; null for one
// sequence a row, packed_rows.cuh): DOC_KEYS is computed for tiles of BC positions, and the
// same-document relation is symmetric, so the span of a key tile is the queries that may see
// it; the block visits only the query tiles inside. A pair is masked (P = dS = 0 exactly) only
// in tiles that hold a pair some row may not see.
//
// The block itself (its setup, this loop, dK and dV written out) is bwd_mma_block.cuh, shared with
// the float32 kernel; this file holds the float16 tiles and products it calls.
//
// Compile-time constants (-D options): D_H head size (a multiple of 16), SMEM_BYTES the dynamic
// shared memory the host gives each block (checked below).

#include <cuda_fp16.h>
#include "mma_ptx.cuh"
#include "mma_operands.cuh"
#include "packed_rows.cuh"
#include "bwd_tiles.cuh"
#include "scalars.cuh"

#ifndef D_H
#define D_H 64
#endif
#ifndef SMEM_BYTES
#define SMEM_BYTES 0
#endif

constexpr int BC = 64;                   // keys per block: 16 a warp
constexpr int BR = D_H <= 64 ? 64 : 32;  // query rows per tile
constexpr int WARPS = BC / 16;
constexpr int THREADS = 32 * WARPS;
constexpr int LD = D_H + 8;              // shared rows padded by 8 halves: an ldmatrix touches 32 banks once
constexpr int LDS = BR + 8;              // the same for dSᵀ's rows of BR queries
constexpr int KV_TILE = BC * LD;         // halves in K_j or V_j
constexpr int Q_TILE = BR * LD;          // halves in one Q_i or dO_i buffer
// dQ_i = dS K_j, BR × D_H in 16 × 8 mma tiles, split over the warps: RT row tiles, each shared by
// WARPS / RT warps that take DQ_COLS of its 8-column blocks.
constexpr int RT = BR / 16;
constexpr int DQ_COLS = (D_H / 8) * RT / WARPS;
constexpr int LAYOUT_BYTES = (2 * KV_TILE + 4 * Q_TILE + BC * LDS) * 2 + 4 * BR * 4;  // halves, then L, D twice
static_assert(D_H % 16 == 0, "mma.m16n8k16 takes d_h in steps of 16");
static_assert(WARPS % RT == 0 && DQ_COLS % 2 == 0, "dQ's tiles must split evenly over the warps");
static_assert(2 * BR <= THREADS, "a thread brings one L or D of the next tile");
static_assert(LAYOUT_BYTES <= SMEM_BYTES, "the host must give each block SMEM_BYTES >= LAYOUT_BYTES");

// acc (16 × BR, BR / 8 blocks) += A X_iᵀ, A the warp's 16 rows of a BC × D_H tile (K_j or V_j),
// X_i a BR × D_H tile (Q_i or dO_i): Xᵀ as the B operand is X read row by row, ldmatrix
// without transpose, two 8-row blocks of X at once.
__device__ __forceinline__ void rows_times_tile_t(float acc[BR / 8][4], const half* A, const half* X, int lane) {
#pragma unroll
    for (int kk = 0; kk < D_H / 16; ++kk) {
        unsigned a[4];  // matrices: rows +0/+8 (lane / 8 odd), columns +0/+8 (lane ≥ 16)
        ldmatrix_x4(a, A + (lane % 8 + 8 * (lane / 8 % 2)) * LD + 16 * kk + 8 * (lane / 16));
#pragma unroll
        for (int nb = 0; nb < BR / 8; nb += 2) {
            unsigned b[4];  // matrices: rows of X +0/+8 (lane ≥ 16), columns +0/+8 (lane / 8 odd)
            ldmatrix_x4(b, X + (8 * nb + lane % 8 + 8 * (lane / 16)) * LD + 16 * kk + 8 * (lane / 8 % 2));
            mma_16x8x16(acc[nb], a, b);
            mma_16x8x16(acc[nb + 1], a, b + 2);
        }
    }
}

// acc (16 × D_H) += Mᵀ-rows X_i: the A operand is the warp's 16 × BR accumulator m (Pᵀ or dSᵀ)
// as float16 pairs, X_i (BR × D_H) the B operand read down its columns, ldmatrix with transpose.
__device__ __forceinline__ void acc_times_tile(float acc[D_H / 8][4], const float m[BR / 8][4], const half* X,
                                               int lane) {
#pragma unroll
    for (int kk = 0; kk < BR / 16; ++kk) {
        const unsigned a[4] = {pack_half2(m[2 * kk][0], m[2 * kk][1]), pack_half2(m[2 * kk][2], m[2 * kk][3]),
                               pack_half2(m[2 * kk + 1][0], m[2 * kk + 1][1]),
                               pack_half2(m[2 * kk + 1][2], m[2 * kk + 1][3])};
#pragma unroll
        for (int db = 0; db < D_H / 8; db += 2) {
            unsigned b[4];  // matrices: rows of X +0/+8 (lane / 8 odd), columns +0/+8 (lane ≥ 16)
            ldmatrix_x4_trans(b, X + (16 * kk + lane % 8 + 8 * (lane / 8 % 2)) * LD + 8 * db + 8 * (lane / 16));
            mma_16x8x16(acc[db], a, b);
            mma_16x8x16(acc[db + 1], a, b + 2);
        }
    }
}

// dq (16 × 8·DQ_COLS) += dS K_j over all BC keys: query rows 16·rt …, columns 8·col0 …. dS as the A
// operand is dSᵀ read down its columns (ldmatrix with transpose; matrices: queries +0/+8 (lane / 8
// odd), keys +0/+8 (lane ≥ 16)); K_j as the B operand likewise.
__device__ __forceinline__ void ds_times_k(float dq[DQ_COLS][4], const half* dSs, const half* Ks, int rt, int col0,
                                           int lane) {
#pragma unroll
    for (int kk = 0; kk < BC / 16; ++kk) {
        unsigned a[4];
        ldmatrix_x4_trans(a, dSs + (16 * kk + lane % 8 + 8 * (lane / 16)) * LDS + 16 * rt + 8 * (lane / 8 % 2));
#pragma unroll
        for (int db = 0; db < DQ_COLS; db += 2) {
            unsigned bk[4];
            ldmatrix_x4_trans(bk, Ks + (16 * kk + lane % 8 + 8 * (lane / 8 % 2)) * LD + 8 * (col0 + db) + 8 * (lane / 16));
            mma_16x8x16(dq[db], a, bk);
            mma_16x8x16(dq[db + 1], a, bk + 2);
        }
    }
}

#include "bwd_mma_block.cuh"

extern "C" __global__ void __launch_bounds__(THREADS) flash_attention_bwd_mma(
    const half* __restrict__ Q, const half* __restrict__ K, const half* __restrict__ V,
    const half* __restrict__ dO, const float* __restrict__ L, const float* __restrict__ D,
    float* __restrict__ dQ, float* __restrict__ dK, float* __restrict__ dV,
    const int n_q, const int n_k, const int h, const int h_kv, const float scale, const int causal,
    const int* __restrict__ DOC, const int* __restrict__ DOC_KEYS)
{
    extern __shared__ __align__(128) unsigned char smem[];
    backward_block(smem, Q, K, V, dO, L, D, dQ, dK, dV, n_q, n_k, h, h_kv, scale, causal, DOC, DOC_KEYS);
}
