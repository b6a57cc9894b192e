// The block of the two tensor-core backward kernels, flash_attention_bwd_mma.cu (float16) and
// flash_attention_bwd_mma_tf32.cu (float32): its setup, the loop over query tiles and dK, dV written
// out, as flash_attention_bwd_mma.cu describes them. The two differ in the element type T and in how
// their products read operands, so the file that includes this one defines, before it:
//
//   constants  D_H, BC, BR, WARPS, THREADS, LD, LDS, KV_TILE, Q_TILE, RT, DQ_COLS (the tiles and their padding)
//   rows_times_tile_t(acc, A, X, lane)      acc (16 × BR) += A X_iᵀ: Sᵀ = K_w Q_iᵀ, dPᵀ = V_w dO_iᵀ
//   acc_times_tile(acc, m, X, lane)         acc (16 × D_H) += M X_i, M a 16 × BR accumulator:
//                                           dV_w += Pᵀ dO_i, dK_w += dSᵀ Q_i
//   ds_times_k(dq, dSs, Ks, rt, col0, lane) dq (16 × 8·DQ_COLS) += dS K_j: query rows 16·rt …,
//                                           columns 8·col0 …, all BC keys
//
// Include after mma_operands.cuh, packed_rows.cuh and bwd_tiles.cuh.
#pragma once

// dSᵀ -> shared memory as float16 or float32 pairs (store_pair): the lane's keys 16w + g (+8), queries
// 8nb + 2t and 8nb + 2t + 1.
template <class T>
__device__ __forceinline__ void store_ds_t(T* dSs, const float ds[BR / 8][4], int warp, int lane) {
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int nb = 0; nb < BR / 8; ++nb) {
        store_pair(dSs + (16 * warp + g) * LDS + 8 * nb + 2 * t, ds[nb][0], ds[nb][1]);
        store_pair(dSs + (16 * warp + g + 8) * LDS + 8 * nb + 2 * t, ds[nb][2], ds[nb][3]);
    }
}

// smem: the block's dynamic shared memory (SMEM_BYTES), declared by the kernel.
template <class T>
__device__ __forceinline__ void backward_block(
    unsigned char* smem, const T* __restrict__ Q, const T* __restrict__ K, const T* __restrict__ V,
    const T* __restrict__ dO, const float* __restrict__ L, const float* __restrict__ D,
    float* __restrict__ dQ, float* __restrict__ dK, float* __restrict__ dV,
    const int n_q, const int n_k, const int h, const int h_kv, const float scale, const int causal,
    const int* __restrict__ DOC, const int* __restrict__ DOC_KEYS)
{
    T* Ks = reinterpret_cast<T*>(smem);        // [BC][LD]
    T* Vs = Ks + KV_TILE;                      // [BC][LD]
    T* Qs = Vs + KV_TILE;                      // Q_i at Qs + (i % 2)·Q_TILE
    T* dOs = Qs + 2 * Q_TILE;                  // dO_i at dOs + (i % 2)·Q_TILE
    T* dSs = dOs + 2 * Q_TILE;                 // [BC][LDS]: dSᵀ, a key a row
    float* Ls = reinterpret_cast<float*>(dSs + BC * LDS);  // L_i at Ls + (i % 2)·BR
    float* Ds = Ls + 2 * BR;                   // D_i at Ds + (i % 2)·BR

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int g = lane / 4, t = lane % 4;      // this lane: rows g, g+8; columns 2t, 2t+1 of each 8
    // Blocks start in the order of blockIdx.x + Tc·blockIdx.y; handing them out as key tile 0 of every
    // head, then tile 1, … starts the blocks with the most query rows to visit first.
    const int start = blockIdx.x + gridDim.x * blockIdx.y;
    const int bh = start % gridDim.y;          // which (batch, query head)
    const int tile = start / gridDim.y;        // which key tile
    const int b = bh / h, head = bh % h;
    const int kv_head = head / (h / h_kv);     // GQA: the key/value head this query head reads
    const int j0 = tile * BC;                  // first key of this tile
    const int offset = n_k - n_q;              // absolute position of query row r is r + offset
    const int keys[2] = {j0 + 16 * warp + g, j0 + 16 * warp + g + 8};  // this lane's two keys
    const T* Qg = Q + (size_t)bh * n_q * D_H;
    const T* dOg = dO + (size_t)bh * n_q * D_H;
    const float* Lg = L + (size_t)bh * n_q;
    const float* Dg = D + (size_t)bh * n_q;
    const size_t kv_base = ((size_t)b * h_kv + kv_head) * n_k * D_H;
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
        if (tid < BR) return r < n_q ? Lg[r] : INFINITY;  // rows past n_q: P = 0
        return r < n_q ? Dg[r] : 0.f;
    };
    if (tid < 2 * BR) (tid < BR ? Ls : Ds)[tid % BR] = row_value(r_first);

    float dk[D_H / 8][4] = {}, dv[D_H / 8][4] = {};  // this warp's 16 rows of dK_j, dV_j
    const T* Kw = Ks + 16 * warp * LD;               // this warp's keys in K_j, V_j
    const T* Vw = Vs + 16 * warp * LD;

    int buf = 0;
    for (int r0 = r_first; r0 < row_end; r0 += BR, buf ^= 1) {
        const T* Qi = Qs + buf * Q_TILE;
        const T* dOi = dOs + buf * Q_TILE;
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
        rows_times_tile_t(s, Kw, Qi, lane);
        rows_times_tile_t(dp, Vw, dOi, lane);

        // Pᵀ and dSᵀ in place of Sᵀ and dPᵀ. A pair is masked only in a tile that holds one some
        // row may not see: past n_k or n_q, across the causal diagonal, or of another document.
        const bool other_docs = doc && !tile_in_document(doc, r0, BR, n_q, block_doc, lane);
        const bool edge = j0 + BC > n_k || r0 + BR > n_q || (causal && j0 + BC - 1 > r0 + offset) || other_docs;
        p_and_ds<BR>(s, dp, Li, Di, r0, t, keys, key_doc, edge, n_q, n_k, causal, offset, doc, scale);

        acc_times_tile(dv, s, dOi, lane);  // dV_w += Pᵀ dO_i
        acc_times_tile(dk, dp, Qi, lane);  // dK_w += dSᵀ Q_i (· scale at the end)

        store_ds_t(dSs, dp, warp, lane);  // dSᵀ -> shared memory
        __syncthreads();  // dSᵀ of all 64 keys is in

        // dQ_i += dS K_j · scale. Warp w: row tile w % RT, 8-column blocks from (w / RT)·DQ_COLS.
        const int rt = warp % RT, col0 = (warp / RT) * DQ_COLS;
        float dq[DQ_COLS][4] = {};
        ds_times_k(dq, dSs, Ks, rt, col0, lane);
        add_to_dq<DQ_COLS, D_H>(dQ + (size_t)bh * n_q * D_H, dq, r0 + 16 * rt, 8 * col0, n_q, g, t, scale);
        if (more && tid < 2 * BR) (tid < BR ? Ls : Ds)[(buf ^ 1) * BR + tid % BR] = next;  // tile i-1's L, D are read
    }

    // dK_w · scale and dV_w -> HBM, per query head: (b, h, n_k, d_h).
    write_dk_dv<D_H>(dK + (size_t)bh * n_k * D_H, dV + (size_t)bh * n_k * D_H, dk, dv, keys, n_k, t, scale);
}
