"""Solutions to lesson 17's "Try it" (FlashAttention on the GPU)."""
import math


def exercise_1():
    """Causal self-attention over n = 1000 with query blocks of 64 and key blocks of 64: query block
    t reads key tiles 0 … t, so 16 blocks read 1 + 2 + … + 16 = 136 tiles out of 256."""
    T_ = math.ceil(1000 / 64)
    return T_ * (T_ + 1) // 2, T_ * T_


def check_1(answer, T):
    reads = T.cuda_kernels.key_tiles_read(1000, 64, 64, causal=True)  # [r, t, j]
    dense = T.cuda_kernels.key_tiles_read(1000, 64, 64, causal=False)
    assert answer == (int(reads.sum()), int(dense.sum())), answer


def exercise_2():
    """The tile counts of the CUDA kernels are those of the NumPy tiling (lesson 09): the same
    ⌈n / B⌉ tiles, the same triangle under a causal mask. With n = 4096 and blocks of 64:
    64 · 65 / 2 = 2080 of 4096 tiles, 50.8 % of the dense work."""
    t = 4096 // 64
    return t * (t + 1) // 2 / (t * t)


def check_2(answer, T):
    tiles = T.visible_key_tiles(4096, 4096, 64, 64, True)
    assert abs(answer - sum(tiles) / (len(tiles) ** 2)) < 1e-12, answer
