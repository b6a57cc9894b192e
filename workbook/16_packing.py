"""Workbook, lesson 16 · Packing short documents into one context (`lessons/16_packing.py`).

Fill in the bodies; keep the names and signatures. Check your work from the repository root,
with the virtual environment active:

    python -m transformer check 16

A mask is boolean, True = may attend. Shapes use the course's dimension names: b packed rows,
n slots a row, n_q queries, n_k keys (both n here). doc[r, i] is the document that slot i of
row r holds (0, 1, 2, … in the row), or −1 for a padding slot.
"""
from __future__ import annotations

import numpy as np


def document_mask(doc, *, causal: bool = True):  # [b, n] -> [b, 1, n, n]
    """The mask of packed rows: a token reads only its own document.

        mask[r, 0, i, j] = (doc[r, i] = doc[r, j]) and doc[r, j] ≥ 0 and (j ≤ i when causal)

    doc (b, n) of ints  ->  (b, 1, n, n) booleans: one causal (or, with causal=False, full) block
    per document on the diagonal, False between documents and on every padding key. The axis of
    size 1 broadcasts over the h heads of the scores (b, h, n, n). A padding query's row is all
    False (its output is zeros).
    Example: doc = [[0, 0, 1]]: row 0 sees key 0; row 1 sees keys 0, 1; row 2 sees key 2 only.

    After trying: the package's version is `transformer/core/masks.py`, `document_mask`.
    """
    raise NotImplementedError(
        "document_mask: start with the (b, n, n) table of 'query i and key j hold the same document' "
        "(compare doc with itself along two new axes) and print it for doc = [[0, 0, 1]].")
