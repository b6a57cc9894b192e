// The online-softmax merge of the attention splits (flash-decoding's second kernel):
//
//   M = max_s m_s,   w_s = e^{m_s − M}
//   o = Σ_s w_s · o_s / Σ_s w_s · ℓ_s
//
// where split s holds m_s = max of its scores, ℓ_s = Σ e^{score − m_s}, o_s = Σ e^{score − m_s} v
// (attend_split.cu), over the splits that hold a key: s ≤ pos / split (pos = state[POS]). The splits past
// it hold whatever was there (attend_split does not write them) and are not read. Split 0 always holds
// key 0, so M is finite.
//
//   grid  = (h,)     one block a query head
//   block = (128,)   thread t computes o[t], o[t + 128], …  (d_h ≤ 128: one each)
//
// part_o [h, n_splits, d_h]; part_ml [h, n_splits, 2] = (m, ℓ); o [h·d_h].

#include "decode_common.cuh"

extern "C" __global__ void decode_attend_combine(const float* part_o, const float* part_ml, float* o,
                                                 const int* state, int h, int d_h, int n_splits, int split)
{
    if (state[DONE]) return;
    const int head = blockIdx.x, used = min(n_splits, state[POS] / split + 1);  // the splits holding a key
    const float* ml = part_ml + (size_t)head * n_splits * 2;
    float M = -INFINITY;
    for (int s = 0; s < used; ++s) M = fmaxf(M, ml[2 * s]);
    for (int j = threadIdx.x; j < d_h; j += blockDim.x) {
        float num = 0.f, den = 0.f;
        for (int s = 0; s < used; ++s) {
            const float w = expf(ml[2 * s] - M);  // e^{m_s − M}
            num += w * part_o[((size_t)head * n_splits + s) * d_h + j];
            den += w * ml[2 * s + 1];
        }
        o[head * d_h + j] = num / den;
    }
}
