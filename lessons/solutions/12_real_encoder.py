"""Solutions to lesson 12's "Try it" (a real encoder)."""
import math

import numpy as np


def exercise_1():
    """Mean pooling ignores [PAD]: hidden states (3, 1), (1, 3) and a padded row (100, 100), with
    length 2, give ((3 + 1) / 2, (1 + 3) / 2) = (2, 2); scaled to length 1: (1/√2, 1/√2)."""
    return [1 / math.sqrt(2), 1 / math.sqrt(2)]


def check_1(answer, T):
    hidden = np.array([[[3.0, 1.0], [1.0, 3.0], [100.0, 100.0]]])  # (b, n, d) = (1, 3, 2)
    np.testing.assert_allclose(answer, T.l2_normalize(T.mean_pool(hidden, np.array([2])))[0], rtol=1e-12)


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
