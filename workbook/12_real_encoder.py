"""Workbook, lesson 12 · A real encoder: MiniLM (`lessons/12_real_encoder.py`).

Fill in the bodies; keep the names and signatures. Check your work from the repository root,
with the virtual environment active:

    python -m transformer check 12

Shapes use the course's dimension names: b sentences, n positions (padded to the longest
sentence), d model width. A sentence embedding is the mean of its tokens' last hidden states,
scaled to unit length, so that the dot product of two embeddings is their cosine.
"""
from __future__ import annotations

import numpy as np


def mean_pool(hidden, lengths):  # [b, n, d], [b] -> [b, d]
    """Mean of the hidden states over each sentence's real tokens: its [PAD] rows do not count.

        e_i = (1 / lengths_i) · Σ_{j < lengths_i} hidden[i, j]

    hidden (b, n, d): the encoder's last hidden states, rows j ≥ lengths[i] padding;
    lengths (b,): the real tokens of each sentence ([CLS] and [SEP] included)  ->  (b, d), in hidden's dtype
    (float32 / int64 is float64 in NumPy: divide by a count of hidden's dtype, or cast back).
    Example: hidden[0] = [[1, 2], [3, 4], [9, 9]] with lengths [2]: e_0 = [2, 3] (the [9, 9] row is [PAD]).

    After trying: the package's version is `transformer/models/bert.py`, `mean_pool`.
    """
    raise NotImplementedError(
        "mean_pool: start with a (b, n) table of booleans that says which positions j are real tokens "
        "(compare np.arange(n) with each length); print it for lengths [5, 2, 3] before using it.")


def l2_normalize(x, eps: float = 1e-12):  # [..., d] -> [..., d]
    """Each vector scaled to unit length, so that a dot product of two of them is a cosine.

        out = x / max(‖x‖₂, eps),       ‖x‖₂ = √(Σ_k x_k²)   over the last axis

    x (b, d), or any (..., d)  ->  the same shape. A zero vector stays zero (eps keeps the division finite).
    Example: x = [3, 4]: ‖x‖₂ = 5, so out = [0.6, 0.8].

    After trying: the package's version is `transformer/models/bert.py`, `l2_normalize`.
    """
    raise NotImplementedError(
        "l2_normalize: start with each row's length, a (..., 1) array (keepdims=True) so it broadcasts "
        "against x; check it on [3, 4] before dividing.")
