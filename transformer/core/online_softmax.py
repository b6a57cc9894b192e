"""The online softmax: a row's max and normaliser in one pass (notes 000 §3.2.2, 001).

softmax(x)_j = e^(x_j - m) / l  with  m = max_j x_j  and  l = Σ_j e^(x_j - m).
The two-pass way reads x once for m and again for l. The online way reads it once,
keeping a running max m and a running sum l: when a new entry (or block) raises the
max, the sum so far is rescaled by e^(m_old - m_new). Two parts of a row combine the
same way (`merge_softmax_stats`), which is what lets FlashAttention work tile by tile
and a paged KV cache block by block.
Each public function with a refusal checks its input at the door (`online_softmax_checks.py`, same name).
"""
from __future__ import annotations

import math

import numpy as np

from . import online_softmax_checks as checks
from ..backend import compute_dtype, get_xp, to_numpy
from ..require import checked_by

__all__ = ["exp_minus", "merge_softmax_stats", "online_attention_update", "online_softmax_stats",
           "online_softmax_history", "online_softmax"]


@checked_by(checks.exp_minus)
def exp_minus(x, m):  # [..., n], [..., 1] -> [..., n]
    """e^(x - m), where a row whose max m is still -inf (nothing seen yet) gives 0, not NaN.

    A max of NaN or +inf stays: the row turns NaN throughout, as softmax and torch give.

    >>> import numpy as np
    >>> exp_minus(np.array([[-np.inf, -np.inf]]), np.array([[-np.inf]])).tolist()
    [[0.0, 0.0]]
    """
    xp = get_xp(x, m)
    return xp.exp(x - xp.where(m == -math.inf, 0.0, m))  # x is -inf there too: e^-inf = 0


@checked_by(checks.merge_softmax_stats)
def merge_softmax_stats(m_a, l_a, m_b, l_b):  # [..., 1] × 4 -> [..., 1], [..., 1]
    """Combine the (max, sum) of two parts of a row into those of the whole row.

        m = max(m_a, m_b)
        l = l_a·e^(m_a - m) + l_b·e^(m_b - m)      each partial sum rescaled to the common max

    >>> import numpy as np
    >>> m, l = merge_softmax_stats(np.array([0.0]), np.array([1.0]), np.array([0.0]), np.array([1.0]))
    >>> m.tolist(), l.tolist()
    ([0.0], [2.0])
    """
    xp = get_xp(m_a, l_a, m_b, l_b)
    m = xp.maximum(m_a, m_b)
    l = l_a * exp_minus(m_a, m) + l_b * exp_minus(m_b, m)
    return m, l


@checked_by(checks.online_attention_update)
def online_attention_update(m, l, O, S_j, V_j):
    # [..., Br, 1] ×2, [..., Br, d_h], [..., Br, Bc], [..., Bc, d_h] -> [..., Br, 1] ×2, [..., Br, d_h]
    """Fold one tile of scores S_j and its values V_j into the running (m, l, O) of a block of rows.

        m_new = max(m, rowmax S_j)
        P̃     = e^(S_j − m_new)             [Br, Bc], each ≤ 1
        α     = e^(m − m_new)               what came before shrinks when the max goes up
        l_new = α·l + rowsum P̃
        O_new = α·O + P̃ V_j                 O stays unnormalised: divide by l once, at the end

    This is FlashAttention-2's inner step; after the last tile, softmax(S) V = O / l. A row whose
    max is still −inf (every score so far masked) keeps m = −inf, l = 0 and O = 0, not NaN.

    >>> import numpy as np
    >>> m, l, O = np.full((1, 1), -np.inf), np.zeros((1, 1)), np.zeros((1, 1))
    >>> m, l, O = online_attention_update(m, l, O, np.array([[0.0]]), np.array([[2.0]]))
    >>> m, l, O = online_attention_update(m, l, O, np.array([[0.0]]), np.array([[4.0]]))
    >>> (O / l).item()  # the mean of 2 and 4: two equal scores
    3.0
    """
    xp = get_xp(m, l, O, S_j, V_j)
    m_new = xp.maximum(m, xp.max(S_j, axis=-1, keepdims=True))  # [..., Br, 1]
    P = exp_minus(S_j, m_new)  # [..., Br, Bc]
    alpha = exp_minus(m, m_new)  # [..., Br, 1]
    l_new = alpha * l + xp.sum(P, axis=-1, keepdims=True)  # [..., Br, 1]
    O_new = alpha * O + P @ V_j  # [..., Br, d_h]
    return m_new, l_new, O_new


@checked_by(checks.online_softmax_stats)
def online_softmax_stats(x, block: int = 1, history: list | None = None):  # [..., n] -> [..., 1], [..., 1]
    """Row max m and normaliser l = Σ_j e^(x_j - m) in ONE pass over x, `block` entries at a time.

    With block = 1 this is the recurrence of note 000 §3.2.2:
        m_new = max(m, x_j)
        l_new = l·e^(m - m_new) + e^(x_j - m_new)
    With block = B each step folds in a whole block's (max, sum) with `merge_softmax_stats`.
    If `history` is a list, (m, l) after each step are appended to it (as NumPy arrays). float16 and
    bfloat16 rows give m and l in float32: a float16 sum of 5,000 terms of 1 stops growing at 2048.

    >>> import numpy as np
    >>> m, l = online_softmax_stats(np.log(np.array([1.0, 2.0, 3.0])))
    >>> round(float(np.exp(m[0]) * l[0]), 12)  # Σ e^x = 1 + 2 + 3
    6.0
    """
    xp = get_xp(x)
    n = x.shape[-1]
    x = xp.astype(x, compute_dtype(xp, x.dtype), copy=False)  # float16: l summed in float32 (it stops at 2048)
    m = xp.full(x.shape[:-1] + (1,), -math.inf, dtype=x.dtype)  # [..., 1] max so far
    l = xp.zeros(x.shape[:-1] + (1,), dtype=x.dtype)  # [..., 1] Σ e^(x - m) so far
    for c0 in range(0, n, block):
        x_j = x[..., c0:min(n, c0 + block)]  # [..., B] the next block (the last may be shorter)
        m_j = xp.max(x_j, axis=-1, keepdims=True)  # [..., 1] the block's own max
        l_j = xp.sum(exp_minus(x_j, m_j), axis=-1, keepdims=True)  # [..., 1] the block's own sum
        m, l = merge_softmax_stats(m, l, m_j, l_j)  # rescale the old sum if the max went up
        if history is not None:
            history.append((to_numpy(m)[..., 0].copy(), to_numpy(l)[..., 0].copy()))
    return m, l


@checked_by(checks.online_softmax_history)
def online_softmax_history(x, block: int = 1):  # [..., n] -> [T, ...], [T, ...] as NumPy
    """The running (m, l) after each of the T = ⌈n / block⌉ steps, stacked for plotting.

    The last step's values are the full row's max and Σ e^(x - max).
    """
    history = []
    online_softmax_stats(x, block, history)  # x and block were checked at this door
    return np.stack([m for m, _ in history]), np.stack([l for _, l in history])


@checked_by(checks.online_softmax)
def online_softmax(x, block: int = 1):  # [..., n] -> [..., n]
    """softmax(x) from the one-pass statistics: e^(x - m) / l.

    As `softmax`: float16 is computed in float32 and rounded once, and a row of −inf (nothing to attend
    to) gives zeros, not 0 / 0.

    >>> import numpy as np
    >>> online_softmax(np.array([[0.0, 0.0], [-np.inf, -np.inf]])).tolist()
    [[0.5, 0.5], [0.0, 0.0]]
    """
    xp = get_xp(x)
    x_c = xp.astype(x, compute_dtype(xp, x.dtype), copy=False)  # float16 in float32, cast once for both passes
    m, l = online_softmax_stats(x_c, block)  # x and block were checked at this door
    p = exp_minus(x_c, m) / xp.where(l == 0, 1.0, l)  # [..., n]; l = 0: a row of −inf
    return xp.astype(p, x.dtype, copy=False)
