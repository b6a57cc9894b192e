"""Workbook, lesson 16 · Packing short documents into one context (`lessons/16_packing.py`).

Fill in the bodies; keep the names and signatures. Check your work from the repository root,
with the virtual environment active:

    python -m transformer check 16

A mask is boolean, True = may attend. Shapes use the course's dimension names: b packed rows,
n slots a row, n_q queries, n_k keys (both n here). doc[r, i] is the document that slot i of
row r holds (0, 1, 2, … in the row), or −1 for a padding slot. Tr and Tc count the query blocks
and the key tiles of a tiled kernel (lesson 09).
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


def key_tiles_read(n: int, block_q: int, block_k: int, *, causal: bool, doc=None):  # -> [b, Tr, Tc] bool
    """Which key tiles a tiled attention kernel reads for each block of queries (self-attention over n
    positions): the tiles its documents' mask and the causal mask leave anything in, and no other.

        query block t: rows t·block_q … t·block_q + block_q − 1;   key tile j: keys j·block_k … j·block_k + block_k − 1
        the block reads tiles j from the one holding `first` up to the one holding key `end` − 1:
          first = the first key of the documents the block's rows hold (0 without doc),
          end   = one past their last key (n without doc), and, causal, no later than the block's last row + 1

    There are Tr = ⌈n / block_q⌉ query blocks and Tc = ⌈n / block_k⌉ key tiles (the last ones may be partly
    filled). doc (b, n), as document_mask takes it (−1: padding), or None for one row of one document.
    Returns (b, Tr, Tc) booleans, b = 1 without doc; a block of padding only reads nothing.
    Example: n = 4, blocks of 2, causal: out[0] = [[T, F], [T, T]];
    with doc = [[0, 0, 1, 1]] as well: out[0] = [[T, F], [F, T]].

    After trying: the package's version is `transformer/flash/cuda_kernels.py`, `cuda_kernels.key_tiles_read`.
    """
    raise NotImplementedError(
        "key_tiles_read: start without doc: for each query block t, work out `first` and `end`, the keys it "
        "may read, and print them for n = 10, block_q = 4, causal; then turn them into key tiles.")
