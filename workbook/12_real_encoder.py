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

from transformer import embed, layer_norm  # or yours from 01 and 10
from transformer import BertConfig, BertWeights  # the sizes (cfg.eps, …), and W_E, W_pos, W_type, ln_g, ln_b


def bert_embeddings(ids, w: BertWeights, cfg: BertConfig, token_types=None,
                    positions=None):  # [b, n] -> [b, n, d]
    """BERT's input: three learned embeddings summed, then a LayerNorm (before any layer).

        x = LayerNorm(W_E[ids] + W_pos[positions] + W_type[token_types])      with w.ln_g, w.ln_b, cfg.eps

    ids (b, n) token ids; W_E (v, d) the word embeddings, W_pos (n_max, d) one learned row a position,
    W_type (n_types, d) one row a segment (0: sentence A, 1: sentence B of a pair).
    token_types (b, n): None means every token is type 0 (W_type[0] is still added: it is learned, not zero);
    positions (b, n): None means 0 … n − 1 in every row (packed rows restart them at each sentence).
    ->  (b, n, d), in the weights' dtype. cfg.eps is BERT's 1e-12, not the 1e-5 of other models.
    Example, d = 2: W_E[1] = [1, 3], W_pos[0] = [0, 1], W_type[0] = [1, 1] give [2, 5] before the
    LayerNorm; with γ = [1, 1] and β = [0, 0] a LayerNorm over 2 numbers gives [−1, 1].

    After trying: the package's version is `transformer/models/bert.py`, `bert_embeddings`.
    """
    raise NotImplementedError(
        "bert_embeddings: start with W_E[ids] and print its shape (b, n, d); add the positions' rows, then the "
        "types' rows, and normalise last.")


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
