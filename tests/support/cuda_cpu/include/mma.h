// CPU stand-in for CUDA's warp matrix functions (nvcuda::wmma), 16×16×16 tiles.
//
// On a GPU a fragment is spread over the 32 lanes of a warp in an unspecified layout. Here
// every lane loads whole A and B tiles, but owns only the accumulator elements e with
// e % 32 == its lane: load_matrix_sync reads those, mma_sync computes those, store_matrix_sync
// writes those. So, as on a
// GPU, a tile stored by a warp is complete only after every lane has stored its part (and a
// __syncwarp), and code may touch fragment elements x[k] only uniformly (the same operation
// on each), never by position.
#pragma once
#include "cuda_fp16.h"

namespace nvcuda {
namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
    static_assert(M == 16 && N == 16 && K == 16, "only 16×16×16 tiles are emulated");
    static constexpr int num_elements = 256;  // element (r, c) at x[16 r + c]
    T x[256] = {};
};

template <class Use, int M, int N, int K, class T, class L>
inline void fill_fragment(fragment<Use, M, N, K, T, L>& f, T value) {
    for (auto& e : f.x) e = value;
}

template <class Use, int M, int N, int K, class T>
inline void load_matrix_sync(fragment<Use, M, N, K, T, row_major>& f, const T* p, unsigned ldm) {
    for (int r = 0; r < 16; ++r)
        for (int c = 0; c < 16; ++c) f.x[16 * r + c] = p[r * ldm + c];
}

template <class Use, int M, int N, int K, class T>
inline void load_matrix_sync(fragment<Use, M, N, K, T, col_major>& f, const T* p, unsigned ldm) {
    for (int r = 0; r < 16; ++r)
        for (int c = 0; c < 16; ++c) f.x[16 * r + c] = p[c * ldm + r];
}

// An accumulator is loaded, like it is stored, by each lane for its own elements only: a warp that
// loads a tile, adds to it and stores it back never has one lane read what another one writes.
inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float>& f, const float* p, unsigned ldm,
                             layout_t layout) {
    for (int e = int(cuda_cpu::lane_id()); e < 256; e += 32) {  // this lane's part only
        const int r = e / 16, c = e % 16;
        f.x[e] = layout == mem_row_major ? p[r * ldm + c] : p[c * ldm + r];
    }
}

inline void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float>& f, unsigned ldm,
                              layout_t layout) {
    for (int e = int(cuda_cpu::lane_id()); e < 256; e += 32) {  // this lane's part only
        const int r = e / 16, c = e % 16;
        (layout == mem_row_major ? p[r * ldm + c] : p[c * ldm + r]) = f.x[e];
    }
}

// D = A B + C on this lane's accumulator elements; products of halves summed in float.
template <class LA, class LB>
inline void mma_sync(fragment<accumulator, 16, 16, 16, float>& d, const fragment<matrix_a, 16, 16, 16, __half, LA>& a,
                     const fragment<matrix_b, 16, 16, 16, __half, LB>& b,
                     const fragment<accumulator, 16, 16, 16, float>& c) {
    for (int e = int(cuda_cpu::lane_id()); e < 256; e += 32) {
        const int r = e / 16, col = e % 16;
        float sum = c.x[e];
        for (int k = 0; k < 16; ++k) sum += float(a.x[16 * r + k]) * float(b.x[16 * k + col]);
        d.x[e] = sum;
    }
}

}  // namespace wmma
}  // namespace nvcuda
