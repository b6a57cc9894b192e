"""Softmax and scaled dot-product attention (notes 000 §2.1, 001, 003).

    Attention(Q, K, V) = softmax(Q Kᵀ / √d_h) V

Shapes follow the notes: q is (b, h, n_q, d_h), k and v are (b, h_kv, n_k, d_h).
With h_kv < h (grouped-query attention) query head i reads key/value head
i // (h // h_kv), as PyTorch's `enable_gqa=True` does.
"""
from __future__ import annotations

import math

from .backend import get_xp, require_float, compute_dtype

__all__ = ["softmax", "scaled_dot_product_attention", "repeat_kv", "attention_scores"]


def softmax(x, axis=-1, mask=None):  # [..., n] -> [..., n]
    """Numerically stable softmax: subtract the row maximum before exp.

    exp(x - max) never overflows (its largest value is e⁰ = 1) and gives the same
    result, because softmax(x + c) = softmax(x) for any constant c per row.
    With `mask` (True = keep), masked entries get probability exactly 0; a row
    with nothing kept returns all zeros instead of NaN.

    >>> import numpy as np
    >>> softmax(np.array([1000.0, 1000.0])).tolist()
    [0.5, 0.5]
    """
    xp = get_xp(x, mask)
    if mask is not None:
        x = xp.where(mask, x, -math.inf)
    m = xp.max(x, axis=axis, keepdims=True)  # [..., 1] row max
    m = xp.where(xp.isfinite(m), m, 0.0)  # all-masked row: max is -inf, use 0
    e = xp.exp(x - m)  # [..., n], each in [0, 1]
    z = xp.sum(e, axis=axis, keepdims=True)  # [..., 1] normaliser
    return e / xp.where(z > 0, z, 1.0)  # all-masked row: 0 / 1 = 0


def repeat_kv(x, n_rep: int):  # [b, h_kv, n, d_h] -> [b, h_kv·n_rep, n, d_h]
    """Repeat each key/value head n_rep times so h_kv heads serve h = h_kv·n_rep queries."""
    if n_rep == 1:
        return x
    xp = get_xp(x)
    return xp.repeat(x, n_rep, axis=1)  # head j becomes heads j·n_rep … j·n_rep + n_rep-1


def _check_shapes(q, k, v, mask):
    for name, t in (("q", q), ("k", k), ("v", v)):
        require_float(name, t)
        if t.ndim != 4:
            raise ValueError(f"{name} must have 4 dims (b, heads, n, d_h), got shape {tuple(t.shape)}")
    b, h, n_q, d_h = q.shape
    bk, h_kv, n_k, d_k = k.shape
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k head sizes differ: q d_h={q.shape[-1]}, k d_h={k.shape[-1]}")
    if k.shape[:3] != v.shape[:3]:
        raise ValueError(f"k {tuple(k.shape)} and v {tuple(v.shape)} must agree in (b, h_kv, n_k)")
    if b != bk:
        raise ValueError(f"batch sizes differ: q b={b}, k b={bk}")
    if h_kv == 0 or h % h_kv != 0:
        raise ValueError(f"query heads h={h} must be a multiple of key/value heads h_kv={h_kv}")
    if mask is not None:
        xp = get_xp(mask)
        if mask.dtype != xp.bool:
            raise TypeError(f"mask must be boolean (True = may attend), got dtype {mask.dtype}")
        target = (b, h, n_q, n_k)
        ms = tuple(mask.shape)
        ok = len(ms) <= 4 and all(m in (1, t) for m, t in zip(ms[::-1], target[::-1]))
        if not ok:
            raise ValueError(f"mask of shape {ms} is not broadcastable to (b, h, n_q, n_k) = {target}")


def attention_scores(q, k, scale=None):  # [b, h, n_q, d_h], [b, h, n_k, d_h] -> [b, h, n_q, n_k]
    """S = Q Kᵀ · scale, with scale = 1/√d_h unless given."""
    xp = get_xp(q, k)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    return (q @ xp.matrix_transpose(k)) * scale  # [b, h, n_q, n_k]


def scaled_dot_product_attention(q, k, v, mask=None, *, scale=None, return_weights=False):
    """softmax(Q Kᵀ/√d_h + mask) V for q (b, h, n_q, d_h), k/v (b, h_kv, n_k, d_h).

    mask: boolean, broadcastable to (b, h, n_q, n_k), True = may attend.
    Rows whose mask is all False return zeros (not NaN): such a query sees nothing.
    float16/bfloat16 inputs are computed in float32 and the output cast back.
    Returns out (b, h, n_q, d_h), and the weights (b, h, n_q, n_k) if return_weights.

    >>> import numpy as np
    >>> q = k = v = np.eye(2).reshape(1, 1, 2, 2)
    >>> np.round(scaled_dot_product_attention(q, k, v)[0, 0], 3).tolist()
    [[0.67, 0.33], [0.33, 0.67]]
    """
    _check_shapes(q, k, v, mask)
    xp = get_xp(q, k, v)
    in_dtype = q.dtype
    ct = compute_dtype(xp, in_dtype)
    q, k, v = (xp.astype(t, ct, copy=False) for t in (q, k, v))
    n_rep = q.shape[1] // k.shape[1]
    k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)  # [b, h, n_k, d_h]
    s = attention_scores(q, k, scale)  # [b, h, n_q, n_k]
    p = softmax(s, axis=-1, mask=mask)  # [b, h, n_q, n_k], rows sum to 1 (or 0 if all masked)
    out = xp.astype(p @ v, in_dtype, copy=False)  # [b, h, n_q, d_h]
    if return_weights:
        return out, xp.astype(p, in_dtype, copy=False)
    return out
