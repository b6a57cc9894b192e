// One warp puts known matrices through the PTX wrappers of mma_ptx.cuh.
//
// mma: each lane fills its registers with the elements the host says it holds (A_AT, B_AT:
// for lane l, element e of its registers, the flat index into A or B; e = 2·register + half),
// runs D = A B, and writes each of its accumulators where D_AT says. The host builds those from
// `flash_cuda.mma_fragment_layout`, so D = A B holds only if that layout is the instruction's.
// The same for the TF32 mma (A8, B8, placed by A8_AT, B8_AT: one element a register; D8 as D).
// ldmatrix: lane l points at row l % 8 of matrix l / 8 of M; every register comes back (R, RT).
// to_tf32: lane l rounds X[l] to TF32 (XT).
// On the CPU this checks the emulator against the tables; on a GPU, the tables against the hardware.
#include <cuda_fp16.h>
#include "mma_ptx.cuh"

__device__ unsigned pack2(half lo, half hi) {
    return unsigned(__half_as_ushort(lo)) | (unsigned(__half_as_ushort(hi)) << 16);
}

extern "C" __global__ void mma_probe(const half* A, const half* B, const int* A_AT, const int* B_AT, const int* D_AT,
                                     const half* M, float* D, unsigned* R, unsigned* RT,
                                     const float* A8, const float* B8, const int* A8_AT, const int* B8_AT, float* D8,
                                     const float* X, unsigned* XT) {
    __shared__ __align__(16) half Ms[4 * 64];  // four 8×8 matrices, row-major
    const int lane = threadIdx.x;
    for (int e = lane; e < 4 * 64; e += 32) Ms[e] = M[e];
    __syncthreads();

    unsigned a[4], b[2];
    for (int i = 0; i < 4; ++i) a[i] = pack2(A[A_AT[lane * 8 + 2 * i]], A[A_AT[lane * 8 + 2 * i + 1]]);
    for (int i = 0; i < 2; ++i) b[i] = pack2(B[B_AT[lane * 4 + 2 * i]], B[B_AT[lane * 4 + 2 * i + 1]]);
    float d[4] = {0.f, 0.f, 0.f, 0.f};
    mma_16x8x16(d, a, b);
    for (int i = 0; i < 4; ++i) D[D_AT[lane * 4 + i]] = d[i];

    unsigned a8[4], b8[2];
    for (int i = 0; i < 4; ++i) a8[i] = __float_as_uint(A8[A8_AT[lane * 4 + i]]);
    for (int i = 0; i < 2; ++i) b8[i] = __float_as_uint(B8[B8_AT[lane * 2 + i]]);
    float d8[4] = {0.f, 0.f, 0.f, 0.f};
    mma_16x8x8_tf32(d8, a8, b8);
    for (int i = 0; i < 4; ++i) D8[D_AT[lane * 4 + i]] = d8[i];
    XT[lane] = to_tf32(X[lane]);

    unsigned r[4], rt[4];
    ldmatrix_x4(r, Ms + (lane / 8) * 64 + (lane % 8) * 8);
    ldmatrix_x4_trans(rt, Ms + (lane / 8) * 64 + (lane % 8) * 8);
    for (int j = 0; j < 4; ++j) {
        R[lane * 4 + j] = r[j];
        RT[lane * 4 + j] = rt[j];
    }
}
