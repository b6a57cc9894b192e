"""Decoding strategies: from next-token logits to one chosen id (note 002 §3).

    greedy:       argmax(logits)                                   (temperature = 0)
    temperature:  p = softmax(logits / T)          T < 1 sharpens, T > 1 flattens
    top-k:        keep the k largest logits, drop the rest
    top-p:        keep the smallest set of most likely tokens whose mass reaches p (nucleus)

Filters are applied in that order (temperature, top-k, top-p), as HF transformers does.
Sampling runs on the host in NumPy: the step's logits are one (b, v) array, and the random
draw is made with a seeded `numpy.random.Generator` so a seed gives the same text on any backend.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from .attention import _softmax
from .backend import require_int, to_numpy

__all__ = ["check_sampling", "filter_logits", "next_token_probs", "sample_next", "greedy"]


def _is_real(x) -> bool:  # Python and NumPy numbers alike; a bool is not a setting
    return isinstance(x, numbers.Real) and not isinstance(x, (bool, np.bool_))


def check_sampling(temperature=0.0, top_k=None, top_p=None):
    """Refuse settings that mean nothing, naming the bad value."""
    if not _is_real(temperature) or not math.isfinite(temperature) or temperature < 0:
        raise ValueError(f"temperature must be a finite number ≥ 0 (0 = greedy), got temperature={temperature!r}")
    if top_k is not None:
        require_int(top_k=top_k, low=1)
    if top_p is not None and (not _is_real(top_p) or not 0.0 < top_p <= 1.0):
        raise ValueError(f"top_p must lie in (0, 1] or be None, got top_p={top_p!r}")


def _check_logits(logits):  # [..., v] -> [..., v] NumPy
    """Floating-point logits with a possible token in every row: NaN or +inf has no softmax.

    float16 and bfloat16 logits are widened to float32 here, on the host: NumPy's bfloat16
    (ml_dtypes) is no np.floating, and the filters' arithmetic wants a full-size float.
    """
    x = np.asarray(to_numpy(logits))
    if x.dtype.itemsize < 4 and (x.dtype.kind == "f" or x.dtype.name == "bfloat16"):
        x = x.astype(np.float32)  # exact: float32 holds every float16 and bfloat16 value
    if not np.issubdtype(x.dtype, np.floating):
        raise TypeError(f"logits must be floating point, got dtype {x.dtype}")
    if x.ndim == 0 or x.shape[-1] == 0:
        raise ValueError(f"logits must have a vocabulary axis of size ≥ 1, got shape {x.shape}")
    # one pass: a finite row max means no NaN (max propagates it), no +inf, and not all -inf
    if not np.isfinite(x.max(axis=-1)).all():
        if np.isnan(x).any():
            raise ValueError("logits contain NaN")
        if np.isposinf(x).any():
            raise ValueError("logits contain +inf")
        raise ValueError("a row of logits is all -inf: no token is possible")
    return x


def _scale(x, temperature):  # [..., v] -> [..., v], same dtype
    """x / T. If that would overflow x's dtype (T tiny, logits huge), each row is first shifted
    so its maximum is 0, in float64: softmax, top-k and top-p ignore a constant shift, and as
    T → 0 every token but the maxima then falls to -inf (the greedy limit)."""
    t = float(temperature)
    tiny, big = float(np.finfo(x.dtype).tiny), float(np.finfo(x.dtype).max)
    if t >= 1.0:  # |x / T| ≤ |x|: nothing can overflow, no need to look at the logits
        fits = t <= big
    else:  # each row's maximum must stay finite. A smaller logit that overflows to -inf then sat
        # ≥ one float step, 2⁻²⁴·big ≈ 2e31 (float32), under it once scaled: its probability was 0 already
        with np.errstate(over="ignore"):
            fits = tiny <= t and bool(np.isfinite(x.max(axis=-1) / x.dtype.type(t)).all())
    if fits:
        return x / x.dtype.type(t)  # [..., v], the plain division, stays float32
    with np.errstate(over="ignore"):  # scores beyond the dtype's range become -inf: probability 0
        z = (x.astype(np.float64) - x.max(axis=-1, keepdims=True)) / t  # [..., v], ≤ 0
        return z.astype(x.dtype)  # [..., v]


def greedy(logits):  # [..., v] -> [...] int
    """The most likely token: what temperature 0 means."""
    return np.argmax(to_numpy(logits), axis=-1)


def filter_logits(logits, temperature: float = 1.0, top_k=None, top_p=None):  # [..., v] -> [..., v]
    """Scale by 1/T, then set to -inf every logit outside the top-k and outside the top-p nucleus.

    Ties at the k-th value are all kept (as HF does). The most likely token always survives.
    Temperature 0 is greedy: only the argmax survives (the first one on a tie, as in argmax).

    >>> p = np.array([0.5, 0.3, 0.15, 0.05], dtype=np.float32)  # 0.5 + 0.3 reaches 0.75: keep two
    >>> np.isfinite(filter_logits(np.log(p), top_p=0.75)).tolist()
    [True, True, False, False]
    """
    check_sampling(temperature, top_k, top_p)
    return _filter(_check_logits(logits), temperature, top_k, top_p)


def _filter(x, temperature, top_k, top_p):  # filter_logits on checked NumPy logits: [..., v] -> [..., v]
    if temperature == 0:  # greedy: every token but the argmax gets -inf
        argmax = np.argmax(x, axis=-1)[..., None]  # [..., 1]
        return np.where(np.arange(x.shape[-1]) == argmax, x, -np.inf).astype(x.dtype)
    x = _scale(x, temperature)  # [..., v]
    if top_k is not None and top_k < x.shape[-1]:
        kth = np.partition(x, -top_k, axis=-1)[..., -top_k:].min(axis=-1, keepdims=True)  # [..., 1]
        x = np.where(x >= kth, x, -np.inf)
    if top_p is not None and top_p < 1.0:
        order = np.argsort(-x, axis=-1, kind="stable")  # [..., v], most likely first
        p_sorted = np.take_along_axis(_softmax(x), order, axis=-1)  # [..., v]
        mass_before = np.cumsum(p_sorted, axis=-1) - p_sorted  # mass of the strictly more likely tokens
        keep_sorted = mass_before < top_p  # the first token has mass_before = 0: always kept
        keep = np.empty_like(keep_sorted)
        np.put_along_axis(keep, order, keep_sorted, axis=-1)  # back to vocabulary order
        x = np.where(keep, x, -np.inf)
    return x


def next_token_probs(logits, temperature: float = 1.0, top_k=None, top_p=None):  # [..., v] -> [..., v]
    """The distribution a sampler draws from: softmax of the filtered logits.

    Temperature 0 (greedy) gives the one-hot of the argmax, what sample_next then picks.

    >>> next_token_probs(np.array([1.0, 3.0, 2.0]), temperature=0).tolist()
    [0.0, 1.0, 0.0]
    """
    return _softmax(filter_logits(logits, temperature, top_k, top_p), axis=-1)


def sample_next(logits, temperature: float = 0.0, top_k=None, top_p=None, rng=None):  # [..., v] -> [...] int
    """One token id per row: argmax when temperature is 0, else a draw from next_token_probs.

    rng: a numpy.random.Generator (or a seed); the draw is inverse-CDF: the first token
    whose cumulative probability exceeds u ~ U[0, 1).
    """
    check_sampling(temperature, top_k, top_p)
    x = _check_logits(logits)  # [..., v]
    if temperature == 0:
        return np.argmax(x, axis=-1)
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    p = _softmax(_filter(x, temperature, top_k, top_p), axis=-1)  # [..., v], next_token_probs on checked input
    c = np.cumsum(p, axis=-1)  # [..., v], non-decreasing up to 1
    u = rng.random(size=(*c.shape[:-1], 1), dtype=np.float32) * c[..., -1:]  # [..., 1]
    idx = np.sum(c <= u, axis=-1)  # tokens with zero probability add empty intervals: never chosen
    last_kept = c.shape[-1] - 1 - np.argmax((p > 0)[..., ::-1], axis=-1)  # guards u rounding up to 1
    return np.minimum(idx, last_kept)
