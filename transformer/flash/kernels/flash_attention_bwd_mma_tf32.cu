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
// the same dSᵀ through shared memory for dQ's atomicAdd. What differs is the operands' layout, one
// float a register (mma_ptx.cuh): A (16×8) a[0] = A[g][t], a[1] = A[g+8][t], a[2] = A[g][t+4],
// a[3] = A[g+8][t+4]; B (8×8) b[0] = B[t][g], b[1] = B[t+4][g]; read from shared memory as they are,
// rows padded by 4 floats so that each load of a warp touches every bank once. For
// dV_w += Pᵀ dO_i and dK_w += dSᵀ Q_i the accumulator holds Pᵀ[g][2t, 2t+1] of each 8 queries where
// A wants [g][t, t+4]: the sum over 8 queries runs in the order 0, 2, 4, 6, 1, 3, 5, 7, so the
// accumulator is the A operand as it stands and B is dO_i (Q_i) in that order, rows 2t and 2t + 1.
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
__device__ __forceinline__ void rows_times_tile_t(float acc[BR / 8][4], const float* A, const float* X, int g, int t) {
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
// queries a step in the order 0, 2, 4, 6, 1, 3, 5, 7; X_i (BR × D_H) in that order: rows 2t, 2t + 1.
__device__ __forceinline__ void acc_times_tile(float acc[D_H / 8][4], const float m[BR / 8][4], const float* X,
                                               int g, int t) {
#pragma unroll
    for (int nb = 0; nb < BR / 8; ++nb) {
        unsigned a_hi[4], a_lo[4];
        split_tf32(m[nb][0], a_hi[0], a_lo[0]);  // M[g][2t]
        split_tf32(m[nb][2], a_hi[1], a_lo[1]);  // M[g+8][2t]
        split_tf32(m[nb][1], a_hi[2], a_lo[2]);  // M[g][2t+1]
        split_tf32(m[nb][3], a_hi[3], a_lo[3]);  // M[g+8][2t+1]
        const float* x = X + (8 * nb + 2 * t) * LD;  // queries 8nb + 2t and 8nb + 2t + 1
#pragma unroll
        for (int db = 0; db < D_H / 8; ++db) {
            unsigned b_hi[2], b_lo[2];
            split_tf32(x[8 * db + g], b_hi[0], b_lo[0]);
            split_tf32(x[LD + 8 * db + g], b_hi[1], b_lo[1]);
            mma_3xtf32(acc[db], a_hi, a_lo, b_hi, b_lo);
        }
    }
}

extern "C" __global__ void __launch_bounds__(THREADS) flash_attention_bwd_mma_tf32(
    const float* __restrict__ Q, const float* __restrict__ K, const float* __restrict__ V,
    const float* __restrict__ dO, const float* __restrict__ L, const float* __restrict__ D,
    float* __restrict__ dQ, float* __restrict__ dK, float* __restrict__ dV,
    const int n_q, const int n_k, const int h, const int h_kv, const float scale, const int causal,
    const int* __restrict__ DOC, const int* __restrict__ DOC_KEYS)
{
    extern __shared__ __align__(128) unsigned char smem[];
    float* Ks = reinterpret_cast<float*>(smem);  // [BC][LD]
    float* Vs = Ks + KV_TILE;                    // [BC][LD]
    float* Qs = Vs + KV_TILE;                    // Q_i at Qs + (i % 2)·Q_TILE
    float* dOs = Qs + 2 * Q_TILE;                // dO_i at dOs + (i % 2)·Q_TILE
    float* dSs = dOs + 2 * Q_TILE;               // [BC][LDS]: dSᵀ, a key a row
    float* Ls = dSs + BC * LDS;                  // L_i · log2 e at Ls + (i % 2)·BR
    float* Ds = Ls + 2 * BR;                     // D_i at Ds + (i % 2)·BR

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int g = lane / 4, t = lane % 4;        // this lane: rows g, g+8; columns 2t, 2t+1 of each 8
    // Blocks start in the order of blockIdx.x + Tc·blockIdx.y; handing them out as key tile 0 of every
    // head, then tile 1, … starts the blocks with the most query rows to visit first.
    const int start = blockIdx.x + gridDim.x * blockIdx.y;
    const int bh = start % gridDim.y;            // which (batch, query head)
    const int tile = start / gridDim.y;          // which key tile
    const int b = bh / h, head = bh % h;
    const int kv_head = head / (h / h_kv);       // GQA: the key/value head this query head reads
    const int j0 = tile * BC;                    // first key of this tile
    const int offset = n_k - n_q;                // absolute position of query row r is r + offset
    const int keys[2] = {j0 + 16 * warp + g, j0 + 16 * warp + g + 8};  // this lane's two keys
    const float* Qg = Q + (size_t)bh * n_q * D_H;
    const float* dOg = dO + (size_t)bh * n_q * D_H;
    const float* Lg = L + (size_t)bh * n_q;
    const float* Dg = D + (size_t)bh * n_q;
    const size_t kv_base = ((size_t)b * h_kv + kv_head) * n_k * D_H;
    const float scale_log2 = scale * 1.4426950408889634f;  // scale · log2 e
    const int* doc = DOC ? DOC + (size_t)b * n_k : nullptr;  // this batch row's documents, or none
    const int key_doc[2] = {doc_of_row(doc, keys[0], n_k), doc_of_row(doc, keys[1], n_k)};
    const int block_doc = block_document(doc, j0, BC, n_k, lane);  // the one document of all 64 keys, or -1

    // The query rows that may see our keys: those of our keys' documents (all n_q without
    // documents), and, causal, none before j0 - offset, the first row that sees key j0.
    int row_first, row_end;
    doc_key_span(DOC_KEYS, b, tile, gridDim.x, n_q, row_first, row_end);
    if (causal) row_first = max(row_first, j0 - offset);
    const int r_first = max(0, row_first) / BR * BR;

    // K_j, V_j and the first Q_i, dO_i, L_i, D_i: HBM -> SRAM.
    copy_rows_async<BC, D_H, LD, THREADS>(Ks, K + kv_base, j0, n_k);
    copy_rows_async<BC, D_H, LD, THREADS>(Vs, V + kv_base, j0, n_k);
    if (r_first < row_end) {
        copy_rows_async<BR, D_H, LD, THREADS>(Qs, Qg, r_first, n_q);
        copy_rows_async<BR, D_H, LD, THREADS>(dOs, dOg, r_first, n_q);
    }
    cp_async_commit();
    // A thread's share of the next tile's L (threads 0 … BR-1) or D (BR … 2BR-1), read into a
    // register at once and stored to shared memory when no warp reads that buffer any more.
    auto row_value = [&](int r0) -> float {
        const int r = r0 + tid % BR;
        if (tid < BR) return r < n_q ? Lg[r] * 1.4426950408889634f : INFINITY;  // rows past n_q: P = 0
        return r < n_q ? Dg[r] : 0.f;
    };
    if (tid < 2 * BR) (tid < BR ? Ls : Ds)[tid % BR] = row_value(r_first);

    float dk[D_H / 8][4] = {}, dv[D_H / 8][4] = {};  // this warp's 16 rows of dK_j, dV_j
    const float* Kw = Ks + 16 * warp * LD;           // this warp's keys in K_j, V_j
    const float* Vw = Vs + 16 * warp * LD;

    int buf = 0;
    for (int r0 = r_first; r0 < row_end; r0 += BR, buf ^= 1) {
        const float* Qi = Qs + buf * Q_TILE;
        const float* dOi = dOs + buf * Q_TILE;
        const float* Li = Ls + buf * BR;
        const float* Di = Ds + buf * BR;
        cp_async_wait_all();  // this thread's part of tile i has landed
        __syncthreads();      // everyone's has; every warp is done with tile i-1 and its dSᵀ
        const bool more = r0 + BR < row_end;
        float next = 0.f;
        if (more) {           // start tile i+1 into the buffers tile i-1 used
            copy_rows_async<BR, D_H, LD, THREADS>(Qs + (buf ^ 1) * Q_TILE, Qg, r0 + BR, n_q);
            copy_rows_async<BR, D_H, LD, THREADS>(dOs + (buf ^ 1) * Q_TILE, dOg, r0 + BR, n_q);
            cp_async_commit();
            if (tid < 2 * BR) next = row_value(r0 + BR);
        }

        // Sᵀ = K_w Q_iᵀ and dPᵀ = V_w dO_iᵀ: 16 keys × BR queries each.
        float s[BR / 8][4] = {}, dp[BR / 8][4] = {};
        rows_times_tile_t(s, Kw, Qi, g, t);
        rows_times_tile_t(dp, Vw, dOi, g, t);

        // Pᵀ and dSᵀ in place of Sᵀ and dPᵀ. A pair is masked only in a tile that holds one some
        // row may not see: past n_k or n_q, across the causal diagonal, or of another document.
        const bool other_docs = doc && !tile_in_document(doc, r0, BR, n_q, block_doc, lane);
        const bool edge = j0 + BC > n_k || r0 + BR > n_q || (causal && j0 + BC - 1 > r0 + offset) || other_docs;
        p_and_ds<BR>(s, dp, Li, Di, r0, t, keys, key_doc, edge, n_q, n_k, causal, offset, doc, scale_log2);

        acc_times_tile(dv, s, dOi, g, t);  // dV_w += Pᵀ dO_i
        acc_times_tile(dk, dp, Qi, g, t);  // dK_w += dSᵀ Q_i (· scale at the end)

        // dSᵀ -> shared memory: this lane's keys 16w + g (+8), queries 8nb + 2t, +1.
#pragma unroll
        for (int nb = 0; nb < BR / 8; ++nb) {
            *reinterpret_cast<float2*>(dSs + (16 * warp + g) * LDS + 8 * nb + 2 * t) = make_float2(dp[nb][0], dp[nb][1]);
            *reinterpret_cast<float2*>(dSs + (16 * warp + g + 8) * LDS + 8 * nb + 2 * t) =
                make_float2(dp[nb][2], dp[nb][3]);
        }
        __syncthreads();  // dSᵀ of all 64 keys is in

        // dQ_i += dS K_j · scale. Warp w: row tile w % RT, 8-column blocks from (w / RT)·DQ_COLS.
        // A = dS (queries × keys) is dSᵀ read down its columns; B = K_j read down its columns.
        const int rt = warp % RT, col0 = (warp / RT) * DQ_COLS;
        float dq[DQ_COLS][4] = {};
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
        add_to_dq<DQ_COLS, D_H>(dQ + (size_t)bh * n_q * D_H, dq, r0 + 16 * rt, 8 * col0, n_q, g, t, scale);
        if (more && tid < 2 * BR) (tid < BR ? Ls : Ds)[(buf ^ 1) * BR + tid % BR] = next;  // tile i-1's L, D are read
    }

    // dK_w · scale and dV_w -> HBM, per query head: (b, h, n_k, d_h).
    write_dk_dv<D_H>(dK + (size_t)bh * n_k * D_H, dV + (size_t)bh * n_k * D_H, dk, dv, keys, n_k, t, scale);
}
