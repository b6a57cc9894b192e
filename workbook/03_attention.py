"""Workbook, lesson 03 · Scaled dot-product attention (`lessons/03_attention.py`).

Fill in the bodies; keep the names and signatures. Check your work from the repository root,
with the virtual environment active:

    python -m transformer check 03

Shapes use the course's dimension names: b batch, h query heads, h_kv key/value heads,
n_q queries, n_k keys, d_h head size.
"""
from __future__ import annotations

import math

import numpy as np


def softmax(x, axis=-1, mask=None):  # [..., n] -> [..., n]
    """Numerically stable softmax along `axis`: subtract the row maximum before exp.

        softmax(x)_j = e^(x_j − m) / Σ_k e^(x_k − m),     m = max_k x_k

    Subtracting m changes nothing (softmax(x + c) = softmax(x) for a constant c per row) but
    keeps every e^(…) ≤ 1, so nothing overflows.
    mask: boolean, broadcastable to x, True = keep. A masked entry gets probability exactly 0;
    a row with nothing kept returns all zeros, not NaN.
    x (..., n)  ->  probabilities (..., n), the shape and float dtype of x; each row sums to 1
    (or to 0 when fully masked). axis: the axis the probabilities sum over.
    float16 input: compute in float32 and round the result once to float16 (float16 overflows
    at e^12, and a float16 sum of many terms loses the small ones).
    Example: softmax([1000.0, 1000.0]) = [0.5, 0.5], where e^1000 alone would overflow to inf.

    After trying: the package's version is `transformer/core/attention.py`, `softmax`.
    """
    raise NotImplementedError(
        "softmax: start with the row maximum, x.max(axis=axis, keepdims=True): keepdims leaves it (..., 1), "
        "so it broadcasts against x. Get the unmasked rows right first, then think about what a masked "
        "entry must contribute, and about a row whose entries are all masked.")


def scaled_dot_product_attention(q, k, v, mask=None, *, scale=None, return_weights=False):
    # [b, h, n_q, d_h], [b, h_kv, n_k, d_h] ×2 -> [b, h, n_q, d_h] (, [b, h, n_q, n_k])
    """Attention(Q, K, V) = softmax(Q Kᵀ · scale + mask) V,   scale = 1/√d_h unless given.

        S = Q Kᵀ · scale        (b, h, n_q, n_k)   how well each query matches each key
        P = softmax(S)          (b, h, n_q, n_k)   each row sums to 1 over the keys it may see
        out = P V               (b, h, n_q, d_h)   each query's weighted mean of the values

    q (b, h, n_q, d_h); k and v (b, h_kv, n_k, d_h).
    mask: boolean, broadcastable to (b, h, n_q, n_k), True = may attend. A query row with
    nothing to attend returns zeros (not NaN): such a query sees nothing.
    GQA: h_kv may divide h; query head i then reads key/value head i // (h / h_kv) (lesson 07
    explains why). With h_kv = h every query head has its own keys and values.
    Returns out (b, h, n_q, d_h) in q's dtype, and also P (b, h, n_q, n_k) if return_weights.
    float16 inputs: compute in float32 and cast the results back to float16, as softmax does.
    Example: q = k = v = the 2 × 2 identity as (1, 1, 2, 2) give out[0, 0] ≈ [[0.67, 0.33], [0.33, 0.67]].

    After trying: the package's version is `transformer/core/attention.py`, `scaled_dot_product_attention`.
    """
    raise NotImplementedError(
        "scaled_dot_product_attention: start with the scores for h_kv = h and no mask: k.swapaxes(-1, -2) "
        "is (b, h, d_h, n_k), so q @ it is (b, h, n_q, n_k). Print that shape, then add the scale, the "
        "softmax over the keys, P @ v; the mask and GQA come last.")


def additive_scores(q, k, W_q, W_k, w):  # [..., n_q, d_q], [..., n_k, d_k] -> [..., n_q, n_k]
    """Additive attention scores (Bahdanau et al.): a one-hidden-layer network scores each pair.

        e_ij = wᵀ tanh(q_i W_q + k_j W_k)        W_q (d_q, d_a), W_k (d_k, d_a), w (d_a,)

    q (..., n_q, d_q), k (..., n_k, d_k), such as (b, h, n_q, d_q): d_q and d_k may differ.
    ->  e (..., n_q, n_k), the scores before the softmax (row i: query i, column j: key j).
    Every pair forms its own d_a-vector: the hidden layer is (..., n_q, n_k, d_a), where a dot
    product needs one matrix product. |e_ij| ≤ ‖w‖₁ however large q and k are (tanh is bounded).
    Example: q = [[0.5]], k = [[0.5], [−0.5]], W_q = W_k = [[1]], w = [2]: e = [[2 tanh 1, 0]]
    = [[1.5232, 0]].

    After trying: the package's version is `transformer/core/additive.py`, `additive_scores`.
    """
    raise NotImplementedError(
        "additive_scores: start with the two projections q @ W_q (…, n_q, d_a) and k @ W_k (…, n_k, d_a); give "
        "them new axes so that their sum is (…, n_q, n_k, d_a), one vector a pair; then tanh, then @ w.")

