"""The checker's cases for lesson 08's one-pass statistics: online_softmax_stats, held to the running (m, l) after
each block as well as to the final ones — `history` records them, so a two-pass answer (the whole row's max first)
is told from the one-pass loop the lesson teaches."""
from __future__ import annotations

import numpy as np

from ..core.online_softmax import online_softmax_stats
from .cases import Case, Mistake, Spec, fresh

__all__ = ["ONLINE_STATS"]


def online_cases():
    r = np.random.default_rng(81)
    rising = np.sort(r.standard_normal((1, 6)) * 3)  # the max goes up at every step: every step rescales
    masked = r.standard_normal((3, 7)) * 3
    masked[1] = -np.inf  # a masked row: no score at all
    return [Case("x (2, 10), block=1: the recurrence, one entry a step", (r.standard_normal((2, 10)) * 3,),
                 {"block": 1}),
            Case("x (3, 10), block=4: blocks of 4, 4 and 2", (r.standard_normal((3, 10)) * 3,), {"block": 4},
                 frozenset({"ragged"})),
            Case("x (2, 3, 8) (b, h, n), block=3", (r.standard_normal((2, 3, 8)) * 3,), {"block": 3},
                 frozenset({"ragged"})),
            Case("x (1, 6) rising: the max goes up at every step", (rising,), {"block": 1}),
            Case("x (3, 7), block=2, row 1 all −inf (masked): m = −inf and l = 0 there", (masked,), {"block": 2},
                 frozenset({"masked", "ragged"})),
            Case("float16 x (2, 3000) near 0, block=500: l counts to about 3000", ((r.standard_normal((2, 3000)) *
                                                                                  0.01).astype(np.float16),),
                 {"block": 500}, frozenset({"float16"}))]


ONLINE_NAMES = ("m", "l", "m after each step (history, stacked)", "l after each step (history, stacked)")


def run_online(fn, case):
    """m and l, then the (m, l) fn appended to the list given as history after each step, stacked: each entry
    shaped as the rows, x.shape[:-1] ((…, 1) is accepted too); an empty history gives two empty arrays."""
    (x,), kwargs = fresh(case)
    history = []
    out = fn(x, history=history, **kwargs)
    m, l = out if isinstance(out, (tuple, list)) and len(out) == 2 else (out, None)
    rows = x.shape[:-1]

    def stacked(i):
        try:
            entries = [np.asarray(step[i]) for step in history]
            return (np.stack([e.reshape(rows) if e.size == int(np.prod(rows)) else e for e in entries])
                    if entries else np.zeros((0,)))
        except (TypeError, IndexError, ValueError):  # not a list of (m, l) pairs: compared as it is
            return history
    return m, l, stacked(0), stacked(1)


def _online(step, final_only=False, records=True):
    """online_softmax_stats with a slip in step(m, l, x_j) -> (m, l); or the final (m, l) recorded at every step
    (a two-pass answer, or the same arrays changed in place); or nothing recorded."""
    def stats(x, block=1, history=None):
        x = x.astype(np.float32) if x.dtype == np.float16 else x
        m = np.full(x.shape[:-1] + (1,), -np.inf, dtype=x.dtype)
        l = np.zeros(m.shape, dtype=x.dtype)
        steps = []
        for c0 in range(0, x.shape[-1], block):
            m, l = step(m, l, x[..., c0:c0 + block])
            steps.append((m[..., 0].copy(), l[..., 0].copy()))
        if history is not None and records:
            history.extend([(m[..., 0].copy(), l[..., 0].copy())] * len(steps) if final_only else steps)
        return m, l
    return stats


def _exp(a):  # e^a, with e^(−inf − (−inf)) taken as 0: a slip in one place, not NaN everywhere
    return np.exp(np.where(np.isnan(a), -np.inf, a))


def _right(m, l, x_j):
    m_new = np.maximum(m, x_j.max(-1, keepdims=True))
    return m_new, l * _exp(m - m_new) + _exp(x_j - m_new).sum(-1, keepdims=True)


def _no_rescale(m, l, x_j):  # the old sum kept as it was when the max went up
    m_new = np.maximum(m, x_j.max(-1, keepdims=True))
    return m_new, l + _exp(x_j - m_new).sum(-1, keepdims=True)


def _rescale_inverted(m, l, x_j):  # α = e^(m_new − m), 0 while nothing is summed yet (m = −inf)
    m_new = np.maximum(m, x_j.max(-1, keepdims=True))
    alpha = np.where(m == -np.inf, 0.0, _exp(m_new - m))
    return m_new, alpha * l + _exp(x_j - m_new).sum(-1, keepdims=True)


def _two_pass(x, block=1, history=None):
    """The whole row's max first, then the sum relative to it block by block: right m and l at the end, but the
    history's m is the final max from the first step."""
    x = x.astype(np.float32) if x.dtype == np.float16 else x
    m = x.max(-1, keepdims=True)
    l = np.zeros(m.shape, dtype=x.dtype)
    for c0 in range(0, x.shape[-1], block):
        l = l + _exp(x[..., c0:c0 + block] - m).sum(-1, keepdims=True)
        if history is not None:
            history.append((m[..., 0].copy(), l[..., 0].copy()))
    return m, l


def _block_max(m, l, x_j):  # the block's own max replaces the running one
    m_j = x_j.max(-1, keepdims=True)
    return m_j, l * _exp(m - m_j) + _exp(x_j - m_j).sum(-1, keepdims=True)


def _no_max(m, l, x_j):  # l = Σ e^(x_j), not relative to the max
    return np.maximum(m, x_j.max(-1, keepdims=True)), l + np.exp(x_j).sum(-1, keepdims=True)


ONLINE_STATS = Spec(
    "online_softmax_stats", online_softmax_stats, online_cases, "transformer/core/online_softmax.py",
    dims=(("…", "1"), ("…", "1"), None, None), names=ONLINE_NAMES, call=run_online,
    dtype_rule="m and l keep x's dtype, but a float16 row's are float32 (a float16 sum of 1s stops growing at 2048)",
    mistakes=[Mistake("when the max goes up, the sum so far was taken relative to the old max: rescale it by "
                      "α = e^(m − m_new) before adding the block's, l_new = α·l + Σ_j e^(x_j − m_new)",
                      variant=_online(_no_rescale)),
              Mistake("α = e^(m − m_new), old minus new (≤ 1: the old sum shrinks), not e^(m_new − m)",
                      variant=_online(_rescale_inverted)),
              Mistake("m is the max SO FAR, max(m, the block's max): a block whose max is lower does not lower it",
                      variant=_online(_block_max)),
              Mistake("l = Σ_j e^(x_j − m), relative to the max so far: e^(x_j) alone is not the sum the softmax "
                      "divides by e^(x − m), and it overflows for scores of a few hundred", variant=_online(_no_max)),
              *(Mistake("history holds the running (m, l) AFTER EACH BLOCK, the values the loop had then: one pass, "
                        "one block at a time, where the whole row's max is not known until the end — and append new "
                        "arrays (m = np.maximum(…) makes one), not an array changed in place later", variant=variant)
                for variant in (_two_pass, _online(_right, final_only=True))),
              Mistake("when history is a list, append (m, l) to it after each block: that is how the running values "
                      "are seen (history.append((m[..., 0], l[..., 0])))", variant=_online(_right, records=False)),
              Mistake("a masked row (all −inf) keeps m = −inf and l = 0: e^(−inf − (−inf)) is NaN, so take the "
                      "rescale factor as 0 where the max is still −inf", tag="masked"),
              Mistake("a float16 row: compute m and l in float32 (x.astype(np.float32)) — a float16 sum of 1s stops "
                      "growing at 2048, and l must reach about 3000 here", tag="float16"),
              Mistake("the last block is shorter when block does not divide n: slice x[..., c0:c0 + block] (NumPy "
                      "stops at the end)", tag="ragged")])
