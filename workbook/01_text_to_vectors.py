"""Workbook, lesson 01 · From text to vectors (`lessons/01_text_to_vectors.py`).

Fill in the bodies; keep the names and signatures. Check your work from the repository root,
with the virtual environment active:

    python -m transformer check 01

Shapes use the course's dimension names: b batch, n positions, d model width, v vocabulary.
"""
from __future__ import annotations

import numpy as np


def merge_symbols(symbols: list[str], ranks: dict[tuple[str, str], int]) -> list[str]:
    """Byte-level BPE's merge loop on one word: glue adjacent symbols by the merges learned.

        repeat:  among the adjacent pairs (symbols[i], symbols[i+1]) that are in ranks,
                 take the one of lowest rank (the leftmost among equals) and glue it into one symbol
        until no adjacent pair is in ranks

    symbols (n,): a word as a list of n strings, one a byte at the start (SmolLM2 writes the byte
    of a space as "Ġ"); ranks: {(left, right): rank}, rank 0 the first merge learned.
    ->  the word's pieces, a list of strings, in order; `symbols` itself is left as it was.
    Example: list("abcab") with ranks {(a, b): 0, (ab, c): 1, (c, a): 2} gives ["abc", "ab"]:
    both a·b merge first (rank 0), then ab·c; c·a no longer exists.

    After trying: the package's version is `transformer/tokenizers/bpe.py`, `tokenizers.bpe.merge_symbols`.
    """
    raise NotImplementedError(
        "merge_symbols: start with one merge: list the adjacent pairs with zip(s, s[1:]), keep those in ranks, "
        "and find the one of lowest rank; glue it with a slice. Then loop until no pair is left.")


def wordpiece(word: str, vocab, unk: str = "[UNK]", max_chars: int = 100) -> list[str]:
    """WordPiece (BERT, MiniLM) on one word: greedy longest match first.

        start at 0; take the longest word[start:end] in the vocabulary (written "##" + … when
        start > 0: it continues a word); go on from end; if no piece fits, the word is [unk]

    word: n characters (n,) of one lower-cased word; vocab: the pieces (a set, or a dict of ids).
    ->  the pieces, a list of strings. A word longer than max_chars is [unk] without looking.
    Example: "unaffable" with {"un", "##aff", "##able", "##a"} gives ["un", "##aff", "##able"].

    After trying: the package's version is `transformer/tokenizers/wordpiece.py`, `tokenizers.wordpiece.wordpiece`.
    """
    raise NotImplementedError(
        "wordpiece: start with the first piece only: try word[0:end] for end from len(word) down to 1 and stop "
        "at the first one in vocab. Then loop from where it ended, with '##' in front.")


def embed(ids, W_E):  # [b, n] int, [v, d] -> [b, n, d]
    """Token embedding: each id picks its row of the embedding table.

        X[b, n, :] = W_E[ids[b, n], :]

    ids (b, n) integers in [0, v), W_E (v, d)  ->  X (b, n, d), in W_E's dtype.
    An id outside [0, v) is no token: raise ValueError naming it (NumPy would raise IndexError
    past the end, and read a negative id from the end of the table without a word).
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
