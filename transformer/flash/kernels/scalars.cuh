// What the kernels need that NVRTC lacks, or that CUDA spells once per element type.
#pragma once
#include <cuda_fp16.h>
#ifndef INFINITY  // NVRTC, which CuPy compiles with, has no <math.h>: +∞ from its bits
#define INFINITY __int_as_float(0x7f800000)
#endif

// An input element as float32, whichever SCALAR_T (float or __half) it arrives in.
__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
