// The PTX instructions of the register kernels (flash_attention_fwd_mma*.cu), one small function
// each (sm_80 and later).
//
// What every lane holds is fixed by the PTX ISA ("Matrix Fragments for mma.m16n8k16",
// "... for mma.m16n8k8", "ldmatrix"). Write lane = 4g + t (g = lane / 4, the "groupID";
// t = lane % 4). float16: a 32-bit register holds two halves, the lower-indexed element in its
// low 16 bits.
//
//   A, 16×16 (row-major):  a[0] = A[g][2t, 2t+1]    a[1] = A[g+8][2t, 2t+1]
//                          a[2] = A[g][2t+8, 2t+9]  a[3] = A[g+8][2t+8, 2t+9]
//   B, 16×8 (k × n):       b[0] = B[2t, 2t+1][g]    b[1] = B[2t+8, 2t+9][g]
//   C, D, 16×8 (float):    c[0], c[1] = C[g][2t], C[g][2t+1]    c[2], c[3] = C[g+8][2t], C[g+8][2t+1]
//
// TF32 (m16n8k8, one element a register; C and D as above):
//
//   A, 16×8 (row-major):   a[0] = A[g][t]    a[1] = A[g+8][t]    a[2] = A[g][t+4]    a[3] = A[g+8][t+4]
//   B, 8×8 (k × n):        b[0] = B[t][g]    b[1] = B[t+4][g]
//
// tests/cuda_cpu/include/mma_ptx.cuh computes the same functions on the CPU from this
// description, so the kernel's tests run without a GPU.
#pragma once
#include <cuda_fp16.h>

// A generic pointer into shared memory -> the 32-bit shared-window address the instructions take.
__device__ __forceinline__ unsigned shared_address(const void* p) {
    unsigned addr;
    asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(addr) : "l"(p));
    return addr;
}

// D = A B + D on tensor cores: float16 products, float32 sums.
__device__ __forceinline__ void mma_16x8x16(float d[4], const unsigned a[4], const unsigned b[2]) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// D = A B + D on tensor cores in TF32: products of float32 numbers rounded to 10 mantissa bits
// (to_tf32), float32 sums.
__device__ __forceinline__ void mma_16x8x8_tf32(float d[4], const unsigned a[4], const unsigned b[2]) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// A float32 rounded to TF32 (nearest, ties away from zero): the same 32 bits with the lowest 13
// of the 23 mantissa bits zero.
__device__ __forceinline__ unsigned to_tf32(float x) {
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
    return r;
}

// Four 8×8 half matrices from shared memory: lane l gives the address of row l % 8 of matrix
// l / 8, and gets r[j] = matrix j [g][2t, 2t+1].
__device__ __forceinline__ void ldmatrix_x4(unsigned r[4], const half* row) {
    const unsigned addr = shared_address(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

// The same, each matrix transposed on the way: r[j] = matrix j [2t, 2t+1][g].
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned r[4], const half* row) {
    const unsigned addr = shared_address(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

// 16 bytes HBM -> shared memory without passing through registers; the copy lands at some
// time before cp_async_wait_all(). inside = false reads nothing and writes 16 zero bytes.
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, bool inside) {
    const unsigned addr = shared_address(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(addr), "l"(src), "r"(inside ? 16 : 0));
}

// Close the group of copies issued so far; wait until every group of this thread has landed.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }
