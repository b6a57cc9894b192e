"""Workbook, lesson 07 · MHA, GQA, MQA: sharing keys and values (`lessons/07_gqa.py`).

Fill in the bodies; keep the names and signatures. Check your work from the repository root,
with the virtual environment active:

    python -m transformer check 07

Shapes use the course's dimension names: b batch, n positions, h query heads, h_kv key/value
heads, d_h head size; n_rep = h / h_kv query heads share each key/value head.
"""
from __future__ import annotations

import numpy as np

from transformer import AttentionWeights  # W_q, W_k, W_v, W_o and the biases b_q, b_k, b_v, b_o (None: no bias)
from transformer import split_heads  # or your own from 04: (b, n, heads·d_h) -> (b, heads, n, d_h)


def repeat_kv(x, n_rep: int):  # [b, h_kv, n, d_h] -> [b, h_kv·n_rep, n, d_h]
    """Repeat each key/value head n_rep times, so h_kv heads serve h = h_kv · n_rep query heads.

        out[:, i] = x[:, i // n_rep]        i = 0 … h − 1

    Key/value head j becomes heads j·n_rep … j·n_rep + n_rep − 1: the n_rep query heads of one
    group sit next to each other. n_rep = 1 (MHA) returns x as it is.
    x (b, h_kv, n, d_h)  ->  (b, h_kv·n_rep, n, d_h), that is (b, h, n, d_h).
    Example: heads [A, B] with n_rep = 2 give [A, A, B, B], not [A, B, A, B].

    After trying: the package's version is `transformer/core/attention.py`, `repeat_kv`.
    """
    raise NotImplementedError(
        "repeat_kv: start from the rule out[:, i] = x[:, i // n_rep]. Make a tiny x with h_kv = 2 whose head j "
        "is filled with the number j, and print the heads you get for n_rep = 3: they must read 0 0 0 1 1 1.")


def qkv_heads(x, w: AttentionWeights, h: int, h_kv: int, context=None):
    # [b, n, d] (, [b, n_k, d_c]) -> [b, h, n, d_h], 2 × [b, h_kv, n_k, d_h]
    """The projections of grouped-query attention: h query heads, but only h_kv key/value heads.

        Q = x W_q + b_q          (b, n, h·d_h)      ->  split into h heads     (b, h, n, d_h)
        K = c W_k + b_k          (b, n_k, h_kv·d_h)  ->  split into h_kv heads  (b, h_kv, n_k, d_h)
        V = c W_v + b_v          likewise
    c = x (self-attention), or the context (cross-attention: the encoder's output, (b, n_k, d_c)).

    w: an AttentionWeights with W_q (d, h·d_h), W_k and W_v (d_c, h_kv·d_h); a bias b_q, b_k or b_v
    is None when the layer has none. K and V keep their h_kv heads: that is what the KV cache stores,
    h / h_kv times less than with h; they are repeated for the query heads only at attention (repeat_kv).
    Example, h = 2, h_kv = 1, d_h = 1: x = [[[1, 2]]], W_q = I, W_k = [[1], [1]], W_v = [[2], [0]] give
    q = [[[[1]], [[2]]]], k = [[[[3]]]], v = [[[[2]]]].

    After trying: the package's version is `transformer/core/heads.py`, `qkv_heads`.
    """
    raise NotImplementedError(
        "qkv_heads: start with the three products and print their shapes: Q's last axis is h·d_h, K's and V's "
        "h_kv·d_h; then cut each into its number of heads.")
