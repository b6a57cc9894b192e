"""Solutions to lesson 09's "Try it" (FlashAttention tiling)."""
import math

import numpy as np


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


def tiles():  # one query block Q_i (B_r, d) = (4, 8) and K, V of n_k = 10 keys, the same for exercise and check
    rng = np.random.default_rng(9)
    return rng.normal(size=(4, 8)), rng.normal(size=(10, 8)), rng.normal(size=(10, 8))


def exercise_3():
    """FlashAttention-2's inner loop for one query block, in NumPy: key tiles of B_c = 4 over n_k = 10
    keys (tiles of 4, 4, 2: the last one short). Per tile j: S_ij = Q_i K_jᵀ / √d, m_new = max(m,
    rowmax S_ij), P̃ = e^(S_ij − m_new), l = l·e^(m − m_new) + rowsum P̃, O = O·e^(m − m_new) + P̃ V_j;
    at the end O / l. Never more than a B_r × B_c tile of scores."""
    Q_i, K, V = tiles()
    B_r, d = Q_i.shape
    m, l, O = np.full((B_r, 1), -np.inf), np.zeros((B_r, 1)), np.zeros((B_r, d))
    for start in range(0, K.shape[0], 4):
        K_j, V_j = K[start:start + 4], V[start:start + 4]  # (B_c, d); the last tile has 2 rows
        S = Q_i @ K_j.T / np.sqrt(d)  # (B_r, B_c)
        m_new = np.maximum(m, S.max(axis=1, keepdims=True))  # (B_r, 1)
        P = np.exp(S - m_new)  # (B_r, B_c)
        alpha = np.exp(m - m_new)  # (B_r, 1): rescales what was summed under the old max
        l = l * alpha + P.sum(axis=1, keepdims=True)
        O = O * alpha + P @ V_j  # (B_r, d)
        m = m_new
    return O / l  # (B_r, d)


def check_3(answer, T):
    Q_i, K, V = tiles()
    got = T.flash_attention(Q_i[None, None], K[None, None], V[None, None], block_q=4, block_k=4)[0, 0]  # (B_r, d)
    np.testing.assert_allclose(answer, got, rtol=1e-10, atol=1e-12)
    naive = T.scaled_dot_product_attention(Q_i[None, None], K[None, None], V[None, None])[0, 0]  # (B_r, d)
    np.testing.assert_allclose(answer, naive, rtol=1e-10, atol=1e-12)
