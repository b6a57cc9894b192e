"""Softmax and scaled dot-product attention (notes 000 §2.1, 001, 003).

    Attention(Q, K, V) = softmax(Q Kᵀ / √d_h) V

and, for comparison, the additive (Bahdanau) score that dot-product attention replaced
(note 003 §4.2.2): e_ij = wᵀ tanh(q_i W_q + k_j W_k).

Shapes follow the notes: q is (b, h, n_q, d_h), k and v are (b, h_kv, n_k, d_h).
With h_kv < h (grouped-query attention) query head i reads key/value head
i // (h // h_kv), as PyTorch's `enable_gqa=True` does.
"""
from __future__ import annotations

import math

from .backend import (broadcastable_to, compute_dtype, get_xp, is_floating, require_array, require_float,
                      require_int, require_real)

__all__ = ["softmax", "scaled_dot_product_attention", "repeat_kv", "attention_scores",
           "additive_scores", "additive_attention", "additive_peak_bytes"]


def softmax(x, axis=-1, mask=None):  # [..., n] -> [..., n]
    """Numerically stable softmax: subtract the row maximum before exp.

    exp(x - max) never overflows (its largest value is e⁰ = 1) and gives the same
    result, because softmax(x + c) = softmax(x) for any constant c per row.
    With `mask` (True = keep), masked entries get probability exactly 0; a row
    with nothing kept returns all zeros instead of NaN. A row holding NaN or +inf
    gives NaN throughout, as torch.softmax does: never numbers that do not sum to 1.
    axis may be a tuple of axes: one softmax over all their entries together.
    float16 and bfloat16 are computed in float32 and rounded once to their own dtype (as torch
    does): a float16 sum of a thousand terms would lose the small ones. Integers give float64.

    >>> import numpy as np
    >>> softmax(np.array([1000.0, 1000.0])).tolist()
    [0.5, 0.5]
    """
    _check_softmax(x, axis, mask)
    return _softmax(x, axis, mask)


def _softmax(x, axis=-1, mask=None):  # [..., n] -> [..., n], on checked input
    xp = get_xp(x, mask)
    out_dtype = x.dtype if is_floating(x) else xp.float64  # integers: probabilities in float64
    x = xp.astype(x, compute_dtype(xp, out_dtype), copy=False)  # float16/bfloat16: summed in float32
    if mask is not None:
        x = xp.where(mask, x, -math.inf)
    m = xp.max(x, axis=axis, keepdims=True)  # [..., 1] row max
    m = xp.where(m == -math.inf, 0.0, m)  # all-masked row: max is -inf, use 0 (NaN and +inf stay: NaN row)
    e = xp.exp(x - m)  # [..., n], each in [0, 1]
    z = xp.sum(e, axis=axis, keepdims=True)  # [..., 1] normaliser
    return xp.astype(e / xp.where(z == 0, 1.0, z), out_dtype, copy=False)  # all-masked row: 0 / 1 = 0


def _check_softmax(x, axis, mask):
    require_array("x", x)
    if not (is_floating(x) or get_xp(x).isdtype(x.dtype, "integral")):
        raise TypeError(f"x must hold real numbers (floating point or integers), got dtype {x.dtype}")
    axes = axis if isinstance(axis, tuple) else (axis,)  # a tuple: one softmax over several axes at once
    for a in axes:
        require_int(axis=a, low=None)
        if not -x.ndim <= a < x.ndim:
            raise ValueError(f"axis={axis} is out of range for x of shape {tuple(x.shape)}")
    if len({int(a) % x.ndim for a in axes}) != len(axes):
        raise ValueError(f"axis={axis} names an axis twice")
    if any(x.shape[a] == 0 for a in axes):
        raise ValueError(f"softmax over an empty axis: x has shape {tuple(x.shape)}, axis={axis}")
    if mask is not None:
        _check_mask(mask, tuple(x.shape), "x's shape")


def _check_mask(mask, target, what):
    require_array("mask", mask)
    xp = get_xp(mask)
    if mask.dtype != xp.bool:
        raise TypeError(f"mask must be boolean (True = may attend), got dtype {mask.dtype}")
    if not broadcastable_to(mask.shape, target):
        raise ValueError(f"mask of shape {tuple(mask.shape)} is not broadcastable to {what} = {target}")


def _check_scale(scale):
    if scale is not None:
        require_real(scale=scale)


def repeat_kv(x, n_rep: int):  # [b, h_kv, n, d_h] -> [b, h_kv·n_rep, n, d_h]
    """Repeat each key/value head n_rep times so h_kv heads serve h = h_kv·n_rep queries."""
    require_array("x", x)
    require_int(n_rep=n_rep, low=1)
    return _repeat_kv(x, n_rep)


def _repeat_kv(x, n_rep):  # [b, h_kv, n, d_h] -> [b, h_kv·n_rep, n, d_h]
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
    if n_k == 0:
        raise ValueError(f"n_k must be ≥ 1 (no keys to attend to), got n_k=0: k has shape {tuple(k.shape)}")
    if d_h == 0:
        raise ValueError(f"d_h must be ≥ 1 (q and k have no features to score with), got d_h=0: "
                         f"q has shape {tuple(q.shape)}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k head sizes differ: q d_h={q.shape[-1]}, k d_h={k.shape[-1]}")
    if k.shape[:3] != v.shape[:3]:
        raise ValueError(f"k {tuple(k.shape)} and v {tuple(v.shape)} must agree in (b, h_kv, n_k)")
    if b != bk:
        raise ValueError(f"batch sizes differ: q b={b}, k b={bk}")
    if h_kv == 0 or h % h_kv != 0:
        raise ValueError(f"query heads h={h} must be a multiple of key/value heads h_kv={h_kv}")
    if mask is not None:
        _check_mask(mask, (b, h, n_q, n_k), "(b, h, n_q, n_k)")


def attention_scores(q, k, scale=None):  # [b, h, n_q, d_h], [b, h, n_k, d_h] -> [b, h, n_q, n_k]
    """S = Q Kᵀ · scale, with scale = 1/√d_h unless given."""
    for name, t in (("q", q), ("k", k)):
        require_float(name, t)
        if t.ndim < 2 or t.shape[-1] == 0:
            raise ValueError(f"{name} must be (..., n, d_h) with d_h ≥ 1, got shape {tuple(t.shape)}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k head sizes differ: q d_h={q.shape[-1]}, k d_h={k.shape[-1]}")
    _check_scale(scale)
    return _scores(q, k, scale)


def _scores(q, k, scale=None):  # [b, h, n_q, d_h], [b, h, n_k, d_h] -> [b, h, n_q, n_k]
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
    _check_scale(scale)
    return _sdpa(q, k, v, mask, scale, return_weights)


def _sdpa(q, k, v, mask=None, scale=None, return_weights=False):  # scaled_dot_product_attention, on checked input
    xp = get_xp(q, k, v)
    in_dtype = q.dtype
    ct = compute_dtype(xp, in_dtype)
    q, k, v = (xp.astype(t, ct, copy=False) for t in (q, k, v))
    n_rep = q.shape[1] // k.shape[1]
    k, v = _repeat_kv(k, n_rep), _repeat_kv(v, n_rep)  # [b, h, n_k, d_h]
    s = _scores(q, k, scale)  # [b, h, n_q, n_k]
    p = _softmax(s, axis=-1, mask=mask)  # [b, h, n_q, n_k], rows sum to 1 (or 0 if all masked)
    out = xp.astype(p @ v, in_dtype, copy=False)  # [b, h, n_q, d_h]
    if return_weights:
        return out, xp.astype(p, in_dtype, copy=False)
    return out


# --- additive attention: the other way to score a pair (note 003 §4.2.2) -----------------
def _check_additive(q, k, W_q, W_k, w):
    for name, t in (("q", q), ("k", k), ("W_q", W_q), ("W_k", W_k), ("w", w)):
        require_float(name, t)
    if q.ndim < 2 or k.ndim < 2:
        raise ValueError(f"q and k must be (..., n, d) arrays, got shapes {tuple(q.shape)} and {tuple(k.shape)}")
    if W_q.ndim != 2 or W_k.ndim != 2 or w.ndim != 1:
        raise ValueError(f"need W_q (d_q, d_a), W_k (d_k, d_a), w (d_a,), got shapes {tuple(W_q.shape)}, "
                         f"{tuple(W_k.shape)}, {tuple(w.shape)}")
    if W_q.shape[0] != q.shape[-1] or W_k.shape[0] != k.shape[-1]:
        raise ValueError(f"W_q {tuple(W_q.shape)} must start with q's size d_q={q.shape[-1]} and W_k "
                         f"{tuple(W_k.shape)} with k's size d_k={k.shape[-1]}")
    if not W_q.shape[1] == W_k.shape[1] == w.shape[0]:
        raise ValueError(f"W_q {tuple(W_q.shape)}, W_k {tuple(W_k.shape)} and w {tuple(w.shape)} must share d_a")


def additive_scores(q, k, W_q, W_k, w):  # [..., n_q, d_q], [..., n_k, d_k] -> [..., n_q, n_k]
    """Additive scores e_ij = wᵀ tanh(q_i W_q + k_j W_k), with W_q (d_q, d_a), W_k (d_k, d_a), w (d_a,).

    A one-hidden-layer network scores each (query, key) pair, so q and k may differ in
    size, and |e_ij| ≤ ‖w‖₁ however large q and k grow (tanh is bounded): no 1/√d_k needed.
    The price: every pair forms its own d_a-vector, an (n_q, n_k, d_a) tensor, where a dot
    product needs one matrix product and n_q·n_k numbers.

    >>> import numpy as np
    >>> one = np.ones((1, 1))
    >>> np.round(additive_scores(np.array([[0.5]]), np.array([[0.5], [-0.5]]), one, one, np.array([2.0])), 4).tolist()
    [[1.5232, 0.0]]
    """
    _check_additive(q, k, W_q, W_k, w)
    xp = get_xp(q, k, W_q, W_k, w)
    q_a = q @ W_q  # [..., n_q, d_a]
    k_a = k @ W_k  # [..., n_k, d_a]
    hidden = xp.tanh(q_a[..., :, None, :] + k_a[..., None, :, :])  # [..., n_q, n_k, d_a], one vector per pair
    return hidden @ w  # [..., n_q, n_k]


def additive_attention(q, k, v, W_q, W_k, w, mask=None, *, return_weights=False):
    """softmax(e) V with additive scores e (`additive_scores`); q (..., n_q, d_q), k (..., n_k, d_k),
    v (..., n_k, d_v). mask: boolean, broadcastable to (..., n_q, n_k), True = may attend;
    an all-False row gives zeros. Returns out (..., n_q, d_v) (and the weights)."""
    require_float("v", v)
    if v.shape[:-1] != k.shape[:-1]:
        raise ValueError(f"k {tuple(k.shape)} and v {tuple(v.shape)} must agree in all but the last dim")
    p = softmax(additive_scores(q, k, W_q, W_k, w), axis=-1, mask=mask)  # [..., n_q, n_k]
    out = p @ v  # [..., n_q, d_v]
    return (out, p) if return_weights else out


def additive_peak_bytes(n_q: int, n_k: int, d_a: int, itemsize: int = 4) -> int:
    """Extra memory of `additive_scores` at its peak: the (n_q, n_k, d_a) sum and its tanh
    are both alive while tanh runs, 2 · n_q · n_k · d_a · itemsize (per batch·head).
    Dot-product scores need n_q · n_k · itemsize."""
    require_int(n_q=n_q, n_k=n_k, d_a=d_a, itemsize=itemsize)
    return 2 * n_q * n_k * d_a * itemsize
