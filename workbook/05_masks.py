"""Workbook, lesson 05 · Masks (`lessons/05_masks.py`).

Fill in the bodies; keep the names and signatures. Check your work from the repository root,
with the virtual environment active:

    python -m transformer check 05

A mask is boolean, True = may attend. Shapes use the course's dimension names: b batch,
n positions, n_q queries, n_k keys.
"""
from __future__ import annotations

import numpy as np

from transformer import namespace  # namespace(None) is NumPy; namespace(xp) the module xp names


def causal_mask(n_q: int, n_k: int | None = None, offset: int | None = None, *, xp=None):  # -> [n_q, n_k]
    """Decoder self-attention: the query at position p sees the keys at positions j ≤ p.

        mask[i, j] = (j ≤ i + offset)        query row i sits at position i + offset

    n_k: None means n_k = n_q. offset: None means n_k − n_q, i.e. the n_q queries are the last
    n_q positions (with a KV cache the new queries come after n_k − n_q cached tokens, so the
    single decode row, n_q = 1, sees every key).
    Returns (n_q, n_k) booleans, made with the namespace `xp` (None: NumPy).
    Example: causal_mask(3) = [[T, F, F], [T, T, F], [T, T, T]]; causal_mask(1, 4) = [[T, T, T, T]].

    After trying: the package's version is `transformer/core/masks.py`, `causal_mask`.
    """
    raise NotImplementedError(
        "causal_mask: start with the positions: the query positions as a column (n_q, 1), the key "
        "positions as a row (1, n_k). A comparison of a column with a row broadcasts to (n_q, n_k). "
        "Settle n_k and offset when they are None before anything else.")


def padding_mask(lengths, n: int | None = None, *, xp=None):  # [b] -> [b, 1, 1, n]
    """Hide the padding: key j of sequence s is real iff j < lengths[s].

        mask[s, 0, 0, j] = (j < lengths[s])

    lengths: (b,) the real length of each sequence (a list or an array). n: the padded
    length; None means the longest of lengths.
    Returns (b, 1, 1, n) booleans, so it broadcasts over heads and queries against
    (b, h, n_q, n). Example: padding_mask([2, 3]) = [[[[T, T, F]]], [[[T, T, T]]]].

    After trying: the package's version is `transformer/core/masks.py`, `padding_mask`.
    """
    raise NotImplementedError(
        "padding_mask: start with the (b, n) version: the key positions 0 … n−1 as a row and the lengths "
        "as a column, compared. Then add the two axes of size 1 for heads and queries.")


def sliding_window_mask(n_q: int, w: int, n_k: int | None = None, offset: int | None = None,
                        *, causal: bool = True, xp=None):  # -> [n_q, n_k]
    """Local attention: each query sees only the w nearest keys.

        causal=True:   i − w < j ≤ i      the w most recent keys, itself included (Mistral)
        causal=False:  |i − j| < w         a band around the diagonal

    Here i = row + offset is the query's position and j the key's. n_k and offset as in
    causal_mask (None: n_k = n_q, offset = n_k − n_q). With w ≥ n the causal window is the
    plain causal mask. Returns (n_q, n_k) booleans, made with `xp` (None: NumPy).
    Example: sliding_window_mask(3, 2) = [[T, F, F], [T, T, F], [F, T, T]].

    After trying: the package's version is `transformer/core/masks.py`, `sliding_window_mask`.
    """
    raise NotImplementedError(
        "sliding_window_mask: start from your causal_mask's positions (a column of query positions, a row "
        "of key positions). The causal window is the causal condition AND a second comparison; write "
        "that one out for row 2 of the example first.")


def strided_mask(n: int, stride: int, *, xp=None):  # -> [n, n]
    """The Sparse Transformer's strided pattern (Child et al., 2019), causal: the last `stride`
    tokens, and every stride-th token before them.

        local:    0 ≤ i − j < stride
        strided:  j ≤ i  and  (i − j) mod stride = 0          (distances stride, 2·stride, …)
        mask = local OR strided

    i the query's position, j the key's, both 0 … n−1. Returns (n, n) booleans, made with
    `xp` (None: NumPy). With stride ≈ √n each row holds about 2√n keys, not n.
    Example: strided_mask(5, 2) row 4 = [T, F, T, T, T]: keys 3 and 4 (local), 2 and 0 (strided).

    After trying: the package's version is `transformer/core/masks.py`, `strided_mask`.
    """
    raise NotImplementedError(
        "strided_mask: start from causal_mask's grid of positions, a column i (n, 1) and a row j (1, n); write "
        "each part as one comparison of i − j, and check row 4 of the example.")


def fixed_mask(n: int, block: int, c: int = 1, *, xp=None):  # -> [n, n]
    """The Sparse Transformer's fixed pattern, causal: a query's own block, and the last c cells
    of every block (the "summary" cells, which have read their whole block).

        same block:  i // block = j // block
        summary:     j mod block ≥ block − c
        mask = (same block OR summary) AND j ≤ i

    i the query's position, j the key's, 0 … n−1. Returns (n, n) booleans, made with `xp`
    (None: NumPy). Example: fixed_mask(6, 3) row 4 = [F, F, T, T, T, F]: key 2 is block 0's
    summary cell, 3 and 4 are its own block up to itself.

    After trying: the package's version is `transformer/core/masks.py`, `fixed_mask`.
    """
    raise NotImplementedError(
        "fixed_mask: start from a column of query positions i (n, 1) and a row of key positions j (1, n); "
        "write the three conditions as three boolean arrays and combine them. Check row 4 of the example.")


def global_mask(n: int, global_tokens, *, xp=None):  # -> [n, n]
    """Global tokens (Longformer, BigBird): a few listed positions, such as [CLS] at 0, see every
    key and are seen by every query.

        g[p] = True  iff  p is in global_tokens          a vector of n booleans
        mask[i, j] = g[i] OR g[j]                        the query or the key is global

    global_tokens: a list or an array of positions in [0, n), in any order, maybe repeated.
    Returns (n, n) booleans, made with `xp` (None: NumPy). An ordinary token sees only the global
    ones here (not even itself): BigBird ORs this with a window and random keys. With no global
    token the mask is all False. Example: global_mask(4, [1]) = [[F, T, F, F], [T, T, T, T],
    [F, T, F, F], [F, T, F, F]]: row 1 and column 1, 2n − 1 = 7 pairs.

    After trying: the package's version is `transformer/core/masks.py`, `global_mask`.
    """
    raise NotImplementedError(
        "global_mask: start with g, a vector of n Falses made with xp, set True at the global positions; "
        "then make the (n, n) mask from a column g[:, None] and a row g[None, :]. Check the example.")
