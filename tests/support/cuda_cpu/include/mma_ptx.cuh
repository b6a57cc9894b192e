// CPU stand-in for transformer/kernels/mma_ptx.cuh: the same functions, computed from the PTX
// ISA's fragment layouts (restated there) on the emulator's threads.
//
// The warp-wide ones (mma, ldmatrix) gather what every lane holds and let each lane take its
// own part, so a kernel that puts a value in the wrong lane or register gets wrong numbers,
// as it would on a GPU. cp.async copies land at the latest moment the GPU allows, the next
// cp_async_wait_all(), so reading a tile before waiting for it reads stale data.
#pragma once
#include "cuda_fp16.h"

#include <vector>

namespace cuda_cpu {
inline unsigned pack_halves(__half lo, __half hi) {
    return unsigned(__half_as_ushort(lo)) | (unsigned(__half_as_ushort(hi)) << 16);
}
inline __half unpack_half(unsigned reg, int which) {  // which 0: low 16 bits
    const unsigned short bits = static_cast<unsigned short>(which ? reg >> 16 : reg & 0xffffu);
    __half h;
    std::memcpy(&h, &bits, sizeof h);
    return h;
}
}  // namespace cuda_cpu

namespace cuda_cpu {
// Every lane's A and B registers, gathered across the warp.
struct MmaOperands { unsigned a[4], b[2]; };
inline std::array<MmaOperands, 32> gather_operands(const unsigned a[4], const unsigned b[2]) {
    MmaOperands mine;
    std::memcpy(mine.a, a, sizeof mine.a);
    std::memcpy(mine.b, b, sizeof mine.b);
    return warp_gather(mine);
}

// This lane's part of D = A B + D: d[i] = D[g + 8 (i / 2)][2t + i % 2], summed over k < K, with
// A(row, k) and B(k, col) read out of the gathered registers.
template <int K, class ElementA, class ElementB>
inline void accumulate(float d[4], ElementA A, ElementB B) {
    const int g = int(lane_id()) / 4, t = int(lane_id()) % 4;
    for (int i = 0; i < 4; ++i) {
        const int row = g + 8 * (i / 2), col = 2 * t + i % 2;
        float sum = d[i];
        for (int k = 0; k < K; ++k) sum += A(row, k) * B(k, col);  // float16 or TF32 products: exact in float32
        d[i] = sum;
    }
}

// TF32: a register holds one float32 whose lowest 13 mantissa bits the tensor cores do not read.
inline float tf32_value(unsigned reg) { return __uint_as_float(reg & 0xffffe000u); }
}  // namespace cuda_cpu

inline void mma_16x8x16(float d[4], const unsigned a[4], const unsigned b[2]) {
    const auto all = cuda_cpu::gather_operands(a, b);
    // A[row][k] sits in lane 4 (row % 8) + (k % 8) / 2, register row / 8 + 2 (k / 8), half k % 2;
    // B[k][col] in lane 4 col + (k % 8) / 2, register k / 8, half k % 2.
    cuda_cpu::accumulate<16>(
        d,
        [&](int row, int k) {
            return float(cuda_cpu::unpack_half(all[4 * (row % 8) + (k % 8) / 2].a[row / 8 + 2 * (k / 8)], k % 2));
        },
        [&](int k, int col) { return float(cuda_cpu::unpack_half(all[4 * col + (k % 8) / 2].b[k / 8], k % 2)); });
}

inline void mma_16x8x8_tf32(float d[4], const unsigned a[4], const unsigned b[2]) {
    const auto all = cuda_cpu::gather_operands(a, b);
    // A[row][k] sits in lane 4 (row % 8) + k % 4, register row / 8 + 2 (k / 4);
    // B[k][col] in lane 4 col + k % 4, register k / 4.
    cuda_cpu::accumulate<8>(
        d, [&](int row, int k) { return cuda_cpu::tf32_value(all[4 * (row % 8) + k % 4].a[row / 8 + 2 * (k / 4)]); },
        [&](int k, int col) { return cuda_cpu::tf32_value(all[4 * col + k % 4].b[k / 4]); });
}

// cvt.rna.tf32.f32: round the 13 dropped bits to nearest, ties away from zero (add half of the
// last kept bit to the magnitude, then cut); infinities and NaN pass through.
inline unsigned to_tf32(float x) {
    const unsigned bits = __float_as_uint(x);
    if ((bits & 0x7f800000u) == 0x7f800000u) return bits;
    return (bits + 0x1000u) & 0xffffe000u;
}

inline void ldmatrix_x4(unsigned r[4], const half* row) {
    const auto rows = cuda_cpu::warp_gather(row);  // rows[8j + i]: row i of matrix j
    const int g = int(cuda_cpu::lane_id()) / 4, t = int(cuda_cpu::lane_id()) % 4;
    for (int j = 0; j < 4; ++j) r[j] = cuda_cpu::pack_halves(rows[8 * j + g][2 * t], rows[8 * j + g][2 * t + 1]);
}

inline void ldmatrix_x4_trans(unsigned r[4], const half* row) {
    const auto rows = cuda_cpu::warp_gather(row);
    const int g = int(cuda_cpu::lane_id()) / 4, t = int(cuda_cpu::lane_id()) % 4;
    for (int j = 0; j < 4; ++j) r[j] = cuda_cpu::pack_halves(rows[8 * j + 2 * t][g], rows[8 * j + 2 * t + 1][g]);
}

inline void cp_async_16(void* dst, const void* src, bool inside) {  // this CUDA thread's copy, landed at its wait
    cuda_cpu::self->pending_copies.push_back({dst, src, inside});
}

inline void cp_async_commit() {}

inline void cp_async_wait_all() {
    for (const auto& c : cuda_cpu::self->pending_copies) {
        if (c.inside) std::memcpy(c.dst, c.src, 16);
        else std::memset(c.dst, 0, 16);
    }
    cuda_cpu::self->pending_copies.clear();
}
