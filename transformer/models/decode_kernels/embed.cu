// The embedding of the step's input id:  x = W_E[tok],  tok = state[TOK].
//
//   grid  = (1,)     one block
//   block = (256,)   thread t copies x[t], x[t + 256], …
//
// W_E [v, d] row-major; x [d]. The id is read from device memory, not passed: one CUDA graph
// serves every step.

#include "decode_common.cuh"

extern "C" __global__ void decode_embed(const float* W_E, const int* state, float* x, int d)
{
    if (state[DONE]) return;
    const float* row = W_E + (size_t)state[TOK] * d;  // size_t: v·d passes 2³¹ for large vocabularies
    for (int j = threadIdx.x; j < d; j += blockDim.x) x[j] = row[j];
}
