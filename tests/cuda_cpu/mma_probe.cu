// One warp puts known matrices through the PTX wrappers of mma_ptx.cuh, each operand placed in
// the lanes exactly as the PTX ISA's fragment tables say (lane = 4g + t):
//   A[16][16]: a[0] = A[g][2t..], a[1] = A[g+8][2t..], a[2] = A[g][2t+8..], a[3] = A[g+8][2t+8..]
//   B[16][8]:  b[0] = B[2t..][g], b[1] = B[2t+8..][g];   D[16][8]: d[i] = D[g + 8(i/2)][2t + i%2]
//   ldmatrix:  lane l points at row l%8 of matrix l/8; r[j] = M_j[g][2t..] (.trans: M_j[2t..][g])
// The test compares D with A B and the ldmatrix registers with M, in NumPy. On the CPU this
// checks the emulator against the tables; on a GPU, the tables against the hardware.
#include <cuda_fp16.h>
#include "mma_ptx.cuh"

__device__ unsigned pack2(half lo, half hi) {
    return unsigned(__half_as_ushort(lo)) | (unsigned(__half_as_ushort(hi)) << 16);
}

extern "C" __global__ void mma_probe(const half* A, const half* B, const half* M, float* D, unsigned* R, unsigned* RT) {
    __shared__ __align__(16) half Ms[4 * 64];  // four 8×8 matrices, row-major
    const int lane = threadIdx.x, g = lane / 4, t = lane % 4;
    for (int e = lane; e < 4 * 64; e += 32) Ms[e] = M[e];
    __syncthreads();

    const unsigned a[4] = {pack2(A[g * 16 + 2 * t], A[g * 16 + 2 * t + 1]),
                           pack2(A[(g + 8) * 16 + 2 * t], A[(g + 8) * 16 + 2 * t + 1]),
                           pack2(A[g * 16 + 2 * t + 8], A[g * 16 + 2 * t + 9]),
                           pack2(A[(g + 8) * 16 + 2 * t + 8], A[(g + 8) * 16 + 2 * t + 9])};
    const unsigned b[2] = {pack2(B[(2 * t) * 8 + g], B[(2 * t + 1) * 8 + g]),
                           pack2(B[(2 * t + 8) * 8 + g], B[(2 * t + 9) * 8 + g])};
    float d[4] = {0.f, 0.f, 0.f, 0.f};
    mma_16x8x16(d, a, b);
    for (int i = 0; i < 4; ++i) D[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2] = d[i];

    unsigned r[4], rt[4];
    ldmatrix_x4(r, Ms + (lane / 8) * 64 + (lane % 8) * 8);
    ldmatrix_x4_trans(rt, Ms + (lane / 8) * 64 + (lane % 8) * 8);
    for (int j = 0; j < 4; ++j) {
        R[lane * 4 + j] = r[j];
        RT[lane * 4 + j] = rt[j];
    }
}
