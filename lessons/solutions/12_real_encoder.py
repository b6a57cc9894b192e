"""Solutions to lesson 12's "Try it" (a real encoder)."""
import math

import numpy as np


def exercise_1():
    """Mean pooling that ignores [PAD], in NumPy, for a batch of two: sentence 0 has 2 real tokens
    (3, 1), (1, 3) and a [PAD] row (100, 100); sentence 1 has 1 real token (0, 2) and two [PAD] rows.
    A mask (b, n, 1) of 1 for real tokens zeroes the [PAD] rows; sum over n and divide by the length:
    (2, 2) and (0, 2). Scaled to length 1: (1/√2, 1/√2) = (0.707, 0.707) and (0, 1)."""
    hidden = np.array([[[3.0, 1.0], [1.0, 3.0], [100.0, 100.0]],
                       [[0.0, 2.0], [100.0, 100.0], [100.0, 100.0]]])  # (b, n, d) = (2, 3, 2)
    lengths = np.array([2, 1])  # (b,)
    real = (np.arange(3)[None, :] < lengths[:, None])[:, :, None]  # (b, n, 1): True on real tokens
    pooled = (hidden * real).sum(axis=1) / lengths[:, None]  # (b, d)
    return pooled / np.linalg.norm(pooled, axis=-1, keepdims=True)  # (b, d), unit rows


def check_1(answer, T):
    hidden = np.array([[[3.0, 1.0], [1.0, 3.0], [100.0, 100.0]],
                       [[0.0, 2.0], [100.0, 100.0], [100.0, 100.0]]])  # (b, n, d) = (2, 3, 2)
    np.testing.assert_allclose(answer, T.l2_normalize(T.mean_pool(hidden, np.array([2, 1]))), rtol=1e-12, atol=1e-15)


def exercise_2():
    """MiniLM's attention in one layer: h = 12 heads, n = 10 tokens. Bidirectional, each head scores
    every pair: 12 · 10 · 10 = 1200 weights, none hidden. A causal mask would hide the
    10 · 9 / 2 = 45 pairs above the diagonal in each head: 540 of them."""
    return 12 * 10 * 10, 12 * 10 * 9 // 2


def check_2(answer, T):
    n = 10
    both = np.broadcast_to(T.bidirectional_mask(n), (12, n, n))
    causal = np.broadcast_to(T.causal_mask(n), (12, n, n))
    assert answer == (int(both.sum()), int((both & ~causal).sum())), answer
