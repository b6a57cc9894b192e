"""Attention masks as boolean "may attend" arrays (notes 000 §2.4, 002).

Every builder returns True where query i may attend to key j. Combine masks
with `&` (both allow) and `|` (either allows). Shapes are (n_q, n_k) unless
noted, which broadcast against scores of shape (b, h, n_q, n_k).
"""
from __future__ import annotations

import numbers

from ..backend import get_xp, namespace, to_numpy
from ..require import require_array, require_int

__all__ = [
    "causal_mask", "bidirectional_mask", "padding_mask", "sliding_window_mask",
    "strided_mask", "fixed_mask", "global_mask", "random_mask", "same_document", "document_mask", "attended_pairs",
]


def _query_key_positions(n_q, n_k, offset, xp):  # -> [n_q, 1], [1, n_k]
    """Absolute positions: query i sits at offset + i, key j at j."""
    require_int(n_q=n_q)
    if n_k is None:
        n_k = n_q
    require_int(n_k=n_k)
    if offset is None:
        offset = n_k - n_q  # queries are the last n_q positions (cached decoding)
    require_int(offset=offset, low=None)
    if offset < 0:
        raise ValueError(f"offset must be ≥ 0 (queries after no key), got offset={offset} with n_q={n_q}, n_k={n_k}")
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
    n_k = n_q if n_k is None else n_k
    require_int(n_q=n_q, n_k=n_k)
    xp = namespace(xp)
    return xp.ones((n_q, n_k), dtype=xp.bool)


def padding_mask(lengths, n: int | None = None, *, xp=None):  # [b] -> [b, 1, 1, n]
    """Key j of sequence b is real iff j < lengths[b]; padded keys are hidden.

    Returned as (b, 1, 1, n) so it broadcasts over heads and queries.
    """
    xp = namespace(xp) if not hasattr(lengths, "shape") else get_xp(lengths)
    lengths = xp.asarray(lengths)
    if lengths.ndim != 1:
        raise ValueError(f"lengths must be 1-D (one per sequence), got shape {tuple(lengths.shape)}")
    if lengths.shape[0] == 0 and n is None:
        raise ValueError("lengths is empty: no sequence to take the padded length n from; give n")
    if lengths.shape[0] and not xp.isdtype(lengths.dtype, "integral"):
        raise TypeError(f"lengths must be integer token counts, got dtype {lengths.dtype}")
    if n is not None:
        require_int(n=n)
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
    require_int(w=w, low=1)
    xp = namespace(xp)
    i, j = _query_key_positions(n_q, n_k, offset, xp)
    if causal:
        return (j <= i) & (j > i - w)  # [n_q, n_k]
    return xp.abs(i - j) < w  # [n_q, n_k]


def strided_mask(n: int, stride: int, *, xp=None):  # -> [n, n]
    """Sparse Transformer, strided pattern (causal): attend to the last `stride` tokens
    (local) and to every key whose distance is a multiple of `stride` (a column every l)."""
    require_int(stride=stride, low=1)
    xp = namespace(xp)
    i, j = _query_key_positions(n, n, 0, xp)
    local = (j <= i) & (i - j < stride)
    strided = (j <= i) & ((i - j) % stride == 0)
    return local | strided  # [n, n]


def fixed_mask(n: int, block: int, c: int = 1, *, xp=None):  # -> [n, n]
    """Sparse Transformer, fixed pattern (causal): attend within your own block of size
    `block`, and to the last `c` positions of every earlier block ("summary" cells)."""
    require_int(block=block, c=c, low=1)
    if c > block:
        raise ValueError(f"c must be ≤ block={block} (summary cells of a block), got c={c}")
    xp = namespace(xp)
    i, j = _query_key_positions(n, n, 0, xp)
    same_block = (i // block) == (j // block)
    summary = (j % block) >= block - c
    return (j <= i) & (same_block | summary)  # [n, n]


def global_mask(n: int, global_tokens, *, xp=None):  # -> [n, n]
    """Global tokens (Longformer/BigBird): the listed positions see all keys and are seen by all."""
    require_int(n=n)
    xp = namespace(xp)
    idx = _positions("global_tokens", global_tokens)
    bad = [t for t in idx if not 0 <= t < n]
    if bad:
        raise ValueError(f"global token positions must lie in [0, {n}), got {bad}")
    g = xp.zeros((n,), dtype=xp.bool)
    if idx:
        g = xp.arange(n)[:, None] == xp.asarray(idx)[None, :]  # [n, len(idx)]
        g = xp.any(g, axis=1)  # [n]
    return g[:, None] | g[None, :]  # [n, n]


def _positions(name, values) -> list[int]:
    """A 1-D array or sequence of integer positions, as Python ints (never truncated from floats)."""
    if hasattr(values, "dtype"):
        if values.ndim != 1 or not get_xp(values).isdtype(values.dtype, "integral"):
            raise TypeError(f"{name} must be a 1-D integer array, got dtype {values.dtype}, "
                            f"shape {tuple(values.shape)}")
        return [int(v) for v in to_numpy(values).tolist()]
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise TypeError(f"{name} must be a list of positions, got {type(values).__name__} {values!r}")
    values = list(values)
    bad = [v for v in values if isinstance(v, bool) or not isinstance(v, numbers.Integral)]
    if bad:
        raise TypeError(f"{name} must hold integer positions, got {bad}")
    return [int(v) for v in values]


def random_mask(n: int, k: int, *, seed: int = 0, causal: bool = False, xp=None):  # -> [n, n]
    """BigBird-style random attention: each query sees k keys chosen at random (seeded).

    With causal=True the k keys are drawn among j ≤ i (fewer if i + 1 < k).
    """
    import numpy as np

    require_int(n=n, k=k)
    rng = np.random.default_rng(seed)
    m = np.zeros((n, n), dtype=bool)
    for i in range(n):
        pool = i + 1 if causal else n
        m[i, rng.choice(pool, size=min(k, pool), replace=False)] = True
    xp = namespace(xp)
    return xp.asarray(m)  # the draw is made on the host, then moved to xp's device


def same_document(doc_q, doc_k):  # [b, n_q], [b, n_k] -> [b, n_q, n_k]
    """True where query i and key j hold the same document and the key is not padding (doc ≥ 0)."""
    require_array("doc_q", doc_q)
    require_array("doc_k", doc_k)
    if doc_q.ndim != 2 or doc_k.ndim != 2 or doc_q.shape[0] != doc_k.shape[0]:
        raise ValueError(f"doc_q and doc_k must be (b, n_q) and (b, n_k), got shapes {tuple(doc_q.shape)} "
                         f"and {tuple(doc_k.shape)}")
    return _same_document(doc_q, doc_k)


def _same_document(doc_q, doc_k):  # [b, n_q], [b, n_k] -> [b, n_q, n_k]
    return (doc_q[:, :, None] == doc_k[:, None, :]) & (doc_k[:, None, :] >= 0)  # [b, n_q, n_k]


def document_mask(doc, *, causal: bool = True):  # [b, n] -> [b, 1, n, n]
    """Packed sequences (`packing.pack_documents`): query i sees key j only if both hold the
    same document, doc[i] = doc[j] ≥ 0, and, when causal, j ≤ i. doc = -1 marks padding,
    whose keys nobody sees (a padding query's row is all False: its output is zeros).

    A block-diagonal mask: one causal (or full) block per document, zeros between them.
    """
    require_array("doc", doc)
    xp = get_xp(doc)
    if doc.ndim != 2 or not xp.isdtype(doc.dtype, "integral"):
        raise TypeError(f"doc must be a (b, n) integer array of document indices, got dtype {doc.dtype}, "
                        f"shape {tuple(doc.shape)}")
    same = _same_document(doc, doc)  # [b, n, n], doc checked above
    if causal:
        n = doc.shape[1]
        same = same & causal_mask(n, xp=xp)[None, :, :]  # [b, n, n]
    return same[:, None, :, :]  # [b, 1, n, n], broadcasts over heads


def attended_pairs(mask) -> int:
    """How many (query, key) pairs a mask lets through: the cost of attention under it."""
    require_array("mask", mask)
    xp = get_xp(mask)
    return int(xp.sum(xp.astype(mask, xp.int64)))
