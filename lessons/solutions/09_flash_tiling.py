"""Solutions to lesson 09's "Try it" (FlashAttention tiling)."""
import math


def exercise_1():
    """n = 1000 queries and keys, tiles Br = Bc = 64. Tr = Tc = ⌈1000 / 64⌉ = 16 (the last tile
    holds 1000 − 15·64 = 40 rows). Dense: 16 · 16 = 256 tiles. Causal: query block i needs key
    blocks 0 … i, so 1 + 2 + … + 16 = 16 · 17 / 2 = 136 tiles."""
    Tr = math.ceil(1000 / 64)  # 16
    return {"Tr": Tr, "dense": Tr * Tr, "causal": Tr * (Tr + 1) // 2}


def check_1(answer, T):
    dense = T.visible_key_tiles(1000, 1000, 64, 64, False)
    causal = T.visible_key_tiles(1000, 1000, 64, 64, True)
    assert answer == {"Tr": len(dense), "dense": sum(dense), "causal": sum(causal)}, (answer, sum(dense), sum(causal))


def exercise_2():
    """An on-chip memory of M = 100 KB of float32 = 25 000 numbers, head size d = 128. The paper
    picks Bc = ⌈M / 4d⌉ = ⌈25000 / 512⌉ = 49 and Br = min(Bc, d) = 49: the four tiles Q_i, O_i
    (Br × d) and K_j, V_j (Bc × d) take 4 · 49 · 128 = 25 088 numbers, about M."""
    M, d = 100_000 // 4, 128
    Bc = -(-M // (4 * d))  # ⌈M / 4d⌉ = 49
    return Bc, min(Bc, d)


def check_2(answer, T):
    Bc, Br = T.paper_block_sizes(100_000 // 4, 128)
    assert answer == (Bc, Br), (answer, (Bc, Br))
