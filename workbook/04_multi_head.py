"""Workbook, lesson 04 · Many heads (`lessons/04_multi_head.py`).

Fill in the bodies; keep the names and signatures. Check your work from the repository root,
with the virtual environment active:

    python -m transformer check 04

Shapes use the course's dimension names: b batch, n positions (n_k keys when they differ),
d model width, h query heads, h_kv key/value heads, d_h head size (d = h · d_h).
"""
from __future__ import annotations

import numpy as np

from transformer import AttentionWeights  # the weights of one layer: W_q, W_k, W_v, W_o and biases b_q … b_o
from transformer import linear, scaled_dot_product_attention  # or your own from 03; linear(x, W, b) = x W + b


def split_heads(x, h: int):  # [b, n, h·d_h] -> [b, h, n, d_h]
    """Cut the last axis into h heads of d_h = d / h features and move heads before positions.

        (b, n, d)  ->  (b, n, h, d_h)  ->  (b, h, n, d_h)

    Head j holds features j·d_h … (j+1)·d_h − 1 of each position. Only a reshape and a
    transpose: no number changes. When h does not divide d, raise ValueError naming d and h
    (NumPy's own reshape error names neither).

    After trying: the package's version is `transformer/core/heads.py`, `split_heads`.
    """
    raise NotImplementedError(
        "split_heads: start from the shapes: x is (b, n, d), so each head gets d_h = d // h features. Two steps, each one "
        "shape change: write the intermediate shape (b, n, h, d_h) first, then the order of the axes.")


def merge_heads(x):  # [b, h, n, d_h] -> [b, n, h·d_h]
    """The inverse of split_heads: concat(head_1, …, head_h) along the feature axis.

        (b, h, n, d_h)  ->  (b, n, h, d_h)  ->  (b, n, h·d_h)

    merge_heads(split_heads(x, h)) == x.

    After trying: the package's version is `transformer/core/heads.py`, `merge_heads`.
    """
    raise NotImplementedError(
        "merge_heads: undo split_heads' steps in the reverse order: first the axes back to (b, n, h, d_h), "
        "then one reshape. Test it on split_heads' output: you should get the input back.")


def multi_head_attention(x, w: AttentionWeights, h: int, h_kv: int | None = None, *,
                         mask=None, context=None, return_weights: bool = False):
    # [b, n, d] -> [b, n, d] (, [b, h, n, n_k])
    """Multi-head attention (MHA, GQA or MQA), self- or cross-attention.

        c = x (self-attention) or context (cross-attention: keys and values from the encoder)
        Q = x W_q + b_q    (b, n, h·d_h)     split into h heads:    (b, h, n, d_h)
        K = c W_k + b_k    (b, n_k, h_kv·d_h)  split into h_kv heads: (b, h_kv, n_k, d_h)
        V = c W_v + b_v    (b, n_k, h_kv·d_h)  split into h_kv heads: (b, h_kv, n_k, d_h)
        O = attention(Q, K, V, mask)  (b, h, n, d_h), merged to (b, n, h·d_h)
        out = O W_o + b_o  (b, n, d)

    w: W_q (d, h·d_h), W_k and W_v (d_c, h_kv·d_h), W_o (h·d_h, d); each bias may be None.
    h_kv: None means h (plain multi-head attention). context: None, or (b, n_k, d_c).
    mask: boolean, broadcastable to (b, h, n, n_k), True = may attend.
    Returns out (b, n, d), and the weights (b, h, n, n_k) too if return_weights.

    After trying: the package's version is `transformer/core/heads.py`, `multi_head_attention`.
    """
    raise NotImplementedError(
        "multi_head_attention: start with self-attention and h_kv = h: project x three times with linear, "
        "split each into heads with your split_heads, and print the three shapes before attending.")
