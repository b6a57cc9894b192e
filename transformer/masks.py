"""Attention masks as boolean "may attend" arrays (notes 000 §2.4, 002).

Every builder returns True where query i may attend to key j. Combine masks
with `&` (both allow) and `|` (either allows). Shapes are (n_q, n_k) unless
noted, which broadcast against scores of shape (b, h, n_q, n_k).
"""
from __future__ import annotations

from .backend import get_xp, namespace

__all__ = [
    "causal_mask", "bidirectional_mask", "padding_mask", "sliding_window_mask",
    "strided_mask", "fixed_mask", "global_mask", "random_mask", "same_document", "document_mask", "attended_pairs",
]


def _query_key_positions(n_q, n_k, offset, xp):  # -> [n_q, 1], [1, n_k]
    """Absolute positions: query i sits at offset + i, key j at j."""
    if n_k is None:
        n_k = n_q
    if offset is None:
        offset = n_k - n_q  # queries are the last n_q positions (cached decoding)
    if n_q < 0 or n_k < 0 or offset < 0:
        raise ValueError(f"need n_q, n_k, offset ≥ 0, got n_q={n_q}, n_k={n_k}, offset={offset}")
    i = xp.arange(n_q)[:, None] + offset  # [n_q, 1]
    j = xp.arange(n_k)[None, :]  # [1, n_k]
    return i, j


def causal_mask(n_q: int, n_k: int | None = None, offset: int | None = None, *, xp=None):  # -> [n_q, n_k]
    """Query at position i sees keys j ≤ i (decoder self-attention).

    With a KV cache the n_q new queries come after n_k - n_q cached tokens, so by
    default offset = n_k - n_q: the single decode row (n_q = 1) sees every key.
    """
    xp = namespace(xp)
    i, j = _query_key_positions(n_q, n_k, offset, xp)
    return j <= i  # [n_q, n_k]


def bidirectional_mask(n_q: int, n_k: int | None = None, *, xp=None):  # -> [n_q, n_k]
    """Every query sees every key (encoder self-attention, BERT)."""
    xp = namespace(xp)
    return xp.ones((n_q, n_q if n_k is None else n_k), dtype=xp.bool)


def padding_mask(lengths, n: int | None = None, *, xp=None):  # [b] -> [b, 1, 1, n]
    """Key j of sequence b is real iff j < lengths[b]; padded keys are hidden.

    Returned as (b, 1, 1, n) so it broadcasts over heads and queries.
    """
    xp = namespace(xp) if not hasattr(lengths, "shape") else get_xp(lengths)
    lengths = xp.asarray(lengths)
    if lengths.ndim != 1:
        raise ValueError(f"lengths must be 1-D (one per sequence), got shape {tuple(lengths.shape)}")
    n = int(xp.max(lengths)) if n is None else n
    if lengths.shape[0] and (int(xp.min(lengths)) < 0 or int(xp.max(lengths)) > n):
        raise ValueError(f"lengths must lie in [0, {n}], got {lengths.tolist() if hasattr(lengths, 'tolist') else lengths}")
    j = xp.arange(n)[None, :]  # [1, n]
    keep = j < lengths[:, None]  # [b, n]
    return keep[:, None, None, :]  # [b, 1, 1, n]


def sliding_window_mask(n_q: int, w: int, n_k: int | None = None, offset: int | None = None,
                        *, causal: bool = True, xp=None):  # -> [n_q, n_k]
    """Local attention: each query sees the w most recent keys (itself included).

    causal=True: i - w < j ≤ i (Mistral-style). causal=False: |i - j| < w (a band).
    With w ≥ n the causal window is the plain causal mask.
    """
    if w < 1:
        raise ValueError(f"window width w must be ≥ 1, got w={w}")
    xp = namespace(xp)
    i, j = _query_key_positions(n_q, n_k, offset, xp)
    if causal:
        return (j <= i) & (j > i - w)  # [n_q, n_k]
    return xp.abs(i - j) < w  # [n_q, n_k]


def strided_mask(n: int, stride: int, *, xp=None):  # -> [n, n]
    """Sparse Transformer, strided pattern (causal): attend to the last `stride` tokens
    (local) and to every key whose distance is a multiple of `stride` (a column every l)."""
    if stride < 1:
        raise ValueError(f"stride must be ≥ 1, got stride={stride}")
    xp = namespace(xp)
    i, j = _query_key_positions(n, n, 0, xp)
    local = (j <= i) & (i - j < stride)
    strided = (j <= i) & ((i - j) % stride == 0)
    return local | strided  # [n, n]


def fixed_mask(n: int, block: int, c: int = 1, *, xp=None):  # -> [n, n]
    """Sparse Transformer, fixed pattern (causal): attend within your own block of size
    `block`, and to the last `c` positions of every earlier block ("summary" cells)."""
    if block < 1 or not 1 <= c <= block:
        raise ValueError(f"need block ≥ 1 and 1 ≤ c ≤ block, got block={block}, c={c}")
    xp = namespace(xp)
    i, j = _query_key_positions(n, n, 0, xp)
    same_block = (i // block) == (j // block)
    summary = (j % block) >= block - c
    return (j <= i) & (same_block | summary)  # [n, n]


def global_mask(n: int, global_tokens, *, xp=None):  # -> [n, n]
    """Global tokens (Longformer/BigBird): the listed positions see all keys and are seen by all."""
    xp = namespace(xp)
    idx = [int(t) for t in global_tokens]
    bad = [t for t in idx if not 0 <= t < n]
    if bad:
        raise ValueError(f"global token positions must lie in [0, {n}), got {bad}")
    g = xp.zeros((n,), dtype=xp.bool)
    if idx:
        g = xp.arange(n)[:, None] == xp.asarray(idx)[None, :]  # [n, len(idx)]
        g = xp.any(g, axis=1)  # [n]
    return g[:, None] | g[None, :]  # [n, n]


def random_mask(n: int, k: int, *, seed: int = 0, causal: bool = False, xp=None):  # -> [n, n]
    """BigBird-style random attention: each query sees k keys chosen at random (seeded).

    With causal=True the k keys are drawn among j ≤ i (fewer if i + 1 < k).
    """
    import numpy as np

    if k < 0:
        raise ValueError(f"k must be ≥ 0, got k={k}")
    rng = np.random.default_rng(seed)
    m = np.zeros((n, n), dtype=bool)
    for i in range(n):
        pool = i + 1 if causal else n
        m[i, rng.choice(pool, size=min(k, pool), replace=False)] = True
    xp = namespace(xp)
    return xp.asarray(m)  # the draw is made on the host, then moved to xp's device


def same_document(doc_q, doc_k):  # [b, n_q], [b, n_k] -> [b, n_q, n_k]
    """True where query i and key j hold the same document and the key is not padding (doc ≥ 0)."""
    return (doc_q[:, :, None] == doc_k[:, None, :]) & (doc_k[:, None, :] >= 0)  # [b, n_q, n_k]


def document_mask(doc, *, causal: bool = True):  # [b, n] -> [b, 1, n, n]
    """Packed sequences (`packing.pack_documents`): query i sees key j only if both hold the
    same document, doc[i] = doc[j] ≥ 0, and, when causal, j ≤ i. doc = -1 marks padding,
    whose keys nobody sees (a padding query's row is all False: its output is zeros).

    A block-diagonal mask: one causal (or full) block per document, zeros between them.
    """
    xp = get_xp(doc)
    if doc.ndim != 2 or not xp.isdtype(doc.dtype, "integral"):
        raise TypeError(f"doc must be a (b, n) integer array of document indices, got dtype {doc.dtype}, "
                        f"shape {tuple(doc.shape)}")
    same = same_document(doc, doc)  # [b, n, n]
    if causal:
        n = doc.shape[1]
        same = same & causal_mask(n, xp=xp)[None, :, :]  # [b, n, n]
    return same[:, None, :, :]  # [b, 1, n, n], broadcasts over heads


def attended_pairs(mask) -> int:
    """How many (query, key) pairs a mask lets through: the cost of attention under it."""
    xp = get_xp(mask)
    return int(xp.sum(xp.astype(mask, xp.int64)))
