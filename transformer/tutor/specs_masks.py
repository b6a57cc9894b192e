"""The checker's cases for lesson 05's sparse patterns: the Sparse Transformer's strided_mask and fixed_mask, and the
global tokens of Longformer and BigBird (global_mask)."""
from __future__ import annotations

import numpy as np

from ..core.masks import fixed_mask, global_mask, strided_mask
from .cases import Case, Mistake, NotingNamespace, Spec

__all__ = ["STRIDED_MASK", "FIXED_MASK", "GLOBAL_MASK"]

DIMS = ("n", "n")  # queries, keys: the same n tokens


def _grid(n):  # -> query positions [n, 1], key positions [1, n]
    return np.arange(n)[:, None], np.arange(n)[None, :]


# --- strided: the last ℓ tokens, and every ℓ-th one before ----------------------------------------------------
def strided_cases():
    return [Case("n=8, stride=3", (8, 3)), Case("n=10, stride=4", (10, 4)),
            Case("stride=1: every earlier key (the causal mask)", (5, 1)),
            Case("stride=6 ≥ n=5: the local part alone is the causal mask", (5, 6)),
            Case("n=7, stride=2, xp= a namespace to build it with", (7, 2), {"xp": NotingNamespace()},
                 frozenset({"xp"}))]


def _strided(local, strided):
    """strided_mask with a slip: local(i, j, ℓ) and strided(i, j, ℓ), the two parts, OR-ed."""
    def mask(n, stride, *, xp=None):
        i, j = _grid(n)
        return local(i, j, stride) | strided(i, j, stride)
    return mask


_LOCAL = lambda i, j, s: (j <= i) & (i - j < s)  # noqa: E731 - the last s tokens, the query itself included
_EVERY = lambda i, j, s: (j <= i) & ((i - j) % s == 0)  # noqa: E731 - the keys s, 2s, … before the query

STRIDED_MASK = Spec(
    "strided_mask", strided_mask, strided_cases, "transformer/core/masks.py", dims=DIMS,
    mistakes=[Mistake("the strided part is causal too: the keys at distance stride, 2·stride, … BEFORE the query "
                      "(j ≤ i), never after it", variant=_strided(_LOCAL, lambda i, j, s: (i - j) % s == 0)),
              Mistake("the strided part is by distance, (i − j) mod stride = 0, a diagonal every stride: whole "
                      "columns (j mod stride) are the fixed pattern's summary cells",
                      variant=_strided(_LOCAL, lambda i, j, s: (j <= i) & (j % s == s - 1))),
              Mistake("the strided part is by distance, (i − j) mod stride = 0, a diagonal every stride: whole "
                      "columns (j mod stride) are the fixed pattern's summary cells",
                      variant=_strided(_LOCAL, lambda i, j, s: (j <= i) & (j % s == 0))),
              Mistake("the pattern is the OR of its two parts: a key in the local window or at a multiple of the "
                      "stride (|), not both (&)", variant=lambda n, stride, *, xp=None: _LOCAL(*_grid(n), stride)
                      & _EVERY(*_grid(n), stride)),
              Mistake("the local part is missing: the last `stride` tokens are seen too, i − j < stride",
                      variant=_strided(lambda i, j, s: np.zeros_like(i - j, dtype=bool), _EVERY))])


# --- fixed: your own block, and the last c cells of every block ------------------------------------------------
def fixed_cases():
    return [Case("n=8, block=3, c=1", (8, 3)), Case("n=12, block=4, c=2", (12, 4, 2), tags=frozenset({"c"})),
            Case("n=9, block=3, c=3: every key of every earlier block", (9, 3, 3), tags=frozenset({"c"})),
            Case("block=8 ≥ n=6: one block, the causal mask", (6, 8)),
            Case("n=7, block=2, xp= a namespace to build it with", (7, 2), {"xp": NotingNamespace()},
                 frozenset({"xp"}))]


def _fixed(same, summary, causal=True):
    """fixed_mask with a slip: same(i, j, block), summary(j, block, c), and whether it is causal."""
    def mask(n, block, c=1, *, xp=None):
        i, j = _grid(n)
        m = same(i, j, block) | summary(j, block, c)
        return m & (j <= i) if causal else m
    return mask


_SAME = lambda i, j, b: i // b == j // b  # noqa: E731 - the query's own block
_LAST_C = lambda j, b, c: j % b >= b - c  # noqa: E731 - the last c cells of each block

FIXED_MASK = Spec(
    "fixed_mask", fixed_mask, fixed_cases, "transformer/core/masks.py", dims=DIMS,
    mistakes=[Mistake("the summary cells are the LAST c of each block (j mod block ≥ block − c): they have read "
                      "their whole block", variant=_fixed(_SAME, lambda j, b, c: j % b < c)),
              Mistake("the pattern is causal: a query sees no key after it (AND the whole with j ≤ i), its own "
                      "block's later cells and later summary cells included", variant=_fixed(_SAME, _LAST_C, False)),
              Mistake("own block means the same block index, i // block == j // block: the last `block` tokens are "
                      "a sliding window, not a block", variant=_fixed(lambda i, j, b: i - j < b, _LAST_C)),
              Mistake("the summary cells: use the argument c, the number of summary cells at the end of each block",
                      tag="c"),
              Mistake("the summary part is missing: every earlier block's last c cells are seen too",
                      variant=_fixed(_SAME, lambda j, b, c: np.zeros_like(j, dtype=bool)))])


# --- global tokens: they see every key, and every query sees them -----------------------------------------------
def global_cases():
    return [Case("n=6, global_tokens=[0]", (6, [0])), Case("n=8, global_tokens=[0, 5]", (8, [0, 5])),
            Case("n=7, global_tokens=np.array([4, 1]) (an array, not sorted)", (7, np.array([4, 1]))),
            Case("n=5, global_tokens=[2, 2]: a position listed twice", (5, [2, 2])),
            Case("n=4, global_tokens=[]: no global token, nothing seen", (4, []), tags=frozenset({"empty"})),
            Case("n=6, global_tokens=[3], xp= a namespace to build it with", (6, [3]), {"xp": NotingNamespace()},
                 frozenset({"xp"}))]


def _global(combine):
    """global_mask with a slip: combine(g_row [n, 1], g_col [1, n], n) from g, True at the global positions."""
    def mask(n, global_tokens, *, xp=None):
        g = np.zeros(n, dtype=bool)
        g[np.asarray(global_tokens, dtype=int)] = True
        return combine(g[:, None], g[None, :], n)
    return mask


GLOBAL_MASK = Spec(
    "global_mask", global_mask, global_cases, "transformer/core/masks.py", dims=DIMS,
    mistakes=[Mistake("a global token is also SEEN by every query: its column is all True as well as its row — "
                      "g[:, None] | g[None, :]", variant=_global(lambda row, col, n: np.broadcast_to(row, (n, n)))),
              Mistake("a global token also SEES every key: its row is all True as well as its column — "
                      "g[:, None] | g[None, :]", variant=_global(lambda row, col, n: np.broadcast_to(col, (n, n)))),
              Mistake("OR, not AND: a pair is kept when the query OR the key is global (row | column); & keeps only "
                      "the pairs of two global tokens", variant=_global(lambda row, col, n: row & col)),
              Mistake("this pattern is the global part alone: an ordinary token sees only the global ones, not itself "
                      "(BigBird ORs it with a window, which holds the diagonal)",
                      variant=_global(lambda row, col, n: row | col | np.eye(n, dtype=bool))),
              Mistake("with no global token nothing is seen: an (n, n) mask of False — build it from a boolean vector "
                      "of n Falses, set True at the listed positions", tag="empty")])
