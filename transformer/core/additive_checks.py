"""The refusals of `core/additive.py`, one check per public function and of the same name."""
from __future__ import annotations

import numpy as np

from ..require import require_bool, require_float, require_int, stand_in
from .attention_checks import softmax


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


def additive_attention(q, k, v, W_q, W_k, w, mask, *, return_weights):
    require_bool(return_weights=return_weights)  # "no" is truthy
    require_float("k", k)  # before k.shape is read: a list failed with an AttributeError
    require_float("v", v)
    if v.shape[:-1] != k.shape[:-1]:
        raise ValueError(f"k {tuple(k.shape)} and v {tuple(v.shape)} must agree in all but the last dim")
    additive_scores(q, k, W_q, W_k, w)
    if k.shape[-2] == 0:  # else softmax's own message, about its x
        raise ValueError(f"n_k must be ≥ 1 (no keys to attend to), got n_k=0: k has shape {tuple(k.shape)}")
    batch = np.broadcast_shapes(tuple(q.shape[:-2]), tuple(k.shape[:-2]))
    softmax(stand_in(q, (*batch, q.shape[-2], k.shape[-2])), -1, mask)  # the scores e [..., n_q, n_k] and the mask


def additive_peak_bytes(n_q, n_k, d_a, itemsize):
    require_int(n_q=n_q, n_k=n_k, d_a=d_a, itemsize=itemsize)
