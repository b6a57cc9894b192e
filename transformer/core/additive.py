"""Additive (Bahdanau) attention: the score that dot-product attention replaced (note 003 §4.2.2).

    e_ij = wᵀ tanh(q_i W_q + k_j W_k)

A one-hidden-layer network scores each (query, key) pair. Lesson 03 compares its spread, time and
memory with the dot product's.
"""
from __future__ import annotations

from . import additive_checks as checks
from .attention import softmax
from ..backend import get_xp
from ..require import checked_by

__all__ = ["additive_scores", "additive_attention", "additive_peak_bytes"]


@checked_by(checks.additive_scores)
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
    xp = get_xp(q, k, W_q, W_k, w)
    q_a = q @ W_q  # [..., n_q, d_a]
    k_a = k @ W_k  # [..., n_k, d_a]
    hidden = xp.tanh(q_a[..., :, None, :] + k_a[..., None, :, :])  # [..., n_q, n_k, d_a], one vector per pair
    return hidden @ w  # [..., n_q, n_k]


@checked_by(checks.additive_attention)
def additive_attention(q, k, v, W_q, W_k, w, mask=None, *, return_weights=False):
    """softmax(e) V with additive scores e (`additive_scores`); q (..., n_q, d_q), k (..., n_k, d_k),
    v (..., n_k, d_v). mask: boolean, broadcastable to (..., n_q, n_k), True = may attend;
    an all-False row gives zeros. Returns out (..., n_q, d_v) (and the weights)."""
    p = softmax(additive_scores(q, k, W_q, W_k, w), axis=-1, mask=mask)  # [..., n_q, n_k], both checked
    out = p @ v  # [..., n_q, d_v]
    return (out, p) if return_weights else out


@checked_by(checks.additive_peak_bytes)
def additive_peak_bytes(n_q: int, n_k: int, d_a: int, itemsize: int = 4) -> int:
    """Extra memory of `additive_scores` at its peak: the (n_q, n_k, d_a) sum and its tanh
    are both alive while tanh runs, 2 · n_q · n_k · d_a · itemsize (per batch·head).
    Dot-product scores (`attention_scores`, (q @ kᵀ) · scale) peak at 2 · n_q · n_k · itemsize: the
    product and its scaled copy, alive together while the scaling runs."""
    return 2 * n_q * n_k * d_a * itemsize
