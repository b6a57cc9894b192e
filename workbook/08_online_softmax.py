"""Workbook, lesson 08 · Online softmax: one pass, two running numbers (`lessons/08_online_softmax.py`).

Fill in the bodies; keep the names and signatures. Check your work from the repository root,
with the virtual environment active:

    python -m transformer check 08

For a row x: m = max_j x_j and l = Σ_j e^(x_j − m), so softmax(x)_j = e^(x_j − m) / l.
Shapes use the course's dimension names (d_h head size) and FlashAttention's tile sizes:
Br query rows and Bc keys per tile; `...` stands for any leading axes such as (b, h).
"""
from __future__ import annotations

import math

import numpy as np


def merge_softmax_stats(m_a, l_a, m_b, l_b):  # [..., 1] × 4 -> [..., 1], [..., 1]
    """Combine the (max, sum) of two parts a and b of a row into those of the whole row.

        m = max(m_a, m_b)
        l = l_a·e^(m_a − m) + l_b·e^(m_b − m)      each partial sum rescaled to the common max

    m_a, l_a, m_b, l_b (..., 1), e.g. (b, h, n_q, 1): one (max, sum) per query row of each head
    ->  m, l (..., 1).
    A part that has seen nothing yet has m = −inf and l = 0: it must add 0 to l, not NaN
    (e^(−inf − (−inf)) is NaN in floating point).
    Example: two parts with m = 0, l = 1 each merge to m = 0, l = 2.

    After trying: the package's version is `transformer/core/online_softmax.py`, `merge_softmax_stats`.
    """
    raise NotImplementedError(
        "merge_softmax_stats: start with the common max m. Then rescale each partial sum to it; check "
        "your result when both parts still have m = -inf: what does np.exp(-np.inf - -np.inf) give?")


def online_softmax_stats(x, block: int = 1, history: list | None = None):  # [..., n] -> [..., 1], [..., 1]
    """The row max m and the normaliser l = Σ_j e^(x_j − m) in ONE pass over x, `block` entries at a
    time: each step sees only its block, and keeps two running numbers per row.

        start:       m = −inf, l = 0                                  (..., 1) each
        each block:  m_j = max x_j,  l_j = Σ e^(x_j − m_j)            the block's own (max, sum)
                     (m, l) = merge_softmax_stats(m, l, m_j, l_j)    the old sum rescaled if the max went up
    With block = 1 this is the recurrence  m_new = max(m, x_j),  l_new = l·e^(m − m_new) + e^(x_j − m_new).

    x (..., n), e.g. (b, h, n)  ->  m, l (..., 1), in x's dtype — but a float16 row's m and l are
    float32: a float16 sum of 5,000 ones stops growing at 2048. The last block may be shorter.
    A row of all −inf (masked) ends with m = −inf and l = 0.
    history: when it is a list, append (m[..., 0], l[..., 0]) to it after each step (new arrays,
    not ones you change later): the checker reads your running values there.
    Example: x = log [1, 2, 3], block = 1: history m = [0, 0.693, 1.099], l = [1, 1.5, 2], and
    e^m · l = 3 · 2 = 6 = 1 + 2 + 3.

    After trying: the package's version is `transformer/core/online_softmax.py`, `online_softmax_stats`.
    """
    raise NotImplementedError(
        "online_softmax_stats: start with block = 1 and one row: m = -inf, l = 0, then a loop over the entries "
        "that updates both; check the example's history by hand, then take blocks with merge_softmax_stats.")


def online_attention_update(m, l, O, S_j, V_j):
    # [..., Br, 1] ×2, [..., Br, d_h], [..., Br, Bc], [..., Bc, d_h] -> [..., Br, 1] ×2, [..., Br, d_h]
    """Fold one tile of scores S_j and its values V_j into the running (m, l, O) of Br query rows.

        m_new = max(m, rowmax S_j)            (..., Br, 1)
        P̃     = e^(S_j − m_new)              (..., Br, Bc), each ≤ 1
        α     = e^(m − m_new)                 (..., Br, 1): what came before shrinks if the max went up
        l_new = α·l + rowsum P̃               (..., Br, 1)
        O_new = α·O + P̃ V_j                  (..., Br, d_h), not yet divided by l

    m, l (..., Br, 1); O (..., Br, d_h); S_j (..., Br, Bc); V_j (..., Bc, d_h).
    Returns (m_new, l_new, O_new). After the last tile, softmax(S) V = O / l (FlashAttention-2's
    inner step). A row whose max is still −inf (every score so far masked) keeps m = −inf,
    l = 0 and O = 0, not NaN. Start a row with m = −inf, l = 0, O = 0.
    Example: two tiles of one score 0 with values 2 and 4 end with O / l = 3, their mean.

    After trying: the package's version is `transformer/core/online_softmax.py`, `online_attention_update`.
    """
    raise NotImplementedError(
        "online_attention_update: write the five lines of the docstring in order, each with the shape it "
        "must have; rowmax and rowsum are over the last axis with keepdims=True. Then fix the NaN a row "
        "gets while its max is still -inf.")
