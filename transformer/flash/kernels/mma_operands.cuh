// Operands of the register kernels (flash_attention_*_mma*.cu): tiles brought into shared memory,
// float16 pairs for mma.m16n8k16, TF32 pairs for the 3xTF32 products of mma.m16n8k8. Include after
// mma_ptx.cuh and <cuda_fp16.h> (the CPU emulator puts its own mma_ptx.cuh in their place).
#pragma once

// Rows first … first+ROWS-1 of an (n, COLS) matrix of float16 or float32 -> shared memory, row r at
// dst + r·STRIDE, in 16-byte copies spread over the block's THREADS threads; rows past n become zeros.
template <int ROWS, int COLS, int STRIDE, int THREADS, class T>
__device__ __forceinline__ void copy_rows_async(T* dst, const T* __restrict__ src, int first, int n) {
    constexpr int PER_COPY = 16 / sizeof(T), COPIES = COLS / PER_COPY;  // elements a copy, copies a row
    static_assert(COLS % PER_COPY == 0, "a row is a whole number of 16-byte copies");
    for (int e = threadIdx.x; e < ROWS * COPIES; e += THREADS) {
        const int r = e / COPIES, c = (e % COPIES) * PER_COPY;
        const bool inside = first + r < n;
        cp_async_16(dst + r * STRIDE + c, src + (size_t)(inside ? first + r : 0) * COLS + c, inside);
    }
}

// Two floats -> one register of two halves, the first in the low 16 bits (one cvt.rn.f16x2.f32).
__device__ __forceinline__ unsigned pack_half2(float lo, float hi) {
    const __half2 h2 = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const unsigned*>(&h2);
}

// Two floats -> dst[0], dst[1] in one store: as float16 (one register of two halves) or as float32.
__device__ __forceinline__ void store_pair(half* dst, float a, float b) {
    *reinterpret_cast<unsigned*>(dst) = pack_half2(a, b);
}
__device__ __forceinline__ void store_pair(float* dst, float a, float b) {
    *reinterpret_cast<float2*>(dst) = make_float2(a, b);
}

// x = hi + lo, both TF32. (For x = ±∞, lo = ∞ - ∞ = NaN: an infinite input turns every row that sees it NaN.)
__device__ __forceinline__ void split_tf32(float x, unsigned& hi, unsigned& lo) {
    hi = to_tf32(x);
    lo = to_tf32(x - __uint_as_float(hi));
}

#ifndef TF32_PRODUCTS
#define TF32_PRODUCTS 3
#endif

// D += A B for A, B given as TF32 pairs: the small products first, then the large one
// (TF32_PRODUCTS=1: the large one only, float16-level accuracy).
__device__ __forceinline__ void mma_3xtf32(float d[4], const unsigned a_hi[4], const unsigned a_lo[4],
                                           const unsigned b_hi[2], const unsigned b_lo[2]) {
#if TF32_PRODUCTS == 3
    mma_16x8x8_tf32(d, a_lo, b_hi);
    mma_16x8x8_tf32(d, a_hi, b_lo);
#endif
    mma_16x8x8_tf32(d, a_hi, b_hi);
}

// acc (16 × COLS) += M X, in 3xTF32: M a 16 × ROWS mma accumulator (lane 4g + t holds its rows g and
// g + 8, columns 2t and 2t + 1 of each 8) taken as the A operand as it stands, which makes the sum over
// each 8 of M's columns run in the order 0, 2, 4, 6, 1, 3, 5, 7; X (ROWS × COLS, rows STRIDE floats
// apart) in that order: the B operand of each 8-row step is X's rows 2t and 2t + 1.
template <int ROWS, int COLS, int STRIDE>
__device__ __forceinline__ void tf32_acc_times_rows(float (&acc)[COLS / 8][4], const float (&m)[ROWS / 8][4],
                                                    const float* X, int g, int t) {
#pragma unroll
    for (int nb = 0; nb < ROWS / 8; ++nb) {
        unsigned a_hi[4], a_lo[4];
        split_tf32(m[nb][0], a_hi[0], a_lo[0]);  // M[g][2t]
        split_tf32(m[nb][2], a_hi[1], a_lo[1]);  // M[g+8][2t]
        split_tf32(m[nb][1], a_hi[2], a_lo[2]);  // M[g][2t+1]
        split_tf32(m[nb][3], a_hi[3], a_lo[3]);  // M[g+8][2t+1]
        const float* x = X + (8 * nb + 2 * t) * STRIDE;  // rows 8nb + 2t and 8nb + 2t + 1
#pragma unroll
        for (int db = 0; db < COLS / 8; ++db) {
            unsigned b_hi[2], b_lo[2];
            split_tf32(x[8 * db + g], b_hi[0], b_lo[0]);
            split_tf32(x[STRIDE + 8 * db + g], b_hi[1], b_lo[1]);
            mma_3xtf32(acc[db], a_hi, a_lo, b_hi, b_lo);
        }
    }
}
