"""Solutions to lesson 14's "Try it" (the paged KV cache)."""
import math

import numpy as np


def exercise_1():
    """Three requests of 100, 33 and 64 tokens, blocks of 16 tokens: ⌈100/16⌉ + ⌈33/16⌉ + ⌈64/16⌉
    = 7 + 3 + 4 = 14 blocks = 224 token slots for 197 tokens: 27 slots (12 %) unused, all in the
    last block of each request."""
    blocks = sum(math.ceil(n / 16) for n in (100, 33, 64))
    return blocks, blocks * 16 - (100 + 33 + 64)


def check_1(answer, T):
    r = T.paged_memory_report("smollm2-135m", [100, 33, 64], block_size=16)
    assert answer == (r["blocks"], r["paged_waste"] // r["bytes_per_token"]), (answer, r)


def pools():  # K and V pools of (n_blocks, h_kv, B, d_h) = (8, 2, 4, 3), the same for exercise and check
    rng = np.random.default_rng(14)
    return rng.normal(size=(8, 2, 4, 3)), rng.normal(size=(8, 2, 4, 3))


def exercise_2():
    """Read one request's keys and values through its block table, in NumPy: a pool of 8 blocks of
    B = 4 positions, the request holds n = 10 tokens in blocks [5, 0, 3] (in position order). One
    fancy index pulls its blocks, (3, h_kv, B, d_h); moving the block axis next to the position
    axis and merging the two gives (h_kv, 3·B, d_h) = (2, 12, 3) in position order; the last
    block holds only 10 − 8 = 2 positions, so keep the first 10."""
    k_pool, v_pool = pools()
    table, n = [5, 0, 3], 10
    out = []
    for pool in (k_pool, v_pool):
        blocks = pool[table]  # (n_blocks of the request, h_kv, B, d_h)
        flat = blocks.swapaxes(0, 1).reshape(pool.shape[1], -1, pool.shape[3])  # (h_kv, 3·B, d_h)
        out.append(flat[:, :n])  # (h_kv, n, d_h)
    return {"K": out[0], "V": out[1]}


def check_2(answer, T):
    k_pool, v_pool = pools()
    q = np.random.default_rng(0).normal(size=(4, 10, 3))  # (h, n_q, d_h): 4 query heads, every position asks
    paged = T.paged_attention(q, k_pool, v_pool, [5, 0, 3], 10)  # (h, n_q, d_h), block by block
    mine = T.scaled_dot_product_attention(q[None], answer["K"][None], answer["V"][None], T.causal_mask(10))[0]
    np.testing.assert_allclose(mine, paged, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(answer["K"][:, 8:], k_pool[3, :, :2])  # the last block, half full
