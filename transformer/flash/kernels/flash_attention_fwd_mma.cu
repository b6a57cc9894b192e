// FlashAttention-2's forward with S, P and O in registers: float16 Q, K, V, float32 accumulation.
//
// flash_attention_fwd_tc.cu sends S and O through shared memory on every tile, because a WMMA
// fragment has no documented layout: a lane cannot know which rows its elements belong to.
// The PTX instruction mma.sync.m16n8k16 has one (mma_ptx.cuh): lane 4g + t holds rows g and
// g + 8, columns 2t and 2t + 1 of each 16×8 accumulator tile. So, as in FlashAttention-2:
//   - each lane takes the softmax of the scores it holds; a row's max needs only the 4 lanes
//     of its group (two shuffles), and its sum not even those until the very end;
//   - the accumulator of S = Q Kᵀ, rounded to float16 pairs, already is the A operand of P V:
//     S and P never leave registers, and O stays in registers until it is written out.
//
//   grid  = (Tr, b·h)   one block per (batch·head, tile of Br = 128 query rows), the tiles
//                       furthest down first, of every head: with causal, they have the most
//                       keys to read
//   block = 4 warps     warp w owns query rows 32w … 32w+31 of the tile: two 16-row mma tiles
//                       (as FlashAttention-2), so each K_j, V_j fragment read from shared
//                       memory feeds two products (d_h = 128: 8 warps of one tile each)
//
// K_j, V_j (Bc = 64 keys) are double-buffered in shared memory: cp.async copies tile j+1
// HBM -> SRAM while the tensor cores work on tile j. Per warp and tile, for each of its
// 16-row tiles Q_w:
//
//   S     = Q_w K_jᵀ                       mma.sync; 16×Bc float32 in registers
//   m_new = max(m, rowmax(S · scale))       masked keys count as -∞
//   P     = e^(S · scale - m_new)           float32, then float16 pairs for the product
//   l     = l · e^(m - m_new) + rowsum(P)   each lane sums its own columns
//   O_w   = diag(e^(m - m_new)) O_w + P V_j
//
// and at the end O = O_w / l (float16) and lse = m + log l (float32). Exponentials are taken
// base 2, e^(x - m) = 2^((x - m)·log2 e), one ex2 instruction (mma_softmax.cuh). As in the
// other kernels: causal rows sit at position i + n_k - n_q, key tiles wholly past the block's
// last visible key are skipped, a row that sees no key gets O = 0 and lse = -∞, and query
// head `head` reads key/value head head / (h / h_kv) (GQA/MQA). Packed rows (DOC, DOC_KEYS;
// null for one sequence a row): packed_rows.cuh; a tile is masked unless the block's rows
// and its keys all belong to one document.
//
// Compile-time constants (-D options): D_H head size (a multiple of 16), SMEM_BYTES the
// dynamic shared memory the host gives each block, BLOCK_THREADS the threads it launches a
// block with (both checked below).

#include <cuda_fp16.h>
#include "mma_ptx.cuh"
#include "mma_operands.cuh"
#include "mma_softmax.cuh"

#ifndef D_H
#define D_H 64
#endif
#ifndef SMEM_BYTES
#define SMEM_BYTES 0
#endif

constexpr int BR = 128;                 // query rows per block
constexpr int BC = 64;                  // keys per K/V tile
// 16-row mma tiles per warp: two where the registers hold them (d_h ≤ 64), so that each K_j, V_j
// fragment read from shared memory feeds two products; at d_h = 128, O alone would take 128
// registers a lane for two, and a warp takes one (8 warps a block).
constexpr int MT = D_H <= 64 ? 2 : 1;
constexpr int WARPS = BR / (16 * MT);   // 4 warps of 32 query rows, or 8 of 16
constexpr int THREADS = 32 * WARPS;
// A shared row is padded by 8 halves (16 bytes): the 8 rows one ldmatrix matrix reads then
// start 4 banks apart and cover all 32 banks once.
constexpr int LD = D_H + 8;
constexpr int Q_TILE = BR * LD;         // halves in the Q tile
constexpr int KV_TILE = BC * LD;        // halves in one K_j or V_j buffer
constexpr int LAYOUT_BYTES = (Q_TILE + 4 * KV_TILE) * 2;  // Q, then K_j and V_j twice each
static_assert(D_H % 16 == 0, "mma.m16n8k16 takes d_h in steps of 16");
static_assert(LAYOUT_BYTES <= SMEM_BYTES, "the host must give each block SMEM_BYTES >= LAYOUT_BYTES");
#ifdef BLOCK_THREADS  // the threads the host launches a block with (flash_cuda.block_threads)
static_assert(THREADS == BLOCK_THREADS, "the host must launch THREADS threads a block");
#endif

extern "C" __global__ void __launch_bounds__(THREADS, 256 / THREADS) flash_attention_fwd_mma(
    const half* __restrict__ Q, const half* __restrict__ K, const half* __restrict__ V,
    half* __restrict__ O, float* __restrict__ LSE,
    const int n_q, const int n_k, const int h, const int h_kv, const float scale, const int causal,
    const int* __restrict__ DOC, const int* __restrict__ DOC_KEYS)
{
    extern __shared__ __align__(128) unsigned char smem[];
    half* Qs = reinterpret_cast<half*>(smem);   // [BR][LD]
    half* Ks = Qs + Q_TILE;                     // K_j at Ks + (j % 2)·KV_TILE
    half* Vs = Ks + 2 * KV_TILE;                // V_j at Vs + (j % 2)·KV_TILE

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int g = lane / 4, t = lane % 4;       // this lane: rows g, g+8; columns 2t, 2t+1 of each 8
    // Blocks start in the order of blockIdx.x + Tr·blockIdx.y. Handing them out as the last query
    // tile of every head, then the one before, … starts the longest causal rows first, so the
    // short ones fill the end.
    const int start = blockIdx.x + gridDim.x * blockIdx.y;
    const int bh = start % gridDim.y;           // which (batch, query head)
    const int b = bh / h, head = bh % h;
    const int kv_head = head / (h / h_kv);      // GQA: the key/value head this query head reads
    const int tile = gridDim.x - 1 - start / gridDim.y;  // the query tile
    const int row0 = tile * BR;                 // first query row of this tile
    const int offset = n_k - n_q;               // absolute position of query row r is r + offset
    int rows[MT][2];                            // this lane's query rows: g and g + 8 of each mma tile
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) rows[mt][0] = row0 + 16 * (MT * warp + mt) + g, rows[mt][1] = rows[mt][0] + 8;
    const half* Qg = Q + (size_t)bh * n_q * D_H;
    const half* Kg = K + ((size_t)b * h_kv + kv_head) * n_k * D_H;
    const half* Vg = V + ((size_t)b * h_kv + kv_head) * n_k * D_H;
    const int* doc = DOC ? DOC + (size_t)b * n_k : nullptr;  // this batch row's documents, or none
    int my_doc[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
        my_doc[mt][0] = doc_of_row(doc, rows[mt][0], n_q), my_doc[mt][1] = doc_of_row(doc, rows[mt][1], n_q);
    const int block_doc = block_document(doc, row0, BR, n_q, lane);  // the one document of all the block's rows, or -1

    // Tile skipping: the keys the tile's documents span (all n_k without documents), and,
    // when causal, none past the tile's last row, which sees keys up to row0 + BR - 1 + offset.
    int key_first, key_end;
    doc_key_span(DOC_KEYS, b, tile, gridDim.x, n_k, key_first, key_end);
    if (causal) key_end = min(key_end, row0 + BR + offset);
    const int j_first = key_first / BC;                        // key tiles j_first … Tc-1 to visit
    const int Tc = key_end > 0 ? (key_end + BC - 1) / BC : 0;

    // The Q tile and the first K_j, V_j: HBM -> SRAM; then this warp's rows of Q into registers as
    // A operands, d_h / 16 of them per mma tile, kept for the whole loop.
    copy_rows_async<BR, D_H, LD, THREADS>(Qs, Qg, row0, n_q);
    if (j_first < Tc) {
        copy_rows_async<BC, D_H, LD, THREADS>(Ks + (j_first % 2) * KV_TILE, Kg, j_first * BC, n_k);
        copy_rows_async<BC, D_H, LD, THREADS>(Vs + (j_first % 2) * KV_TILE, Vg, j_first * BC, n_k);
    }
    cp_async_commit();
    cp_async_wait_all();
    __syncthreads();
    unsigned q_frag[MT][D_H / 16][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int kk = 0; kk < D_H / 16; ++kk)  // matrices: rows +0/+8 (lane / 8 odd), columns +0/+8 (lane ≥ 16)
            ldmatrix_x4(q_frag[mt][kk],
                        Qs + (16 * (MT * warp + mt) + lane % 8 + 8 * (lane / 8 % 2)) * LD + 16 * kk + 8 * (lane / 16));

    float o[MT][D_H / 8][4] = {};               // O_w: 2 rows × 2 columns of each 8-column block
    float m[MT][2], l[MT][2];                   // running max of S · scale and sum (this lane's columns)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) m[mt][0] = m[mt][1] = -INFINITY, l[mt][0] = l[mt][1] = 0.f;

    for (int j = j_first; j < Tc; ++j) {
        const int j0 = j * BC;
        const half* Kj = Ks + (j % 2) * KV_TILE;
        const half* Vj = Vs + (j % 2) * KV_TILE;
        if (j > j_first) {
            cp_async_wait_all();                // this thread's part of tile j has landed
            __syncthreads();                    // everyone's has; every warp is done with tile j-1
        }
        if (j + 1 < Tc) {                       // start tile j+1 into the buffer tile j-1 used
            copy_rows_async<BC, D_H, LD, THREADS>(Ks + ((j + 1) % 2) * KV_TILE, Kg, j0 + BC, n_k);
            copy_rows_async<BC, D_H, LD, THREADS>(Vs + ((j + 1) % 2) * KV_TILE, Vg, j0 + BC, n_k);
            cp_async_commit();
        }

        // S = Q_w K_jᵀ. Kᵀ as the B operand is K read row by row: ldmatrix without transpose
        // gives b for two 8-key blocks at once (matrices: keys +0/+8 (lane ≥ 16), d +0/+8),
        // used by both mma tiles.
        float s[MT][BC / 8][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int nb = 0; nb < BC / 8; ++nb) s[mt][nb][0] = s[mt][nb][1] = s[mt][nb][2] = s[mt][nb][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < D_H / 16; ++kk) {
#pragma unroll
            for (int nb = 0; nb < BC / 8; nb += 2) {
                unsigned k_frag[4];
                ldmatrix_x4(k_frag, Kj + (8 * nb + lane % 8 + 8 * (lane / 16)) * LD + 16 * kk + 8 * (lane / 8 % 2));
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    mma_16x8x16(s[mt][nb], q_frag[mt][kk], k_frag);
                    mma_16x8x16(s[mt][nb + 1], q_frag[mt][kk], k_frag + 2);
                }
            }
        }

        // Scale, mask only where this tile holds a key some row of the block cannot see, and
        // take the online softmax of the lane's rows (mma_softmax.cuh): P replaces S in s.
        const bool other_docs = doc && !tile_in_document(doc, j0, BC, n_k, block_doc, lane);  // packed rows
        const bool edge = j0 + BC > n_k || (causal && j0 + BC - 1 > row0 + offset) || other_docs;
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
            scale_and_mask(s[mt], rows[mt], t, j0, n_k, causal, offset, doc, my_doc[mt], edge, scale);
            online_softmax(s[mt], o[mt], m[mt], l[mt]);
        }

        // O_w += P V_j, 16 keys at a time. P's A operand is two neighbouring S tiles: the
        // accumulator layout of an 8-key block is the A layout of half a 16-key step. V as
        // the B operand is V read down its columns: ldmatrix with transpose (matrices:
        // keys +0/+8 (lane / 8 odd), d +0/+8 (lane ≥ 16)), used by both mma tiles.
#pragma unroll
        for (int kk = 0; kk < BC / 16; ++kk) {
            unsigned p_frag[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                p_frag[mt][0] = pack_half2(s[mt][2 * kk][0], s[mt][2 * kk][1]);
                p_frag[mt][1] = pack_half2(s[mt][2 * kk][2], s[mt][2 * kk][3]);
                p_frag[mt][2] = pack_half2(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
                p_frag[mt][3] = pack_half2(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
            }
#pragma unroll
            for (int db = 0; db < D_H / 8; db += 2) {
                unsigned v_frag[4];
                ldmatrix_x4_trans(v_frag, Vj + (16 * kk + lane % 8 + 8 * (lane / 8 % 2)) * LD + 8 * db + 8 * (lane / 16));
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    mma_16x8x16(o[mt][db], p_frag[mt], v_frag);
                    mma_16x8x16(o[mt][db + 1], p_frag[mt], v_frag + 2);
                }
            }
        }
    }

    // One final normalisation (FlashAttention-2): O = O_w / l, lse = m + log l.
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
        float inv_l[2], lse[2];
        finish_rows(m[mt], l[mt], inv_l, lse);
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const int i = rows[mt][r];
            if (i >= n_q) continue;             // the last tile may be partial
            half* o_out = O + ((size_t)bh * n_q + i) * D_H;
#pragma unroll
            for (int db = 0; db < D_H / 8; ++db)
                store_pair(o_out + 8 * db + 2 * t, o[mt][db][2 * r] * inv_l[r], o[mt][db][2 * r + 1] * inv_l[r]);
            if (t == 0) LSE[(size_t)bh * n_q + i] = lse[r];
        }
    }
}
