// CPU stand-in for CUDA's half type: GCC's _Float16 (IEEE binary16, round to nearest even).
#pragma once
#include "../cuda_cpu.h"

using __half = _Float16;
using half = __half;
inline float __half2float(__half h) { return static_cast<float>(h); }
inline __half __float2half(float f) { return static_cast<__half>(f); }
inline __half __float2half_rn(float f) { return static_cast<__half>(f); }
inline unsigned short __half_as_ushort(__half h) {
    unsigned short bits;
    std::memcpy(&bits, &h, sizeof bits);
    return bits;
}

// Two halves in one 32-bit register, the first (x) in the low 16 bits.
struct __half2 {
    __half x, y;
};
inline __half2 __floats2half2_rn(float lo, float hi) { return {static_cast<__half>(lo), static_cast<__half>(hi)}; }
