"""Multi-head attention: split, attend per head, merge (notes 000 §2.1, 003 §3.2.2, 004).

    head_i = Attention(X W_q⁽ⁱ⁾, C W_k⁽ⁱ⁾, C W_v⁽ⁱ⁾)       C = X (self) or the encoder output (cross)
    MultiHead(X) = concat(head_1, …, head_h) W_o

All heads' projections live in one matrix: W_q (d, h·d_h), W_k and W_v (d, h_kv·d_h),
W_o (h·d_h, d). h_kv = h is MHA, 1 < h_kv < h is GQA, h_kv = 1 is MQA.
Each public function checks its input at the door (`heads_checks.py`, same name); `f.unchecked`
is the bare formula.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import heads_checks as checks
from .attention import scaled_dot_product_attention
from .layers import linear
from ..backend import get_xp
from ..require import checked_by

__all__ = ["split_heads", "merge_heads", "AttentionWeights", "multi_head_attention", "qkv_heads",
           "split_heads_backward", "merge_heads_backward"]


@checked_by(checks.split_heads)
def split_heads(x, h: int):  # [b, n, h·d_h] -> [b, h, n, d_h]
    """Cut the last axis into h heads of d_h = d / h and move heads before positions."""
    xp = get_xp(x)
    b, n, d = x.shape
    x = xp.reshape(x, (b, n, h, d // h))  # [b, n, h, d_h]
    return xp.permute_dims(x, (0, 2, 1, 3))  # [b, h, n, d_h]


@checked_by(checks.merge_heads)
def merge_heads(x):  # [b, h, n, d_h] -> [b, n, h·d_h]
    """Inverse of split_heads: concat(head_1, …, head_h) along the feature axis."""
    xp = get_xp(x)
    b, h, n, d_h = x.shape
    x = xp.permute_dims(x, (0, 2, 1, 3))  # [b, n, h, d_h]
    return xp.reshape(x, (b, n, h * d_h))  # [b, n, h·d_h]


@checked_by(checks.split_heads_backward)
def split_heads_backward(dX):  # [b, h, n, d_h] -> [b, n, h·d_h]
    """split_heads only moves numbers, so its gradient moves them back: dX = merge_heads(dY)."""
    return merge_heads(dX)


@checked_by(checks.merge_heads_backward)
def merge_heads_backward(dY, h: int):  # [b, n, h·d_h] -> [b, h, n, d_h]
    """The gradient of a concatenation is cut where the pieces were joined: split_heads(dY, h)."""
    return split_heads(dY, h)


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


@checked_by(checks.qkv_heads)
def qkv_heads(x, w: AttentionWeights, h: int, h_kv: int, context=None):
    # [b, n, d] (, [b, n_k, d_c]) -> [b, h, n, d_h], 2 × [b, h_kv, n_k, d_h]
    """Project and split: q (b, h, n, d_h), k and v (b, h_kv, n_k, d_h)."""
    c = x if context is None else context  # self-attention: keys and values come from x too
    q = split_heads(linear(x, w.W_q, w.b_q), h)  # [b, h, n, d_h]
    k = split_heads(linear(c, w.W_k, w.b_k), h_kv)  # [b, h_kv, n_k, d_h]
    v = split_heads(linear(c, w.W_v, w.b_v), h_kv)  # [b, h_kv, n_k, d_h]
    return q, k, v


@checked_by(checks.multi_head_attention)
def multi_head_attention(x, w: AttentionWeights, h: int, h_kv: int | None = None, *,
                         mask=None, context=None, return_weights: bool = False):
    # [b, n, d] -> [b, n, d] (, [b, h, n, n_k])
    """Multi-head (MHA/GQA/MQA) self- or cross-attention.   x: (b, n, d) -> (b, n, d)

    context: None for self-attention, else the (b, n_k, d_c) sequence keys and values come
    from (the encoder output, for cross-attention). mask: boolean, broadcastable to
    (b, h, n, n_k), True = may attend. With return_weights, also the (b, h, n, n_k) weights.
    """
    h_kv = h if h_kv is None else h_kv
    # the door checked every shape once: the parts it calls are trusted
    q, k, v = qkv_heads(x, w, h, h_kv, context)  # [b, h, n, d_h], k and v [b, h_kv, n_k, d_h]
    res = scaled_dot_product_attention(q, k, v, mask, return_weights=return_weights)
    o, p = res if return_weights else (res, None)  # o: [b, h, n, d_h]
    out = linear(merge_heads(o), w.W_o, w.b_o)  # [b, n, h·d_h] @ [h·d_h, d] -> [b, n, d]
    return (out, p) if return_weights else out
