"""Multi-head attention: split, attend per head, merge (notes 000 §2.1, 003 §3.2.2, 004).

    head_i = Attention(X W_q⁽ⁱ⁾, C W_k⁽ⁱ⁾, C W_v⁽ⁱ⁾)       C = X (self) or the encoder output (cross)
    MultiHead(X) = concat(head_1, …, head_h) W_o

All heads' projections live in one matrix: W_q (d, h·d_h), W_k and W_v (d, h_kv·d_h),
W_o (h·d_h, d). h_kv = h is MHA, 1 < h_kv < h is GQA, h_kv = 1 is MQA.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import checks
from .attention import scaled_dot_product_attention
from ..backend import get_xp
from ..require import require_array, require_float, require_int, require_vector

__all__ = ["split_heads", "merge_heads", "AttentionWeights", "multi_head_attention", "qkv_heads"]


def split_heads(x, h: int):  # [b, n, h·d_h] -> [b, h, n, d_h]
    """Cut the last axis into h heads of d_h = d / h and move heads before positions."""
    require_array("x", x)
    if x.ndim != 3:
        raise ValueError(f"split_heads needs x of shape (b, n, h·d_h), got shape {tuple(x.shape)}")
    require_int(h=h, low=1)
    if x.shape[-1] % h:
        raise ValueError(f"d={x.shape[-1]} must be divisible by the number of heads h={h}")
    return _split_heads(x, h)


def _split_heads(x, h):  # [b, n, h·d_h] -> [b, h, n, d_h], on checked input
    xp = get_xp(x)
    b, n, d = x.shape
    x = xp.reshape(x, (b, n, h, d // h))  # [b, n, h, d_h]
    return xp.permute_dims(x, (0, 2, 1, 3))  # [b, h, n, d_h]


def merge_heads(x):  # [b, h, n, d_h] -> [b, n, h·d_h]
    """Inverse of split_heads: concat(head_1, …, head_h) along the feature axis."""
    require_array("x", x)
    if x.ndim != 4:
        raise ValueError(f"merge_heads needs x of shape (b, h, n, d_h), got shape {tuple(x.shape)}")
    return _merge_heads(x)


def _merge_heads(x):  # [b, h, n, d_h] -> [b, n, h·d_h], on checked input
    xp = get_xp(x)
    b, h, n, d_h = x.shape
    x = xp.permute_dims(x, (0, 2, 1, 3))  # [b, n, h, d_h]
    return xp.reshape(x, (b, n, h * d_h))  # [b, n, h·d_h]


@dataclass
class AttentionWeights:
    """Projection matrices of one attention layer, in the notes' orientation (x @ W)."""
    W_q: Any  # (d, h·d_h)
    W_k: Any  # (d_kv_in, h_kv·d_h)
    W_v: Any  # (d_kv_in, h_kv·d_h)
    W_o: Any  # (h·d_h, d)
    b_q: Any = None  # (h·d_h,)
    b_k: Any = None  # (h_kv·d_h,)
    b_v: Any = None  # (h_kv·d_h,)
    b_o: Any = None  # (d,)


def _linear(x, W, b=None):  # [..., d_in], [d_in, d_out] -> [..., d_out]
    y = x @ W
    return y if b is None else y + b


def _check_projections(x, w, h, h_kv, context):  # -> d_h
    """Shapes of x, context and the q/k/v projections, each named, before any matmul."""
    require_float("x", x)
    if x.ndim != 3:
        raise ValueError(f"x must be (b, n, d), got shape {tuple(x.shape)}")
    require_int(h=h, h_kv=h_kv, low=1)
    b, d = x.shape[0], x.shape[-1]
    if d % h:
        raise ValueError(f"d={d} must be divisible by the number of heads h={h}")
    if h % h_kv:
        raise ValueError(f"query heads h={h} must be a multiple of key/value heads h_kv={h_kv}")
    d_c = d
    if context is not None:
        require_float("context", context)
        if context.ndim != 3 or context.shape[0] != b:
            raise ValueError(f"context must be (b, n_k, d_c) with b={b}, got shape {tuple(context.shape)}")
        d_c = context.shape[-1]
    for name in ("W_q", "W_k", "W_v"):
        require_float(name, getattr(w, name))
        if getattr(w, name).ndim != 2:
            raise ValueError(f"{name} must be a matrix, got shape {tuple(getattr(w, name).shape)}")
    if w.W_q.shape[0] != d:
        raise ValueError(f"W_q has {w.W_q.shape[0]} input rows but x has d={d}")
    if w.W_q.shape[1] % h or w.W_q.shape[1] == 0:
        raise ValueError(f"W_q's {w.W_q.shape[1]} columns do not split into h={h} heads")
    d_h = w.W_q.shape[1] // h
    if w.W_k.shape[1] != h_kv * d_h or w.W_v.shape[1] != h_kv * d_h:
        raise ValueError(f"W_k/W_v need h_kv·d_h = {h_kv}·{d_h} = {h_kv * d_h} columns, "
                         f"got {w.W_k.shape[1]} and {w.W_v.shape[1]}")
    if w.W_k.shape[0] != d_c or w.W_v.shape[0] != d_c:
        src = "x" if context is None else "context"
        raise ValueError(f"W_k/W_v need {src}'s {d_c} input rows, got shapes {tuple(w.W_k.shape)} and "
                         f"{tuple(w.W_v.shape)}")
    _check_bias(w, "b_q", h * d_h)
    _check_bias(w, "b_k", h_kv * d_h)
    _check_bias(w, "b_v", h_kv * d_h)
    return d_h


def _check_bias(w, name, size):
    bias = getattr(w, name)
    if bias is not None:
        require_vector(name, bias, size)


def qkv_heads(x, w: AttentionWeights, h: int, h_kv: int, context=None):
    """Project and split: q (b, h, n, d_h), k and v (b, h_kv, n_k, d_h)."""
    _check_projections(x, w, h, h_kv, context)
    return _qkv_heads(x, w, h, h_kv, context)


def _qkv_heads(x, w, h, h_kv, context=None):  # qkv_heads on checked input
    c = x if context is None else context
    q = _split_heads(_linear(x, w.W_q, w.b_q), h)  # [b, h, n, d_h]
    k = _split_heads(_linear(c, w.W_k, w.b_k), h_kv)  # [b, h_kv, n_k, d_h]
    v = _split_heads(_linear(c, w.W_v, w.b_v), h_kv)  # [b, h_kv, n_k, d_h]
    return q, k, v


def multi_head_attention(x, w: AttentionWeights, h: int, h_kv: int | None = None, *,
                         mask=None, context=None, return_weights: bool = False):
    """Multi-head (MHA/GQA/MQA) self- or cross-attention.   x: (b, n, d) -> (b, n, d)

    context: None for self-attention, else the (b, n_k, d_c) sequence keys and values come
    from (the encoder output, for cross-attention). mask: boolean, broadcastable to
    (b, h, n, n_k), True = may attend. With return_weights, also the (b, h, n, n_k) weights.
    """
    h_kv = h if h_kv is None else h_kv
    d_h = _check_projections(x, w, h, h_kv, context)
    require_float("W_o", w.W_o)
    if w.W_o.ndim != 2 or w.W_o.shape[0] != h * d_h:
        raise ValueError(f"W_o must be (h·d_h, d) with h·d_h = {h * d_h} rows, got shape {tuple(w.W_o.shape)}")
    _check_bias(w, "b_o", w.W_o.shape[1])
    n_k = x.shape[1] if context is None else context.shape[1]  # keys and values come from x or context
    if n_k == 0:
        raise ValueError(f"n_k must be ≥ 1 (no keys to attend to), got n_k=0: "
                         f"{'x' if context is None else 'context'} has no positions")
    if mask is not None:
        checks.mask_against(mask, (x.shape[0], h, x.shape[1], n_k), "(b, h, n_q, n_k)")
    return _multi_head_attention(x, w, h, h_kv, mask, context, return_weights)


def _multi_head_attention(x, w, h, h_kv, mask=None, context=None,
                          return_weights=False):  # [b, n, d] -> [b, n, d] (, [b, h, n, n_k]), on checked input
    q, k, v = _qkv_heads(x, w, h, h_kv, context)  # [b, h, n, d_h], k and v [b, h_kv, n_k, d_h]
    res = scaled_dot_product_attention.unchecked(q, k, v, mask, return_weights=return_weights)
    o, p = res if return_weights else (res, None)  # o: [b, h, n, d_h]
    out = _linear(_merge_heads(o), w.W_o, w.b_o)  # [b, n, h·d_h] @ [h·d_h, d] -> [b, n, d]
    return (out, p) if return_weights else out
