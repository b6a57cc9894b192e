// RoPE on the new token's query and key, then the key and value written into the KV cache at its position:
//
//   pair i of a head, (a, b) = (x_{2i}, x_{2i+1}),  c = cos θ_{pos,i},  s = sin θ_{pos,i}:
//     out_{2i} = a·c − b·s,   out_{2i+1} = a·s + b·c          (core.positions.apply_rope_interleaved)
//   q = RoPE(q) · q_scale  (q_scale = 1/√d_h, folded in here once instead of into every score)
//   K[kvh, pos] = RoPE(k),   V[kvh, pos] = v                  (the cache write, pos = state[POS])
//
//   grid  = (1,)     one block
//   block = (256,)   thread t takes pairs t, t + 256, … of the h + h_kv heads, then values t, t + 256, …
//
// qkv [(h + 2·h_kv)·d_h] = [q heads | k heads | v heads], each head's d_h contiguous;
// cos, sin [max_len, d_h/2]; q [h·d_h]; K, V [h_kv, max_len, d_h]: one layer's cache.

#include "decode_common.cuh"

extern "C" __global__ void decode_rope_append(const float* qkv, const float* cos, const float* sin, float* q,
                                              float* K, float* V, const int* state, int h, int h_kv, int d_h,
                                              int max_len, float q_scale)
{
    if (state[DONE]) return;
    const int pos = state[POS], half = d_h / 2;
    const float* v_new = qkv + (h + h_kv) * d_h;

    // RoPE: pair p is pair i of head `head` (the h query heads, then the h_kv key heads)
    for (int p = threadIdx.x; p < (h + h_kv) * half; p += blockDim.x) {
        const int head = p / half, i = p % half;
        const float a = qkv[head * d_h + 2 * i], b = qkv[head * d_h + 2 * i + 1];
        const float c = cos[(size_t)pos * half + i], s = sin[(size_t)pos * half + i];
        const float re = a * c - b * s, im = a * s + b * c;
        if (head < h) {
            q[head * d_h + 2 * i] = re * q_scale;
            q[head * d_h + 2 * i + 1] = im * q_scale;
        } else {
            float* slot = K + ((size_t)(head - h) * max_len + pos) * d_h;  // K[kvh, pos]
            slot[2 * i] = re;
            slot[2 * i + 1] = im;
        }
    }
    // V[kvh, pos] = v
    for (int t = threadIdx.x; t < h_kv * d_h; t += blockDim.x) {
        const int kvh = t / d_h, j = t % d_h;
        V[((size_t)kvh * max_len + pos) * d_h + j] = v_new[t];
    }
}
