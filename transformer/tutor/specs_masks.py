"""The checker's cases for lesson 05's sparse patterns: the Sparse Transformer's strided_mask and fixed_mask, and the
global tokens of Longformer and BigBird (global_mask); and lesson 06's decoder_mask, the mask of a step after cached
keys."""
from __future__ import annotations

import numpy as np

from ..core.masks import fixed_mask, global_mask, strided_mask
from ..models.llama import decoder_mask
from .cases import Case, Mistake, NotingNamespace, Spec

__all__ = ["STRIDED_MASK", "FIXED_MASK", "GLOBAL_MASK", "DECODER_MASK"]

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


# --- lesson 06: the mask of n_q new queries after n_past cached keys ---------------------------------------------
def _key_valid(b, n_k, pads):  # -> [b, n_k] bool: row r's first pads[r] keys are left padding
    return np.arange(n_k)[None, :] >= np.asarray(pads)[:, None]


def decoder_mask_cases():
    return [Case("prefill: n_q=4 new queries, n_past=0", (4, 0)),
            Case("a chunk after the cache: n_q=3 new queries after n_past=5 cached keys", (3, 5),
                 tags=frozenset({"past"})),
            Case("one decode step: n_q=1 after n_past=6, no padding", (1, 6), tags=frozenset({"none"})),
            Case("the first token alone: n_q=1, n_past=0", (1, 0), tags=frozenset({"none"})),
            Case("prefill with left padding: b=2, n_q=4, row 1 padded by 2", (4, 0, _key_valid(2, 4, [0, 2])),
                 tags=frozenset({"padding"})),
            Case("one decode step with left padding: b=2, n_q=1 after n_past=5, row 0 padded by 3",
                 (1, 5, _key_valid(2, 6, [3, 0])), tags=frozenset({"padding"})),
            Case("a chunk with padding: b=3, n_q=2 after n_past=3", (2, 3, _key_valid(3, 5, [0, 1, 4])),
                 tags=frozenset({"padding", "past"})),
            Case("n_q=3 after n_past=2, xp= a namespace to build it with", (3, 2), {"xp": NotingNamespace()},
                 frozenset({"xp"})),
            Case("key_valid of 4 keys for n_past=3 + n_q=2 = 5", (2, 3, _key_valid(2, 4, [0, 1])),
                 tags=frozenset({"refuse"}), refuses=ValueError, names=(4, 5),
                 refusal="key_valid flags 4 keys, and the step has n_past + n_q = 5")]


def _decoder(causal, combine=lambda c, kv: c[None, None] & kv[:, None, None, :], none_when_one=True):
    """decoder_mask with a slip: causal(n_q, n_past) -> [n_q, n_k]; combine(causal, key_valid) with padding."""
    def mask(n_q, n_past, key_valid=None, *, xp=None):
        if key_valid is None:
            return None if (n_q == 1 and none_when_one) else causal(n_q, n_past)
        return combine(causal(n_q, n_past), np.asarray(key_valid))
    return mask


_OFFSET = lambda n_q, n_past: np.arange(n_past + n_q)[None, :] <= np.arange(n_q)[:, None] + n_past  # noqa: E731
_NO_OFFSET = lambda n_q, n_past: np.tril(np.ones((n_q, n_past + n_q), dtype=bool))  # noqa: E731 - query i at i

DECODER_MASK = Spec(
    "decoder_mask", decoder_mask, decoder_mask_cases, "transformer/models/llama.py", dims=("…", "n_q", "n_k"),
    mistakes=[Mistake("the new queries come after the n_past cached keys: query i is at position n_past + i and "
                      "sees keys 0 … n_past + i — causal_mask(n_q, n_past + n_q) puts the diagonal there",
                      variant=_decoder(_NO_OFFSET)),
              Mistake("the keys are the n_past cached ones AND the n_q new ones: n_k = n_past + n_q",
                      variant=_decoder(lambda n_q, n_past: np.tril(np.ones((n_q, n_q), dtype=bool)))),
              Mistake("one step without padding needs no mask: every cached key is in the past, so return None "
                      "(the attention then skips masking)", variant=_decoder(_OFFSET, none_when_one=False)),
              Mistake("with padding even one decode step needs the mask: the padded keys must stay hidden",
                      variant=lambda n_q, n_past, key_valid=None, *, xp=None: None if n_q == 1 else _decoder(_OFFSET)(
                          n_q, n_past, key_valid)),
              Mistake("a key is kept when it is in the past AND not padding: causal & key_valid (| keeps padded keys)",
                      variant=_decoder(_OFFSET, lambda c, kv: c[None, None] | kv[:, None, None, :])),
              Mistake("key_valid marks KEYS: it goes on the last axis, key_valid[:, None, None, :], so a padded key "
                      "is hidden from every query", variant=_decoder(_OFFSET, lambda c, kv: c[None, None] & kv[
                          :, None, -c.shape[0]:, None])),
              Mistake("the mask with padding is (b, 1, n_q, n_k): one per sequence, and a head axis of 1 so that it "
                      "broadcasts over the heads", variant=_decoder(_OFFSET, lambda c, kv: c[None] & kv[:, None, :])),
              Mistake("the new queries come after the n_past cached keys: n_k = n_past + n_q and query i at "
                      "n_past + i (causal_mask(n_q, n_past + n_q))", tag="past"),
              Mistake("with padding: the causal mask AND key_valid on the key axis, shaped (b, 1, n_q, n_k)",
                      tag="padding"),
              Mistake("check that key_valid holds n_past + n_q flags a row, and raise ValueError naming both: "
                      "NumPy's broadcast error names neither", tag="refuse")])
