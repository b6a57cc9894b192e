"""The refusals of `core/masks.py`, one check per public function and of the same name."""
from __future__ import annotations

import numbers

from ..backend import get_xp, namespace, to_numpy
from ..require import require_array, require_bool, require_int
from .shared_checks import fits_in_memory, seed_or_rng


def query_key_positions(n_q, n_k, offset, xp=None):
    """Sizes n_q, n_k ≥ 0 and an offset that puts no query before the first key; an (n_q, n_k) mask that fits."""
    require_int(n_q=n_q)
    if n_k is None:
        n_k = n_q
    require_int(n_k=n_k)
    if offset is None:
        offset = n_k - n_q  # queries are the last n_q positions (cached decoding)
    require_int(offset=offset, low=None)
    if offset < 0:
        raise ValueError(f"offset must be ≥ 0 (queries after no key), got offset={offset} with n_q={n_q}, n_k={n_k}")
    fits_in_memory(f"an (n_q, n_k) = ({n_q}, {n_k}) mask", int(n_q) * int(n_k), xp)


def causal_mask(n_q, n_k, offset, *, xp):
    query_key_positions(n_q, n_k, offset, xp)


def bidirectional_mask(n_q, n_k, *, xp):
    query_key_positions(n_q, n_q if n_k is None else n_k, 0, xp)


def padding_mask(lengths, n, *, xp):
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
    fits_in_memory(f"a (b, n) = ({lengths.shape[0]}, {n}) padding mask", (lengths.shape[0] + 8) * int(n), xp)
    if lengths.shape[0] and (int(xp.min(lengths)) < 0 or int(xp.max(lengths)) > n):
        raise ValueError(f"lengths must lie in [0, {n}], got {lengths.tolist() if hasattr(lengths, 'tolist') else lengths}")


def sliding_window_mask(n_q, w, n_k, offset, *, causal, xp):
    require_int(w=w, low=1)
    require_bool(causal=causal)  # "no" is truthy
    query_key_positions(n_q, n_k, offset, xp)


def strided_mask(n, stride, *, xp):
    require_int(n=n)
    require_int(stride=stride, low=1)
    query_key_positions(n, n, 0, xp)


def fixed_mask(n, block, c, *, xp):
    require_int(n=n)
    require_int(block=block, c=c, low=1)
    if c > block:
        raise ValueError(f"c must be ≤ block={block} (summary cells of a block), got c={c}")
    query_key_positions(n, n, 0, xp)


def positions(name, values):
    """A 1-D array or sequence of integer positions (never floats, which would be truncated)."""
    if hasattr(values, "dtype"):
        if values.ndim != 1 or not get_xp(values).isdtype(values.dtype, "integral"):
            raise TypeError(f"{name} must be a 1-D integer array, got dtype {values.dtype}, "
                            f"shape {tuple(values.shape)}")
        return
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise TypeError(f"{name} must be a list of positions, got {type(values).__name__} {values!r}")
    bad = [v for v in values if isinstance(v, bool) or not isinstance(v, numbers.Integral)]
    if bad:
        raise TypeError(f"{name} must hold integer positions, got {bad}")


def global_mask(n, global_tokens, *, xp):
    require_int(n=n)
    query_key_positions(n, n, 0, xp)
    positions("global_tokens", global_tokens)
    values = to_numpy(global_tokens).tolist() if hasattr(global_tokens, "dtype") else global_tokens
    bad = [int(t) for t in values if not 0 <= t < n]
    if bad:
        raise ValueError(f"global token positions must lie in [0, {n}), got {bad}")


def random_mask(n, k, *, seed, causal, xp):
    require_int(n=n, k=k)
    query_key_positions(n, n, 0)  # drawn on the host
    seed_or_rng("seed", seed, none_ok=False)
    require_bool(causal=causal)


def same_document(doc_q, doc_k):
    require_array("doc_q", doc_q)
    require_array("doc_k", doc_k)
    if doc_q.ndim != 2 or doc_k.ndim != 2 or doc_q.shape[0] != doc_k.shape[0]:
        raise ValueError(f"doc_q and doc_k must be (b, n_q) and (b, n_k), got shapes {tuple(doc_q.shape)} "
                         f"and {tuple(doc_k.shape)}")
    for name, doc in (("doc_q", doc_q), ("doc_k", doc_k)):  # as document_mask: 0.5 is no document
        if not get_xp(doc).isdtype(doc.dtype, "integral"):
            raise TypeError(f"{name} must hold integer document indices, got dtype {doc.dtype}")


def document_mask(doc, *, causal):
    require_array("doc", doc)
    if doc.ndim != 2 or not get_xp(doc).isdtype(doc.dtype, "integral"):
        raise TypeError(f"doc must be a (b, n) integer array of document indices, got dtype {doc.dtype}, "
                        f"shape {tuple(doc.shape)}")
    require_bool(causal=causal)


def attended_pairs(mask):
    require_array("mask", mask)
    if not get_xp(mask).isdtype(mask.dtype, "bool"):  # 0.5 everywhere counted 0 pairs
        raise TypeError(f"mask must be boolean (True = may attend), got dtype {mask.dtype}")
