"""Softmax and scaled dot-product attention (notes 000 §2.1, 001, 003).

    Attention(Q, K, V) = softmax(Q Kᵀ / √d_h) V

Shapes follow the notes: q is (b, h, n_q, d_h), k and v are (b, h_kv, n_k, d_h).
With h_kv < h (grouped-query attention) query head i reads key/value head
i // (h // h_kv), as PyTorch's `enable_gqa=True` does.
Each public function checks its input at the door (`attention_checks.py`, same name); `f.unchecked`
is the bare formula.

Dropout sits here because that is where the Transformer's recipes apply it to attention: on the
weights P, after the softmax and before P V (the Annotated Transformer, nanoGPT's `attn_dropout`),
as well as on the sub-layers' outputs.
"""
from __future__ import annotations

import math

import numpy as np

from . import attention_checks as checks
from ..backend import compute_dtype, get_xp, is_floating
from ..require import checked_by

__all__ = ["softmax", "scaled_dot_product_attention", "repeat_kv", "attention_scores",
           "softmax_backward", "repeat_kv_backward", "scaled_dot_product_attention_backward",
           "dropout", "dropout_backward"]


@checked_by(checks.softmax)
def softmax(x, axis=-1, mask=None):  # [..., n] -> [..., n]
    """Numerically stable softmax: subtract the row maximum before exp.

    exp(x - max) never overflows (its largest value is e⁰ = 1) and gives the same
    result, because softmax(x + c) = softmax(x) for any constant c per row.
    With `mask` (True = keep), masked entries get probability exactly 0; a row
    with nothing kept returns all zeros instead of NaN. A row holding NaN or +inf
    gives NaN throughout, as torch.softmax does: never numbers that do not sum to 1.
    axis may be a tuple of axes: one softmax over all their entries together.
    float16 and bfloat16 are computed in float32 and rounded once to their own dtype (as torch
    does): exponentials taken in float16 and a running sum rounded to float16 at each step would both
    lose accuracy (lesson 03 measures each). Integers give float64.

    >>> import numpy as np
    >>> softmax(np.array([1000.0, 1000.0])).tolist()
    [0.5, 0.5]
    """
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


@checked_by(checks.softmax_backward)
def softmax_backward(dP, P):  # [..., n], [..., n] -> [..., n]
    """Gradient of P = softmax(S) along the last axis. Saved: P itself (not S).

    ∂P_j/∂S_k = P_j (δ_jk − P_k), so
        dS = P ∘ (dP − rowsum(dP ∘ P))
    A masked entry has P = 0 and gets dS = 0; a fully masked row (all P = 0, as `softmax`
    returns it) gets 0 throughout: the mask is inside P, no NaN can appear.

    >>> import numpy as np
    >>> softmax_backward(np.array([1.0, 0.0, 5.0]), np.array([0.5, 0.5, 0.0])).tolist()
    [0.25, -0.25, 0.0]
    """
    xp = get_xp(dP, P)
    return P * (dP - xp.sum(dP * P, axis=-1, keepdims=True))  # [..., n]


@checked_by(checks.repeat_kv)
def repeat_kv(x, n_rep: int):  # [b, h_kv, n, d_h] -> [b, h_kv·n_rep, n, d_h]
    """Repeat each key/value head n_rep times so h_kv heads serve h = h_kv·n_rep queries."""
    if n_rep == 1:
        return x
    xp = get_xp(x)
    return xp.repeat(x, n_rep, axis=1)  # head j becomes heads j·n_rep … j·n_rep + n_rep-1


@checked_by(checks.repeat_kv_backward)
def repeat_kv_backward(dX, n_rep: int):  # [b, h_kv·n_rep, n, d_h] -> [b, h_kv, n, d_h]
    """Gradient of repeat_kv: key/value head j served query heads j·n_rep … j·n_rep + n_rep − 1,
    so it receives the sum of their gradients, dK_j = Σ_{i in group j} dK_rep_i. Saved: nothing."""
    if n_rep == 1:
        return dX
    xp = get_xp(dX)
    b, h, n, d_h = dX.shape
    return xp.sum(xp.reshape(dX, (b, h // n_rep, n_rep, n, d_h)), axis=2)  # [b, h_kv, n, d_h]


@checked_by(checks.attention_scores)
def attention_scores(q, k, scale=None):  # [b, h, n_q, d_h], [b, h, n_k, d_h] -> [b, h, n_q, n_k]
    """S = Q Kᵀ · scale, with scale = 1/√d_h unless given."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    return (q @ k.mT) * scale  # [b, h, n_q, n_k]


@checked_by(checks.scaled_dot_product_attention)
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


@checked_by(checks.scaled_dot_product_attention_backward)
def scaled_dot_product_attention_backward(dO, q, k, v, P, *, scale=None):
    # [b, h, n_q, d_h], q, k/v [b, h_kv, n_k, d_h], P [b, h, n_q, n_k] -> dq, dk, dv
    """Gradients of O = P V, P = softmax(S), S = Q Kᵀ·scale (+ mask). Saved: q, k, v (after RoPE)
    and the weights P, whose zeros already hold the mask (return_weights=True gives them).

        dV = Pᵀ dO                      [n_k, n_q] @ [n_q, d_h]
        dP = dO Vᵀ                      [n_q, d_h] @ [d_h, n_k]
        dS = P ∘ (dP − rowsum(dP ∘ P))  softmax_backward
        dQ = dS K · scale,   dK = dSᵀ Q · scale
    GQA: K and V are repeated to h heads before the products, so dK and dV are summed back
    over each group of h / h_kv query heads (repeat_kv_backward) and have h_kv heads.
    P is the n_q × n_k matrix per head; the tiled backward (`flash_attention_backward`)
    rebuilds it tile by tile from the row log-sum-exp instead of keeping it.
    """
    n_rep = q.shape[1] // k.shape[1]
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    K, V = repeat_kv(k, n_rep), repeat_kv(v, n_rep)  # [b, h, n_k, d_h]
    dV = P.mT @ dO  # [b, h, n_k, d_h]
    dS = softmax_backward(dO @ V.mT, P)  # [b, h, n_q, n_k]
    dq = (dS @ K) * scale  # [b, h, n_q, d_h]
    dK = (dS.mT @ q) * scale  # [b, h, n_k, d_h]
    return dq, repeat_kv_backward(dK, n_rep), repeat_kv_backward(dV, n_rep)


@checked_by(checks.dropout)
def dropout(x, p: float, *, rng=None, mask=None, training: bool = True):  # [...] -> [...], keep [...] or None
    """Inverted dropout: zero each entry with probability p, scale the kept ones by 1/(1 − p).

        keep ~ Bernoulli(1 − p), one draw per entry     (True = kept)
        Y = X ∘ keep / (1 − p)
    so E[Y] = X ∘ (1 − p)/(1 − p) = X: the expectation is unchanged, and at evaluation (no
    dropout) the next layer sees inputs of the scale it was trained on, with nothing to rescale.
    Returns (Y, keep). With training=False or p = 0 it is the identity: (x, None).

    rng: a np.random.Generator or an int seed; the draw is made on the host with NumPy (as
    init_decoder draws the weights) and moved to x's backend. mask: the keep-mask itself
    (boolean, x's shape), instead of a draw: the same mask gives the same Y, and the backward
    (`dropout_backward`) needs it.

    >>> import numpy as np
    >>> dropout(np.array([1.0, 2.0, 3.0, 4.0]), 0.5, mask=np.array([True, False, True, False]))[0].tolist()
    [2.0, 0.0, 6.0, 0.0]
    """
    if not training or p == 0:
        return x, None
    xp = get_xp(x)
    if mask is None:  # the keep-mask, drawn: each entry kept with probability 1 − p
        draw = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        mask = xp.asarray(draw.random(tuple(x.shape)) >= p)  # [...] bool
    return x * mask / (1 - p), mask  # [...]: a Python float keeps x's dtype


@checked_by(checks.dropout_backward)
def dropout_backward(dY, mask, p: float):  # [...], keep [...] or None -> [...]
    """Gradient of Y = X ∘ keep / (1 − p). Saved: the keep-mask only (not X).

    Each output entry depends on its own input alone: ∂Y_i/∂X_j = δ_ij keep_i/(1 − p), so
        dX = dY ∘ keep / (1 − p)
    the same mask and scale as the forward: a dropped entry passes no gradient back. mask None
    (the forward ran in eval mode, or p = 0) is the identity: dX = dY.

    >>> import numpy as np
    >>> dropout_backward(np.array([1.0, 1.0]), np.array([True, False]), 0.5).tolist()
    [2.0, 0.0]
    """
    if mask is None or p == 0:
        return dY
    return dY * mask / (1 - p)  # [...]
