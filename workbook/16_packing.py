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

from transformer import Packed  # Packed(ids, doc, positions, spans): what pack_documents returns


def pack_documents(docs, n_ctx: int, *, pad_id: int = 0, longest_first: bool = False) -> Packed:
    """Place short documents, whole, in rows of n_ctx tokens, by first fit: each document goes to
    the first row that still has room for it, so a row that could not take one stays open for a
    later, shorter one and little is left as padding.

        for each document k (in input order; longest first when longest_first=True):
            row = the first row whose free slots ≥ len(doc_k), or a new row
            it takes the next len(doc_k) slots of that row

    docs: a list of token-id sequences (lists or 1-D arrays), each at most n_ctx long: a longer
    one fits no row, so raise ValueError naming its length and n_ctx.
    ->  Packed(ids, doc, positions, spans), with b rows: ids (b, n) the tokens, pad_id on padding;
    doc (b, n) the number of the document each slot holds (its index in docs), −1 on padding;
    positions (b, n) each token's position in its own document (0, 1, …), 0 on padding; spans a
    tuple of (row, start, length), one per document in input order. Here n = n_ctx.
    Example: lengths 3, 2, 4 in rows of 5: row 0 holds documents 0 and 1, row 1 document 2;
    positions [[0, 1, 2, 0, 1], [0, 1, 2, 3, 0]], doc [[0, 0, 0, 1, 1], [2, 2, 2, 2, −1]].

    After trying: the package's version is `transformer/core/packing.py`, `pack_documents`.
    """
    raise NotImplementedError(
        "pack_documents: start with the placement alone: a list of how many slots each row has used, and for "
        "each document the first row with room (or a new one); record (row, start, length). Then fill the "
        "three (b, n_ctx) arrays from the spans.")


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
