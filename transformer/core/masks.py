"""Attention masks as boolean "may attend" arrays (notes 000 §2.4, 002).

Every builder returns True where query i may attend to key j. Combine masks
with `&` (both allow) and `|` (either allows). Shapes are (n_q, n_k) unless
noted, which broadcast against scores of shape (b, h, n_q, n_k).
Each public function checks its input at the door (`masks_checks.py`, same name); `f.unchecked`
is the bare formula.
"""
from __future__ import annotations

from . import masks_checks as checks
from ..backend import get_xp, namespace, to_numpy
from ..require import checked_by

__all__ = [
    "causal_mask", "bidirectional_mask", "padding_mask", "sliding_window_mask",
    "strided_mask", "fixed_mask", "global_mask", "random_mask", "same_document", "document_mask", "attended_pairs",
]


def _query_key_positions(n_q, n_k, offset, xp):  # -> [n_q, 1], [1, n_k]
    """Absolute positions: query i sits at offset + i, key j at j (checked by the caller's door)."""
    n_k = n_q if n_k is None else n_k
    offset = n_k - n_q if offset is None else offset  # queries are the last n_q positions (cached decoding)
    i = xp.arange(n_q)[:, None] + offset  # [n_q, 1]
    j = xp.arange(n_k)[None, :]  # [1, n_k]
    return i, j


@checked_by(checks.causal_mask)
def causal_mask(n_q: int, n_k: int | None = None, offset: int | None = None, *, xp=None):  # -> [n_q, n_k]
    """Query at position i sees keys j ≤ i (decoder self-attention).

    With a KV cache the n_q new queries come after n_k - n_q cached tokens, so by
    default offset = n_k - n_q: the single decode row (n_q = 1) sees every key.
    """
    xp = namespace(xp)
    i, j = _query_key_positions(n_q, n_k, offset, xp)
    return j <= i  # [n_q, n_k]


@checked_by(checks.bidirectional_mask)
def bidirectional_mask(n_q: int, n_k: int | None = None, *, xp=None):  # -> [n_q, n_k]
    """Every query sees every key (encoder self-attention, BERT)."""
    n_k = n_q if n_k is None else n_k
    xp = namespace(xp)
    return xp.ones((n_q, n_k), dtype=xp.bool)


@checked_by(checks.padding_mask)
def padding_mask(lengths, n: int | None = None, *, xp=None):  # [b] -> [b, 1, 1, n]
    """Key j of sequence b is real iff j < lengths[b]; padded keys are hidden.

    Returned as (b, 1, 1, n) so it broadcasts over heads and queries.
    """
    xp = namespace(xp) if not hasattr(lengths, "shape") else get_xp(lengths)
    lengths = xp.asarray(lengths)  # [b]
    n = int(xp.max(lengths)) if n is None else n  # padded to the longest
    j = xp.arange(n)[None, :]  # [1, n]
    keep = j < lengths[:, None]  # [b, n]
    return keep[:, None, None, :]  # [b, 1, 1, n]


@checked_by(checks.sliding_window_mask)
def sliding_window_mask(n_q: int, w: int, n_k: int | None = None, offset: int | None = None,
                        *, causal: bool = True, xp=None):  # -> [n_q, n_k]
    """Local attention: each query sees the w most recent keys (itself included).

    causal=True: i - w < j ≤ i (Mistral-style). causal=False: |i - j| < w (a band).
    With w ≥ n the causal window is the plain causal mask.
    """
    xp = namespace(xp)
    i, j = _query_key_positions(n_q, n_k, offset, xp)
    if causal:
        return (j <= i) & (j > i - w)  # [n_q, n_k]
    return xp.abs(i - j) < w  # [n_q, n_k]


@checked_by(checks.strided_mask)
def strided_mask(n: int, stride: int, *, xp=None):  # -> [n, n]
    """Sparse Transformer, strided pattern (causal): attend to the last `stride` tokens
    (local) and to every key whose distance is a multiple of `stride` (a column every l)."""
    xp = namespace(xp)
    i, j = _query_key_positions(n, n, 0, xp)
    local = (j <= i) & (i - j < stride)  # [n, n]
    strided = (j <= i) & ((i - j) % stride == 0)  # [n, n]
    return local | strided  # [n, n]


@checked_by(checks.fixed_mask)
def fixed_mask(n: int, block: int, c: int = 1, *, xp=None):  # -> [n, n]
    """Sparse Transformer, fixed pattern (causal): attend within your own block of size
    `block`, and to the last `c` positions of every earlier block ("summary" cells)."""
    xp = namespace(xp)
    i, j = _query_key_positions(n, n, 0, xp)
    same_block = (i // block) == (j // block)  # [n, n]
    summary = (j % block) >= block - c  # [1, n]
    return (j <= i) & (same_block | summary)  # [n, n]


def _as_positions(values) -> list[int]:  # [k] or a sequence -> k Python ints
    if hasattr(values, "dtype"):
        return [int(v) for v in to_numpy(values).tolist()]
    return [int(v) for v in values]


@checked_by(checks.global_mask)
def global_mask(n: int, global_tokens, *, xp=None):  # -> [n, n]
    """Global tokens (Longformer/BigBird): the listed positions see all keys and are seen by all."""
    xp = namespace(xp)
    idx = _as_positions(global_tokens)
    g = xp.zeros((n,), dtype=xp.bool)  # [n]
    if idx:
        g = xp.arange(n)[:, None] == xp.asarray(idx)[None, :]  # [n, len(idx)]
        g = xp.any(g, axis=1)  # [n]
    return g[:, None] | g[None, :]  # [n, n]


@checked_by(checks.random_mask)
def random_mask(n: int, k: int, *, seed: int = 0, causal: bool = False, xp=None):  # -> [n, n]
    """BigBird-style random attention: each query sees k keys chosen at random (seeded).

    With causal=True the k keys are drawn among j ≤ i (fewer if i + 1 < k).
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    m = np.zeros((n, n), dtype=bool)  # [n, n]
    for i in range(n):
        pool = i + 1 if causal else n
        m[i, rng.choice(pool, size=min(k, pool), replace=False)] = True
    xp = namespace(xp)
    return xp.asarray(m)  # the draw is made on the host, then moved to xp's device


@checked_by(checks.same_document)
def same_document(doc_q, doc_k):  # [b, n_q], [b, n_k] -> [b, n_q, n_k]
    """True where query i and key j hold the same document and the key is not padding (doc ≥ 0)."""
    return (doc_q[:, :, None] == doc_k[:, None, :]) & (doc_k[:, None, :] >= 0)  # [b, n_q, n_k]


@checked_by(checks.document_mask)
def document_mask(doc, *, causal: bool = True):  # [b, n] -> [b, 1, n, n]
    """Packed sequences (`packing.pack_documents`): query i sees key j only if both hold the
    same document, doc[i] = doc[j] ≥ 0, and, when causal, j ≤ i. doc = -1 marks padding,
    whose keys nobody sees (a padding query's row is all False: its output is zeros).

    A block-diagonal mask: one causal (or full) block per document, zeros between them.
    """
    xp = get_xp(doc)
    same = same_document(doc, doc)  # [b, n, n], doc checked at the door
    if causal:
        n = doc.shape[1]
        same = same & causal_mask(n, xp=xp)[None, :, :]  # [b, n, n]
    return same[:, None, :, :]  # [b, 1, n, n], broadcasts over heads


@checked_by(checks.attended_pairs)
def attended_pairs(mask) -> int:
    """How many (query, key) pairs a mask lets through: the cost of attention under it."""
    xp = get_xp(mask)
    return int(xp.sum(xp.astype(mask, xp.int64)))
