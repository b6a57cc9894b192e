"""Decoding strategies: from next-token logits to one chosen id (note 002 §3).

    greedy:       argmax(logits)                                   (temperature = 0)
    temperature:  p = softmax(logits / T)          T < 1 sharpens, T > 1 flattens
    top-k:        keep the k largest logits, drop the rest
    top-p:        keep the smallest set of most likely tokens whose mass reaches p (nucleus)

Filters are applied in that order (temperature, top-k, top-p), as HF transformers does.
Sampling runs on the host in NumPy: the step's logits are one (b, v) array, and the random
draw is made with a seeded `numpy.random.Generator` so a seed gives the same text on any backend.
Each public function checks its input at the door (`sampling_checks.py`, same name); `f.unchecked` is the
bare formula, which the generation loop calls per token once its request was checked.
"""
from __future__ import annotations

import numpy as np

from . import sampling_checks as checks
from .attention import softmax
from ..backend import to_host
from ..require import checked_by

__all__ = ["check_sampling", "sampling_settings", "filter_logits", "next_token_probs", "sample_next", "greedy"]


def sampling_settings(temperature=0.0, top_k=None, top_p=None):  # -> (float, int | None, float | None)
    """The settings as Python numbers (a NumPy scalar or a 0-d array becomes a float or an int), the form
    the formulas take; `check_sampling` refuses the ones that mean nothing first.

    >>> sampling_settings(np.float32(0.5), np.int64(40), None)
    (0.5, 40, None)
    """
    return float(temperature), None if top_k is None else int(top_k), None if top_p is None else float(top_p)


@checked_by(checks.check_sampling)
def check_sampling(temperature=0.0, top_k=None, top_p=None):  # -> (float, int | None, float | None)
    """Refuse settings that mean nothing, naming the bad value (at the door); return them as Python
    numbers, as `sampling_settings` does.

    >>> check_sampling(np.float32(0.5), np.int64(40), None)
    (0.5, 40, None)
    """
    return sampling_settings(temperature, top_k, top_p)


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


@checked_by(checks.greedy)
def greedy(logits):  # [..., v] -> [...] int
    """The most likely token: what temperature 0 means (the first one on a tie, as argmax).
    The logits are checked as sample_next checks them: greedy(x) == sample_next(x, temperature=0).

    >>> greedy(np.array([[0.1, 3.0, -1.0], [5.0, 5.0, 0.0]])).tolist()
    [1, 0]
    """
    return np.argmax(to_host(logits), axis=-1)  # the first one on a tie


@checked_by(checks.filter_logits)
def filter_logits(logits, temperature: float = 1.0, top_k=None, top_p=None):  # [..., v] -> [..., v]
    """Scale by 1/T, then set to -inf every logit outside the top-k and outside the top-p nucleus.

    Ties at the k-th value are all kept (as HF does). The most likely token always survives.
    Temperature 0 is greedy: only the argmax survives (the first one on a tie, as in argmax).

    >>> p = np.array([0.5, 0.3, 0.15, 0.05], dtype=np.float32)  # 0.5 + 0.3 reaches 0.75: keep two
    >>> np.isfinite(filter_logits(np.log(p), top_p=0.75)).tolist()
    [True, True, False, False]
    """
    x = to_host(logits)  # [..., v] NumPy
    temperature, top_k, top_p = sampling_settings(temperature, top_k, top_p)  # Python numbers (checked at the door)
    if temperature == 0:  # greedy: every token but the argmax gets -inf
        argmax = greedy(x)[..., None]  # [..., 1]
        return np.where(np.arange(x.shape[-1]) == argmax, x, -np.inf).astype(x.dtype)  # [..., v]
    x = _scale(x, temperature)  # [..., v]
    if top_k is not None and top_k < x.shape[-1]:
        kth = np.partition(x, -top_k, axis=-1)[..., -top_k:].min(axis=-1, keepdims=True)  # [..., 1]
        x = np.where(x >= kth, x, -np.inf)  # [..., v]
    if top_p is not None and top_p < 1.0:
        probs = softmax(x)  # [..., v]
        keep = np.zeros(x.shape, dtype=bool)  # [..., v]; tokens past the head of the order stay False
        for row in np.ndindex(x.shape[:-1]):  # one row at a time: generation samples a few rows
            order, mass = _head_of_order(x[row], probs[row], top_p)  # [c] ids, most likely first; Σ p up to each
            mass_before = mass - probs[row][order]  # [c] mass of the strictly more likely tokens
            keep[row][order] = mass_before < top_p  # [c]; in float32: a top_p below 1.4e-45 is 0 there
            keep[row][order[0]] = True  # the most likely token always survives, whatever the rounding
        x = np.where(keep, x, -np.inf)  # [..., v]
    return x


_HEAD_MARGIN = 1e-5  # ≫ the few float32 roundings between a prefix sum and a later token's mass_before


def _head_of_order(x, p, top_p: float, first: int = 256):  # [v], [v] -> [c] token ids, [c] mass, c ≤ v
    """The first c token ids of the full order by falling logit (ties in vocabulary order, a stable
    sort of -x), for a c that is sure to hold every token top-p keeps: sorting those few instead of
    all v (49 152 for SmolLM2) is what makes a top-p step cheap.

    The c-th largest logit b picks the head: every token with x ≥ b (ties included) comes before
    every other in the full order, so the head's order and cumulative sums are the full sort's, bit
    for bit. Once the head's mass reaches top_p (plus a margin for rounding), each later token has
    at least that much before it and is dropped; otherwise the head grows sixteenfold. After top-k the
    other tokens are -inf with probability 0: the finite ones are the whole head. Returns the ids and
    the cumulative mass along them."""
    v = x.shape[-1]
    finite = np.flatnonzero(np.isfinite(x))  # [f] in vocabulary order
    if finite.size <= first:  # after top-k: the kept tokens are the whole head
        order = finite[np.argsort(-x[finite], kind="stable")]  # [f]
        return order, np.cumsum(p[order])
    c = first
    while c < v:
        b = np.partition(x, v - c)[v - c]  # the c-th largest logit (finite: more than c are)
        head = np.flatnonzero(x >= b)  # [c'] c' ≥ c with the ties, in vocabulary order
        order = head[np.argsort(-x[head], kind="stable")]  # [c'] most likely first
        mass = np.cumsum(p[order])  # [c']
        if mass[-1] >= top_p + _HEAD_MARGIN:
            return order, mass
        c *= 16  # a broad distribution: 256, 4096, then the whole row
        # No token outside the head is likelier than its last one, so a head of c tokens holds at
        # most mass[-1] + (c - c')·p_last: a size that bound rules out is not tried.
        while c < v and mass[-1] + (c - order.size) * p[order[-1]] < top_p:
            c *= 16
    order = np.argsort(-x, kind="stable")  # [v]
    return order, np.cumsum(p[order])


@checked_by(checks.next_token_probs)
def next_token_probs(logits, temperature: float = 1.0, top_k=None, top_p=None):  # [..., v] -> [..., v]
    """The distribution a sampler draws from: softmax of the filtered logits.

    Temperature 0 (greedy) gives the one-hot of the argmax, what sample_next then picks.

    >>> next_token_probs(np.array([1.0, 3.0, 2.0]), temperature=0).tolist()
    [0.0, 1.0, 0.0]
    """
    return softmax(filter_logits(logits, temperature, top_k, top_p))  # [..., v]


@checked_by(checks.sample_next)
def sample_next(logits, temperature: float = 0.0, top_k=None, top_p=None, rng=None):  # [..., v] -> [...] int
    """One token id per row: argmax when temperature is 0, else a draw from next_token_probs.

    rng: a numpy.random.Generator (or a seed); the draw is inverse-CDF: the first token
    whose cumulative probability exceeds u ~ U[0, 1).
    """
    x = to_host(logits)  # [..., v] NumPy
    if float(temperature) == 0:
        return greedy(x)  # [...]
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)  # greedy needs none
    p = next_token_probs(x, temperature, top_k, top_p)  # [..., v]
    c = np.cumsum(p, axis=-1)  # [..., v], non-decreasing up to 1
    u = rng.random(size=(*c.shape[:-1], 1), dtype=np.float32) * c[..., -1:]  # [..., 1]
    idx = np.sum(c <= u, axis=-1)  # [...]; tokens with zero probability add empty intervals: never chosen
    last_kept = c.shape[-1] - 1 - np.argmax((p > 0)[..., ::-1], axis=-1)  # [...], guards u rounding up to 1
    return np.minimum(idx, last_kept)
