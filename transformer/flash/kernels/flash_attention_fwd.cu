// FlashAttention forward (FlashAttention-2 loop order) as a CUDA kernel, compiled by CuPy.
//
// The NumPy version in transformer/flash.py can only simulate the memory hierarchy; here the
// tiles really live in on-chip shared memory (SRAM) and the running statistics in registers:
//
//   grid  = (Tr, b·h)     one thread block per (batch·head, query tile of Br rows)
//   block = Br threads    one thread per query row i of the tile
//
// For its row i a thread keeps, in registers,
//   m   running max of the scores seen so far
//   l   running sum of e^(s - m)
//   acc running (un-normalised) output row, d_h floats
// and walks the key/value tiles j = 0 … Tc-1 that the block stages through shared memory:
//
//   S_ij   = q_i · k_j / √d_h                 for the Bc keys of the tile
//   m_new  = max(m, max_j S_ij)
//   P_ij   = e^(S_ij - m_new)
//   l      = l · e^(m - m_new) + Σ_j P_ij
//   acc    = acc · e^(m - m_new) + Σ_j P_ij v_j
//   m      = m_new
//
// and at the end writes O_i = acc / l and lse_i = m + log l. HBM is read once for Q, once per
// query tile for K and V, and written once for O: the n×n matrix never leaves the chip.
//
// Compile-time constants (CuPy passes -D options): D_H head size, BR query rows per block,
// BC keys per tile, SCALAR_T the input/output element type (float or __half). Shared memory
// is (D_H·BR + 2·BC·D_H) floats, which must stay within the 48 KiB a block has statically:
// the host halves BC for d_h = 128.
// Inputs are contiguous: Q, O (b, h, n_q, d_h); K, V (b, h_kv, n_k, d_h); LSE (b, h, n_q) float32.
// GQA/MQA: query head `head` reads key/value head head / (h / h_kv).
// causal: query row i sits at absolute position i + (n_k - n_q) and sees keys j ≤ that position
// (the convention of transformer.causal_mask); whole key tiles past the tile's last visible key
// are skipped. A row that sees no key gets O = 0 and lse = -inf (as scaled_dot_product_attention).
// Packed rows (DOC, DOC_KEYS; null for one sequence a row): packed_rows.cuh.

#include "scalars.cuh"
#include "packed_rows.cuh"

#ifndef D_H
#define D_H 64
#endif
#ifndef BR
#define BR 64
#endif
#ifndef BC
#define BC 32
#endif
#ifndef SCALAR_T
#define SCALAR_T float
#endif

__device__ __forceinline__ void from_float(float x, float* out) { *out = x; }
__device__ __forceinline__ void from_float(float x, __half* out) { *out = __float2half(x); }

extern "C" __global__ void flash_attention_fwd(
    const SCALAR_T* __restrict__ Q, const SCALAR_T* __restrict__ K, const SCALAR_T* __restrict__ V,
    SCALAR_T* __restrict__ O, float* __restrict__ LSE,
    const int n_q, const int n_k, const int h, const int h_kv, const float scale, const int causal,
    const int* __restrict__ DOC, const int* __restrict__ DOC_KEYS)
{
    // Q tile stored transposed, Qs[c][r] = q_r[c]: when every thread t reads its own row's
    // element c, the 32 threads of a warp touch 32 consecutive words, one per bank.
    __shared__ float Qs[D_H][BR];
    __shared__ float Ks[BC][D_H];  // every thread reads the same k_j at once: a broadcast, no conflict
    __shared__ float Vs[BC][D_H];

    const int bh = blockIdx.y;                    // which (batch, query head)
    const int b = bh / h, head = bh % h;
    const int kv_head = head / (h / h_kv);        // GQA: the key/value head this query head reads
    const int row0 = blockIdx.x * BR;             // first query row of this tile
    const int i = row0 + threadIdx.x;             // this thread's query row
    const bool active = i < n_q;                  // the last tile may be partial
    const int offset = n_k - n_q;                 // absolute position of query row r is r + offset

    const size_t q_base = (size_t)bh * n_q * D_H;
    const size_t kv_base = ((size_t)b * h_kv + kv_head) * n_k * D_H;
    const int* doc = DOC ? DOC + (size_t)b * n_k : nullptr;  // this batch row's documents, or none
    const int my_doc = doc_of_row(doc, i, n_q);

    // Load the Q tile (Br × d_h) from HBM once, folding in the 1/√d_h scale.
    for (int e = threadIdx.x; e < BR * D_H; e += BR) {
        const int r = e / D_H, c = e % D_H;
        Qs[c][r] = (row0 + r < n_q) ? to_float(Q[q_base + (size_t)(row0 + r) * D_H + c]) * scale : 0.f;
    }

    float m = -INFINITY, l = 0.f;
    float acc[D_H];
#pragma unroll
    for (int c = 0; c < D_H; ++c) acc[c] = 0.f;

    // Tile skipping: the keys the tile's documents span (all n_k without documents), and,
    // when causal, none past the tile's last row, which sees keys up to row0 + BR - 1 + offset.
    int key_first, key_end;
    doc_key_span(DOC_KEYS, b, blockIdx.x, gridDim.x, n_k, key_first, key_end);
    if (causal) key_end = min(key_end, row0 + BR + offset);
    // This row's own limit: keys j < my_end are visible.
    const int my_end = causal ? min(n_k, i + offset + 1) : n_k;

    for (int j0 = key_first / BC * BC; j0 < key_end; j0 += BC) {
        __syncthreads();  // everyone is done with the previous K/V tile (and Qs is written)
        for (int e = threadIdx.x; e < BC * D_H; e += BR) {  // stage K_j, V_j: HBM -> SRAM
            const int r = e / D_H, c = e % D_H;
            const bool in = j0 + r < n_k;
            Ks[r][c] = in ? to_float(K[kv_base + (size_t)(j0 + r) * D_H + c]) : 0.f;
            Vs[r][c] = in ? to_float(V[kv_base + (size_t)(j0 + r) * D_H + c]) : 0.f;
        }
        __syncthreads();
        if (!active) continue;
        const int n_here = min(BC, my_end - j0);  // keys of this tile that row i may see
        if (n_here <= 0) continue;

        // S_ij = q_i · k_j (already scaled), and the tile's row max.
        float s[BC];
        float m_tile = -INFINITY;
#pragma unroll
        for (int j = 0; j < BC; ++j) {
            float dot = 0.f;
#pragma unroll
            for (int c = 0; c < D_H; ++c) dot += Qs[c][threadIdx.x] * Ks[j][c];
            s[j] = (j < n_here && in_document(doc, j0 + j, my_doc)) ? dot : -INFINITY;
            m_tile = fmaxf(m_tile, s[j]);
        }

        // Online softmax: rescale what we had by e^(m - m_new), add this tile's terms.
        const float m_new = fmaxf(m, m_tile);
        const float m_ref = (m_new == -INFINITY) ? 0.f : m_new;  // every score -inf so far: P = 0, not NaN
        const float correction = __expf(m - m_ref);  // e^(-inf) = 0 on the first visible tile
        l *= correction;
#pragma unroll
        for (int c = 0; c < D_H; ++c) acc[c] *= correction;
#pragma unroll
        for (int j = 0; j < BC; ++j) {
            const float p = __expf(s[j] - m_ref);  // masked keys: e^(-inf) = 0
            l += p;
#pragma unroll
            for (int c = 0; c < D_H; ++c) acc[c] += p * Vs[j][c];
        }
        m = m_new;
    }

    if (!active) return;
    // One final normalisation (FlashAttention-2): O_i = acc / l, lse_i = m + log l.
    const float inv_l = (l != 0.f) ? 1.f / l : 0.f;  // a row that saw no key: O = 0 (NaN stays NaN)
    const size_t o_row = q_base + (size_t)i * D_H;
#pragma unroll
    for (int c = 0; c < D_H; ++c) from_float(acc[c] * inv_l, &O[o_row + c]);
    LSE[(size_t)bh * n_q + i] = (l != 0.f) ? m + logf(l) : -INFINITY;
}
