"""Workbook, lesson 01 · From text to vectors (`lessons/01_text_to_vectors.py`).

Fill in the bodies; keep the names and signatures. Check your work from the repository root,
with the virtual environment active:

    python -m transformer check 01

Shapes use the course's dimension names: b batch, n positions, d model width, v vocabulary.
"""
from __future__ import annotations

import numpy as np


def embed(ids, W_E):  # [b, n] int, [v, d] -> [b, n, d]
    """Token embedding: each id picks its row of the embedding table.

        X[b, n, :] = W_E[ids[b, n], :]

    ids (b, n) integers in [0, v), W_E (v, d)  ->  X (b, n, d), in W_E's dtype.
    Example: W_E = [[0, 0], [1, 2], [3, 4]] (v = 3, d = 2) and ids = [[2, 1]]
    give [[[3, 4], [1, 2]]].

    After trying: the package's version is `transformer/core/embedding.py`, `embed`.
    """
    raise NotImplementedError(
        "embed: start with one token: which row of W_E is the vector of id 2? Then look for the NumPy "
        "indexing that does the same for every id of the (b, n) array at once, and print the shape you get.")


def lm_head(x, W_E=None, *, W_out=None):  # [b, n, d] -> [b, n, v]
    """Logits over the vocabulary: one score per token of the vocabulary, at every position.

    Tied weights (W_E given, the embedding table (v, d)):   logits = x W_Eᵀ
    Untied (W_out given, a separate matrix (d, v)):          logits = x W_out

    x (b, n, d)  ->  logits (b, n, v). Exactly one of W_E and W_out is given.
    Tied, the score of token t is the dot product of x with t's own embedding row.

    After trying: the package's version is `transformer/core/embedding.py`, `lm_head`.
    """
    raise NotImplementedError(
        "lm_head: write the shapes first: x is (b, n, d) and the result must be (b, n, v). Which "
        "orientation of W_E, (v, d) or (d, v), makes `x @ ...` come out that way? Then handle W_out.")
