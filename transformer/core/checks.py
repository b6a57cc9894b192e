"""Every refusal of the core's public functions, one check per function and of the same name.

A formula in `core/` names its check at the door (`@checked_by(checks.softmax)`); the check
receives the same arguments and raises a one-line error naming the bad value, or returns None.
Checks shared by several doors (a mask's shape, a scale) are the small functions at the top.
"""
from __future__ import annotations

from ..backend import get_xp, is_floating
from ..require import broadcastable_to, require_array, require_float, require_int, require_real


# --- shared pieces --------------------------------------------------------------------------
def mask_against(mask, target, what):
    """A boolean mask (True = may attend) that broadcasts to `target`, named `what` in the message."""
    require_array("mask", mask)
    xp = get_xp(mask)
    if mask.dtype != xp.bool:
        raise TypeError(f"mask must be boolean (True = may attend), got dtype {mask.dtype}")
    if not broadcastable_to(mask.shape, target):
        raise ValueError(f"mask of shape {tuple(mask.shape)} is not broadcastable to {what} = {target}")


def optional_scale(scale):
    """None (1/√d_h) or a finite real number."""
    if scale is not None:
        require_real(scale=scale)


def attention_shapes(q, k, v, mask):
    """q (b, h, n_q, d_h), k and v (b, h_kv, n_k, d_h) with h a multiple of h_kv; the mask broadcasts."""
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
        mask_against(mask, (b, h, n_q, n_k), "(b, h, n_q, n_k)")


# --- attention.py ---------------------------------------------------------------------------
def softmax(x, axis=-1, mask=None):
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
        mask_against(mask, tuple(x.shape), "x's shape")


def repeat_kv(x, n_rep):
    require_array("x", x)
    require_int(n_rep=n_rep, low=1)


def attention_scores(q, k, scale=None):
    for name, t in (("q", q), ("k", k)):
        require_float(name, t)
        if t.ndim < 2 or t.shape[-1] == 0:
            raise ValueError(f"{name} must be (..., n, d_h) with d_h ≥ 1, got shape {tuple(t.shape)}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k head sizes differ: q d_h={q.shape[-1]}, k d_h={k.shape[-1]}")
    optional_scale(scale)


def scaled_dot_product_attention(q, k, v, mask=None, *, scale=None, return_weights=False):
    attention_shapes(q, k, v, mask)
    optional_scale(scale)


def additive_scores(q, k, W_q, W_k, w):
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


def additive_attention(q, k, v, W_q, W_k, w, mask=None, *, return_weights=False):
    require_float("v", v)
    if v.shape[:-1] != k.shape[:-1]:
        raise ValueError(f"k {tuple(k.shape)} and v {tuple(v.shape)} must agree in all but the last dim")
    # q, k, the weights and the mask are checked by the checked additive_scores and softmax it calls


def additive_peak_bytes(n_q, n_k, d_a, itemsize=4):
    require_int(n_q=n_q, n_k=n_k, d_a=d_a, itemsize=itemsize)
