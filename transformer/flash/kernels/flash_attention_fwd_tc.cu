// FlashAttention forward on tensor cores: float16 Q, K, V, float32 accumulation.
//
// The same algorithm as flash_attention_fwd.cu (FlashAttention-2 loop order), but the two
// matrix products of every tile, S = Q Kᵀ and P V, run on tensor cores through CUDA's warp
// matrix functions (WMMA, 16×16×16 tiles) instead of one thread per query row on the
// ordinary cores. That is where a GPU's attention speed is: an H100 does ~15× more float16
// tensor-core multiply-adds per second than float32 ones on its ordinary cores.
//
//   grid  = (Tr, b·h)   one block per (batch·head, tile of Br = 64 query rows)
//   block = 4 warps     warp w owns query rows 16w … 16w+15 of the tile
//
// The block stages each K_j, V_j tile (Bc = 64 keys) in shared memory; then each warp, for
// its 16 rows:
//
//   S     = Q_w K_jᵀ                      tensor cores, 16×Bc, float32 -> shared memory
//   per row, two lanes a row, each taking half the columns:
//     m_new = max(m, rowmax(S · scale))     scale = 1/√d_h; masked keys count as -∞
//     P     = e^(S · scale - m_new)         float16, the next product's input
//     l     = l · e^(m - m_new) + rowsum(P)
//   O_w   = diag(e^(m - m_new)) O_w        the rescale, in shared memory (a fragment's
//                                          layout is unspecified, so rows are reached there)
//   O_w  += P V_j                          tensor cores, accumulated in float32
//
// and at the end writes O = O_w / l (float16) and lse = m + log l (float32). As in the
// other kernel: causal rows sit at position i + n_k - n_q, key tiles wholly past the
// block's last visible key are skipped, a row that sees no key gets O = 0 and lse = -∞,
// and query head `head` reads key/value head head / (h / h_kv) (GQA/MQA). Packed rows (DOC,
// DOC_KEYS; null for one sequence a row): packed_rows.cuh.
//
// Compile-time constants (CuPy passes -D options): D_H head size (a multiple of 16),
// SMEM_BYTES the dynamic shared memory the host gives each block (checked below).

#include "scalars.cuh"
#include <mma.h>
#include "packed_rows.cuh"

using namespace nvcuda;

#ifndef D_H
#define D_H 64
#endif
#ifndef SMEM_BYTES
#define SMEM_BYTES 0
#endif

constexpr int BR = 64;                 // query rows per block
constexpr int BC = 64;                 // keys per K/V tile
constexpr int WARPS = BR / 16;         // one warp per 16 query rows
constexpr int THREADS = 32 * WARPS;
constexpr int T16 = 16;                // the WMMA tile edge

// Shared memory, as leading dimensions (elements per row) and byte offsets. Rows are padded
// (+8 halves, +4 floats) so that consecutive rows start in different banks.
constexpr int LD_KV = D_H + 8;         // Ks, Vs: [BC][LD_KV] half
constexpr int LD_Q = D_H + 8;          // Qs: [BR][LD_Q] half, staged once through S's space
constexpr int LD_S = BC + 4;           // Ss: [BR][LD_S] float
constexpr int LD_P = BC + 8;           // Ps: [BR][LD_P] half
constexpr int LD_O = D_H + 4;          // Os: [BR][LD_O] float, the running output
__host__ __device__ constexpr int align128(int bytes) { return (bytes + 127) / 128 * 128; }
constexpr int S_SPACE = align128(BR * LD_S * 4 > BR * LD_Q * 2 ? BR * LD_S * 4 : BR * LD_Q * 2);
constexpr int OFF_K = 0;
constexpr int OFF_V = OFF_K + align128(BC * LD_KV * 2);
constexpr int OFF_S = OFF_V + align128(BC * LD_KV * 2);
constexpr int OFF_P = OFF_S + S_SPACE;
constexpr int OFF_O = OFF_P + align128(BR * LD_P * 2);
constexpr int OFF_C = OFF_O + align128(BR * LD_O * 4);
constexpr int LAYOUT_BYTES = OFF_C + align128(BR * 4);
static_assert(D_H % 16 == 0, "WMMA tiles need d_h to be a multiple of 16");
static_assert(LAYOUT_BYTES <= SMEM_BYTES, "the host must give each block SMEM_BYTES >= LAYOUT_BYTES");

// Rows first … first+ROWS-1 of an (n, D_H) float16 matrix -> shared memory with leading
// dimension ld; 8 halves (16 bytes) per thread per step; rows past n are zeros.
template <int ROWS>
__device__ __forceinline__ void load_rows(half* dst, int ld, const half* __restrict__ src, int first, int n) {
    constexpr int CHUNKS = D_H / 8;
    for (int e = threadIdx.x; e < ROWS * CHUNKS; e += THREADS) {
        const int r = e / CHUNKS, c = (e % CHUNKS) * 8;
        uint4 chunk = make_uint4(0u, 0u, 0u, 0u);
        if (first + r < n) chunk = *reinterpret_cast<const uint4*>(src + (size_t)(first + r) * D_H + c);
        *reinterpret_cast<uint4*>(dst + r * ld + c) = chunk;
    }
}

// __launch_bounds__: 128 threads, and at least 2 blocks per multiprocessor (d_h = 128 takes 93 KiB of
// its 228 KiB of shared memory), which lets the compiler plan registers for that.
extern "C" __global__ void __launch_bounds__(THREADS, 2) flash_attention_fwd_tc(
    const half* __restrict__ Q, const half* __restrict__ K, const half* __restrict__ V,
    half* __restrict__ O, float* __restrict__ LSE,
    const int n_q, const int n_k, const int h, const int h_kv, const float scale, const int causal,
    const int* __restrict__ DOC, const int* __restrict__ DOC_KEYS)
{
    extern __shared__ __align__(128) unsigned char smem[];
    half* Ks = reinterpret_cast<half*>(smem + OFF_K);
    half* Vs = reinterpret_cast<half*>(smem + OFF_V);
    half* Qs = reinterpret_cast<half*>(smem + OFF_S);  // only until the Q fragments are loaded
    float* Ss = reinterpret_cast<float*>(smem + OFF_S);
    half* Ps = reinterpret_cast<half*>(smem + OFF_P);
    float* Os = reinterpret_cast<float*>(smem + OFF_O);
    float* corr = reinterpret_cast<float*>(smem + OFF_C);  // e^(m - m_new) per row of the tile

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int bh = blockIdx.y;                      // which (batch, query head)
    const int b = bh / h, head = bh % h;
    const int kv_head = head / (h / h_kv);          // GQA: the key/value head this query head reads
    const int row0 = blockIdx.x * BR;               // first query row of this tile
    const int offset = n_k - n_q;                   // absolute position of query row r is r + offset
    const half* Qg = Q + (size_t)bh * n_q * D_H;
    const half* Kg = K + ((size_t)b * h_kv + kv_head) * n_k * D_H;
    const half* Vg = V + ((size_t)b * h_kv + kv_head) * n_k * D_H;
    const int* doc = DOC ? DOC + (size_t)b * n_k : nullptr;  // this batch row's documents, or none

    // Two lanes per row: lane 2r + half_ owns row r of the warp's 16 and half the columns.
    const int r_tile = warp * T16 + lane / 2;       // row within the block's tile
    const int i = row0 + r_tile;                    // query row
    const int half_ = lane % 2;
    const int my_doc = doc_of_row(doc, i, n_q);
    auto visible = [&](int j) { return j < n_k && (!causal || j <= i + offset) && in_document(doc, j, my_doc); };

    // Q tile: HBM -> shared memory once, then this warp's rows into registers as WMMA operands.
    load_rows<BR>(Qs, LD_Q, Qg, row0, n_q);
    for (int e = threadIdx.x; e < BR * LD_O; e += THREADS) Os[e] = 0.f;  // O = 0
    __syncthreads();
    wmma::fragment<wmma::matrix_a, T16, T16, T16, half, wmma::row_major> q_frag[D_H / T16];
#pragma unroll
    for (int kk = 0; kk < D_H / T16; ++kk)
        wmma::load_matrix_sync(q_frag[kk], Qs + warp * T16 * LD_Q + kk * T16, LD_Q);

    float m = -INFINITY, l = 0.f;                   // this row's running max and sum (both lanes)
    // Tile skipping: the keys the tile's documents span (all n_k without documents), and,
    // when causal, none past the tile's last row, which sees keys up to row0 + BR - 1 + offset.
    int key_first, key_end;
    doc_key_span(DOC_KEYS, b, blockIdx.x, gridDim.x, n_k, key_first, key_end);
    if (causal) key_end = min(key_end, row0 + BR + offset);

    for (int j0 = key_first / BC * BC; j0 < key_end; j0 += BC) {
        __syncthreads();                            // every warp is done with the last K_j, V_j (and Qs)
        load_rows<BC>(Ks, LD_KV, Kg, j0, n_k);      // stage K_j, V_j: HBM -> SRAM
        load_rows<BC>(Vs, LD_KV, Vg, j0, n_k);
        __syncthreads();

        // S = Q_w K_jᵀ: Kᵀ is K read column-major, so no transpose is ever stored.
#pragma unroll
        for (int nb = 0; nb < BC / T16; ++nb) {
            wmma::fragment<wmma::accumulator, T16, T16, T16, float> s_frag;
            wmma::fill_fragment(s_frag, 0.f);
#pragma unroll
            for (int kk = 0; kk < D_H / T16; ++kk) {
                wmma::fragment<wmma::matrix_b, T16, T16, T16, half, wmma::col_major> k_frag;
                wmma::load_matrix_sync(k_frag, Ks + nb * T16 * LD_KV + kk * T16, LD_KV);
                wmma::mma_sync(s_frag, q_frag[kk], k_frag, s_frag);
            }
            wmma::store_matrix_sync(Ss + warp * T16 * LD_S + nb * T16, s_frag, LD_S, wmma::mem_row_major);
        }
        __syncwarp();                               // the warp's S rows are complete

        // Online softmax of row r_tile over this tile's Bc keys: this lane's half of the row,
        // scaled and masked, read once into registers.
        const int c0 = half_ * (BC / 2);            // this lane's first column
        float s[BC / 2];
        float m_tile = -INFINITY;
#pragma unroll
        for (int c = 0; c < BC / 2; ++c) {
            s[c] = visible(j0 + c0 + c) ? Ss[r_tile * LD_S + c0 + c] * scale : -INFINITY;
            m_tile = fmaxf(m_tile, s[c]);
        }
        m_tile = fmaxf(m_tile, __shfl_xor_sync(0xffffffffu, m_tile, 1));  // the other half's max
        const float m_new = fmaxf(m, m_tile);
        const float m_ref = (m_new == -INFINITY) ? 0.f : m_new;  // nothing visible yet: P = 0, not NaN
        float p_sum = 0.f;
#pragma unroll
        for (int c = 0; c < BC / 2; ++c) {
            const float p = __expf(s[c] - m_ref);   // masked keys: e^(-∞) = 0
            Ps[r_tile * LD_P + c0 + c] = __float2half(p);
            p_sum += p;
        }
        p_sum += __shfl_xor_sync(0xffffffffu, p_sum, 1);
        const float correction = __expf(m - m_ref);  // e^(m - m_new); e^(-∞) = 0 on the first tile
        l = l * correction + p_sum;
        m = m_new;
        if (half_ == 0) corr[r_tile] = correction;
        __syncwarp();                               // P and the corrections are in shared memory

        // O_w = diag(e^(m - m_new)) O_w, then O_w += P V_j on tensor cores.
        for (int e = lane; e < T16 * D_H; e += 32) {
            const int r = warp * T16 + e / D_H, c = e % D_H;
            Os[r * LD_O + c] *= corr[r];
        }
        __syncwarp();
#pragma unroll
        for (int db = 0; db < D_H / T16; ++db) {
            wmma::fragment<wmma::accumulator, T16, T16, T16, float> o_frag;
            float* o_tile = Os + warp * T16 * LD_O + db * T16;
            wmma::load_matrix_sync(o_frag, o_tile, LD_O, wmma::mem_row_major);
#pragma unroll
            for (int kb = 0; kb < BC / T16; ++kb) {
                wmma::fragment<wmma::matrix_a, T16, T16, T16, half, wmma::row_major> p_frag;
                wmma::fragment<wmma::matrix_b, T16, T16, T16, half, wmma::row_major> v_frag;
                wmma::load_matrix_sync(p_frag, Ps + warp * T16 * LD_P + kb * T16, LD_P);
                wmma::load_matrix_sync(v_frag, Vs + kb * T16 * LD_KV + db * T16, LD_KV);
                wmma::mma_sync(o_frag, p_frag, v_frag, o_frag);
            }
            wmma::store_matrix_sync(o_tile, o_frag, LD_O, wmma::mem_row_major);
        }
    }
    __syncwarp();                                   // the warp's O rows are complete

    if (i >= n_q) return;                           // the last tile may be partial
    // One final normalisation (FlashAttention-2): O_i = O_w / l, lse_i = m + log l.
    const float inv_l = (l != 0.f) ? 1.f / l : 0.f;  // a row that saw no key: O = 0 (NaN stays NaN)
    half* o_out = O + ((size_t)bh * n_q + i) * D_H;
    for (int c = half_ * (D_H / 2); c < (half_ + 1) * (D_H / 2); ++c)
        o_out[c] = __float2half(Os[r_tile * LD_O + c] * inv_l);
    if (half_ == 0) LSE[(size_t)bh * n_q + i] = (l != 0.f) ? m + logf(l) : -INFINITY;
}
