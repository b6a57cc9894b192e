// FlashAttention-2's backward pass for float32 Q, K, V, dO on tensor cores: mma.sync.m16n8k8 in TF32,
// each number split in two ("3xTF32", as flash_attention_fwd_mma_tf32.cu) to keep float32's accuracy:
//
//   a b ≈ a_lo b_hi + a_hi b_lo + a_hi b_hi,   x_hi = tf32(x), x_lo = tf32(x - x_hi)
//
// Otherwise this is flash_attention_bwd_mma.cu, the float16 kernel: the same formulas,
//
//   P_ij  = e^(S_ij - L_i),  dV_j += P_ijᵀ dO_i,  dP_ij = dO_i · v_j,  dS_ij = P_ij (dP_ij - D_i),
//   dK_j += dS_ijᵀ Q_i · scale,  dQ_i += dS_ij K_j · scale,
//
// the same blocks (64 keys, 16 a warp, dK_j and dV_j in accumulators; Q_i, dO_i, L_i, D_i
// double-buffered with cp.async; key tile 0 of every head first), but query tiles of 32 rows, so
// that float32 tiles leave room for two blocks a multiprocessor (77.5 KiB at d_h = 64), and
// the same dSᵀ through shared memory for dQ's atomicAdd: one block, bwd_mma_block.cuh. What differs
// is the operands' layout, one float a register (mma_ptx.cuh): A (16×8) a[0] = A[g][t],
// a[1] = A[g+8][t], a[2] = A[g][t+4], a[3] = A[g+8][t+4]; B (8×8) b[0] = B[t][g], b[1] = B[t+4][g];
// read from shared memory as they are, rows padded by 4 floats so that each load of a warp touches
// every bank once. For dV_w += Pᵀ dO_i and dK_w += dSᵀ Q_i the accumulator holds Pᵀ[g][2t, 2t+1] of
// each 8 queries where A wants [g][t, t+4]: the sum over 8 queries runs in the order 0, 2, 4, 6, 1, 3,
// 5, 7, so the accumulator is the A operand as it stands and B is dO_i (Q_i) in that order, rows 2t
// and 2t + 1.
//
// Compile-time constants (-D options): D_H head size (a multiple of 8), SMEM_BYTES the dynamic
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
constexpr int BR = 32;                   // query rows per tile: float32 tiles twice the bytes, half the rows
constexpr int WARPS = BC / 16;
constexpr int THREADS = 32 * WARPS;
constexpr int LD = D_H + 4;              // floats a shared row: LD ≡ 4 (mod 32) spreads a fragment over the banks
constexpr int LDS = BR + 4;              // the same for dSᵀ's rows of BR queries
constexpr int KV_TILE = BC * LD;         // floats in K_j or V_j
constexpr int Q_TILE = BR * LD;          // floats in one Q_i or dO_i buffer
constexpr int RT = BR / 16;              // dQ_i's 16-row tiles, each shared by WARPS / RT warps
constexpr int DQ_COLS = (D_H / 8) * RT / WARPS;  // 8-column blocks of dQ_i a warp computes
constexpr int LAYOUT_BYTES = 4 * (2 * KV_TILE + 4 * Q_TILE + BC * LDS + 4 * BR);
static_assert(D_H % 8 == 0, "mma.m16n8k8 takes d_h in steps of 8");
static_assert(LD % 32 == 4 && LDS % 32 == 4, "the padding that spreads fragment loads over the banks");
static_assert(WARPS % RT == 0 && (D_H / 8) * RT % WARPS == 0, "dQ's tiles must split evenly over the warps");
static_assert(2 * BR <= THREADS, "a thread brings one L or D of the next tile");
static_assert(LAYOUT_BYTES <= SMEM_BYTES, "the host must give each block SMEM_BYTES >= LAYOUT_BYTES");

// acc (16 × BR) += A X_iᵀ: A the warp's 16 rows of K_j or V_j, X_i (BR × D_H) Q_i or dO_i, whose
// transpose as the B operand is X read along its rows: b[0] = X[8nb + g][8kk + t].
__device__ __forceinline__ void rows_times_tile_t(float acc[BR / 8][4], const float* A, const float* X, int lane) {
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int kk = 0; kk < D_H / 8; ++kk) {
        unsigned a_hi[4], a_lo[4];
        split_tf32(A[g * LD + 8 * kk + t], a_hi[0], a_lo[0]);
        split_tf32(A[(g + 8) * LD + 8 * kk + t], a_hi[1], a_lo[1]);
        split_tf32(A[g * LD + 8 * kk + t + 4], a_hi[2], a_lo[2]);
        split_tf32(A[(g + 8) * LD + 8 * kk + t + 4], a_hi[3], a_lo[3]);
#pragma unroll
        for (int nb = 0; nb < BR / 8; ++nb) {
            const float* x = X + (8 * nb + g) * LD + 8 * kk;
            unsigned b_hi[2], b_lo[2];
            split_tf32(x[t], b_hi[0], b_lo[0]);
            split_tf32(x[t + 4], b_hi[1], b_lo[1]);
            mma_3xtf32(acc[nb], a_hi, a_lo, b_hi, b_lo);
        }
    }
}

// acc (16 × D_H) += M X_i: M the warp's 16 × BR accumulator (Pᵀ or dSᵀ) as the A operand, its 8
// queries a step in the order 0, 2, 4, 6, 1, 3, 5, 7 (mma_operands.cuh).
__device__ __forceinline__ void acc_times_tile(float (&acc)[D_H / 8][4], const float (&m)[BR / 8][4], const float* X,
                                               int lane) {
    tf32_acc_times_rows<BR, D_H, LD>(acc, m, X, lane / 4, lane % 4);
}

// dq (16 × 8·DQ_COLS) += dS K_j over all BC keys: query rows 16·rt …, columns 8·col0 …. A = dS
// (queries × keys) is dSᵀ read down its columns; B = K_j read down its columns.
__device__ __forceinline__ void ds_times_k(float dq[DQ_COLS][4], const float* dSs, const float* Ks, int rt, int col0,
                                           int lane) {
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int kk = 0; kk < BC / 8; ++kk) {
        const float* ds = dSs + (8 * kk + t) * LDS + 16 * rt + g;  // dS[16rt + g][8kk + t]
        unsigned a_hi[4], a_lo[4];
        split_tf32(ds[0], a_hi[0], a_lo[0]);
        split_tf32(ds[8], a_hi[1], a_lo[1]);
        split_tf32(ds[4 * LDS], a_hi[2], a_lo[2]);
        split_tf32(ds[4 * LDS + 8], a_hi[3], a_lo[3]);
        const float* k = Ks + (8 * kk + t) * LD + 8 * col0 + g;  // K[8kk + t][8(col0 + db) + g]
#pragma unroll
        for (int db = 0; db < DQ_COLS; ++db) {
            unsigned b_hi[2], b_lo[2];
            split_tf32(k[8 * db], b_hi[0], b_lo[0]);
            split_tf32(k[4 * LD + 8 * db], b_hi[1], b_lo[1]);
            mma_3xtf32(dq[db], a_hi, a_lo, b_hi, b_lo);
        }
    }
}

#include "bwd_mma_block.cuh"

extern "C" __global__ void __launch_bounds__(THREADS) flash_attention_bwd_mma_tf32(
    const float* __restrict__ Q, const float* __restrict__ K, const float* __restrict__ V,
    const float* __restrict__ dO, const float* __restrict__ L, const float* __restrict__ D,
    float* __restrict__ dQ, float* __restrict__ dK, float* __restrict__ dV,
    const int n_q, const int n_k, const int h, const int h_kv, const float scale, const int causal,
    const int* __restrict__ DOC, const int* __restrict__ DOC_KEYS)
{
    extern __shared__ __align__(128) unsigned char smem[];
    backward_block(smem, Q, K, V, dO, L, D, dQ, dK, dV, n_q, n_k, h, h_kv, scale, causal, DOC, DOC_KEYS);
}
