"""The refusals of `core/heads.py`, one check per public function and of the same name."""
from __future__ import annotations

from ..require import require_array, require_bool, require_float, require_int, require_vector
from .shared_checks import mask_against


def split_heads(x, h):
    require_array("x", x)
    if x.ndim != 3:
        raise ValueError(f"split_heads needs x of shape (b, n, h·d_h), got shape {tuple(x.shape)}")
    require_int(h=h, low=1)
    if x.shape[-1] % h:
        raise ValueError(f"d={x.shape[-1]} must be divisible by the number of heads h={h}")


def merge_heads(x):
    require_array("x", x)
    if x.ndim != 4:
        raise ValueError(f"merge_heads needs x of shape (b, h, n, d_h), got shape {tuple(x.shape)}")


def split_heads_backward(dX):
    merge_heads(dX)


def merge_heads_backward(dY, h):
    split_heads(dY, h)


def optional_bias(w, name, size):
    """The bias `name` of the weights w: None, or a floating-point vector of `size` numbers."""
    bias = getattr(w, name)
    if bias is not None:
        require_vector(name, bias, size)


def projections(x, w, h, h_kv, context):
    """Shapes of x, context and the q/k/v projections, each named, before any matmul."""
    if not all(hasattr(w, name) for name in ("W_q", "W_k", "W_v", "W_o")):
        raise TypeError(f"w must hold the projections W_q, W_k, W_v and W_o (T.AttentionWeights), got "
                        f"{type(w).__name__}")
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
    kv_cols = w.W_k.shape[1]
    if kv_cols == w.W_v.shape[1] and kv_cols % h_kv == 0 and kv_cols != h_kv * d_h:  # W_k and W_v agree: W_q is off
        raise ValueError(f"W_q's {w.W_q.shape[1]} columns give d_h = {d_h} over h={h} heads, but W_k and W_v's "
                         f"{kv_cols} give d_h = {kv_cols // h_kv} over h_kv={h_kv}: the three must share d_h")
    if w.W_k.shape[1] != h_kv * d_h or w.W_v.shape[1] != h_kv * d_h:
        raise ValueError(f"W_k/W_v need h_kv·d_h = {h_kv}·{d_h} = {h_kv * d_h} columns, "
                         f"got {w.W_k.shape[1]} and {w.W_v.shape[1]}")
    if w.W_k.shape[0] != d_c or w.W_v.shape[0] != d_c:
        src = "x" if context is None else "context"
        raise ValueError(f"W_k/W_v need {src}'s {d_c} input rows, got shapes {tuple(w.W_k.shape)} and "
                         f"{tuple(w.W_v.shape)}")
    optional_bias(w, "b_q", h * d_h)
    optional_bias(w, "b_k", h_kv * d_h)
    optional_bias(w, "b_v", h_kv * d_h)


def qkv_heads(x, w, h, h_kv, context):
    projections(x, w, h, h_kv, context)


def multi_head_attention(x, w, h, h_kv, *, mask, context, return_weights):
    require_bool(return_weights=return_weights)  # "no" is truthy
    h_kv = h if h_kv is None else h_kv
    projections(x, w, h, h_kv, context)
    h_d_h = w.W_q.shape[1]  # h·d_h, the columns of W_q
    require_float("W_o", w.W_o)
    if w.W_o.ndim != 2 or w.W_o.shape[0] != h_d_h:
        raise ValueError(f"W_o must be (h·d_h, d) with h·d_h = {h_d_h} rows, got shape {tuple(w.W_o.shape)}")
    optional_bias(w, "b_o", w.W_o.shape[1])
    n_k = x.shape[1] if context is None else context.shape[1]  # keys and values come from x or context
    if n_k == 0:
        raise ValueError(f"n_k must be ≥ 1 (no keys to attend to), got n_k=0: "
                         f"{'x' if context is None else 'context'} has no positions")
    if mask is not None:
        mask_against(mask, (x.shape[0], h, x.shape[1], n_k), "(b, h, n_q, n_k)")
