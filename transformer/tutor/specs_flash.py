"""The checker's cases for lessons 08 and 09: the online softmax's merge and update, FlashAttention-2's loop."""
from __future__ import annotations

import math

import numpy as np

from ..core.masks import causal_mask
from ..core.online_softmax import exp_minus, merge_softmax_stats, online_attention_update
from ..flash.tiled import flash_attention
from .cases import Case, Mistake, Spec

__all__ = ["MERGE_STATS", "ONLINE_UPDATE", "FLASH"]


def _rng(seed):
    return np.random.default_rng(seed)


# --- merge_softmax_stats ----------------------------------------------------------------------
def merge_cases():
    r = _rng(81)
    m = lambda: r.standard_normal((3, 1)) * 3  # noqa: E731
    l = lambda: r.uniform(1, 4, (3, 1))  # noqa: E731
    return [Case("two parts of 3 rows, (m, l) each (3, 1)", (m(), l(), m(), l())),
            Case("the second part's max is higher in every row", (np.zeros((2, 1)), np.full((2, 1), 2.0),
                                                                  np.full((2, 1), 5.0), np.full((2, 1), 1.5))),
            Case("the first part is empty: m_a = −inf, l_a = 0", (np.full((2, 1), -np.inf), np.zeros((2, 1)),
                                                                 m()[:2], l()[:2]), tags=frozenset({"empty"}))]


def _merge_exponent_flipped(m_a, l_a, m_b, l_b):  # e^(m − m_a) instead of e^(m_a − m)
    m = np.maximum(m_a, m_b)

    def factor(m_part):  # an empty part (m_part = −inf) counts 0, as in the package
        return np.where(np.isneginf(m_part), 0.0, np.exp(m - np.where(np.isneginf(m_part), 0, m_part)))
    return m, l_a * factor(m_a) + l_b * factor(m_b)


STATS_NAMES = ("m", "l")
MERGE_STATS = Spec(
    "merge_softmax_stats", merge_softmax_stats, merge_cases, "transformer/core/online_softmax.py",
    dims=("row", "1"), names=STATS_NAMES,
    mistakes=[Mistake("each partial sum must be rescaled to the common max before adding: "
                      "l = l_a·e^(m_a − m) + l_b·e^(m_b − m)",
                      variant=lambda m_a, l_a, m_b, l_b: (np.maximum(m_a, m_b), l_a + l_b)),
              Mistake("the exponent's sign is flipped: each factor is e^(m_part − m), at most 1, so the part whose "
                      "max is lower shrinks: l = l_a·e^(m_a − m) + l_b·e^(m_b − m)",
                      variant=_merge_exponent_flipped),
              Mistake("an empty part (m = −inf) must count as 0, not NaN: e^(−inf − (−inf)) is NaN, so give the "
                      "factor 0 where m is −inf", tag="empty")])


# --- online_attention_update ------------------------------------------------------------------
def _state(r, lead, Br, d_h, empty=False):  # a running (m, l, O) after some earlier tiles
    if empty:
        return np.full((*lead, Br, 1), -np.inf), np.zeros((*lead, Br, 1)), np.zeros((*lead, Br, d_h))
    return r.standard_normal((*lead, Br, 1)), r.uniform(1, 3, (*lead, Br, 1)), r.standard_normal((*lead, Br, d_h))


def update_cases():
    r = _rng(82)
    S = lambda *s: r.standard_normal(s) * 2  # noqa: E731
    raised = _state(r, (2,), 3, 4)
    S_high = S(2, 3, 5) + 6.0  # every row's max goes up: α < 1 must shrink l and O
    masked = S(1, 2, 4)
    masked[0, 1] = -np.inf  # row 1 of this tile is masked out
    return [
        Case("the first tile: m = −inf, l = 0, O = 0; Br=3, Bc=5, d_h=4", _state(r, (2,), 3, 4, empty=True)
             + (S(2, 3, 5), r.standard_normal((2, 5, 4))), tags=frozenset({"first"})),
        Case("a later tile whose scores raise every row's max (α < 1)", raised + (S_high, r.standard_normal((2, 5, 4))),
             tags=frozenset({"alpha"})),
        Case("a later tile below the max (α = 1 in most rows), b=2, h=2 in front",
             _state(r, (2, 2), 3, 4) + (S(2, 2, 3, 2) - 4, r.standard_normal((2, 2, 2, 4)))),
        Case("the first tile with one row fully masked (−inf scores)", _state(r, (1,), 2, 3, empty=True)
             + (masked, r.standard_normal((1, 4, 3))), tags=frozenset({"first", "masked"})),
    ]


def _no_alpha_on_O(m, l, O, S_j, V_j):
    m_new, l_new, _ = online_attention_update(m, l, O, S_j, V_j)
    return m_new, l_new, O + exp_minus(S_j, m_new) @ V_j


def _no_alpha_on_l(m, l, O, S_j, V_j):
    m_new, _, O_new = online_attention_update(m, l, O, S_j, V_j)
    return m_new, l + exp_minus(S_j, m_new).sum(-1, keepdims=True), O_new


def _max_forgets_old(m, l, O, S_j, V_j):  # m_new = rowmax S_j alone
    m_new = S_j.max(-1, keepdims=True)
    safe = np.where(np.isneginf(m_new), 0, m_new)
    P = np.exp(S_j - safe)
    alpha = np.where(np.isneginf(m), 0, np.exp(m - safe))
    return m_new, alpha * l + P.sum(-1, keepdims=True), alpha * O + P @ V_j


def _normalised(m, l, O, S_j, V_j):
    m_new, l_new, O_new = online_attention_update(m, l, O, S_j, V_j)
    return m_new, l_new, O_new / l_new


ONLINE_UPDATE = Spec(
    "online_attention_update", online_attention_update, update_cases, "transformer/core/online_softmax.py",
    dims=(("…", "Br", "1"), ("…", "Br", "1"), ("…", "Br", "d_h")), names=("m_new", "l_new", "O_new"),
    mistakes=[Mistake("α is not applied to O: when the max goes up, the output so far must shrink by "
                      "α = e^(m − m_new) too: O_new = α·O + P̃ V_j", variant=_no_alpha_on_O),
              Mistake("α is not applied to l: the running sum was taken against the old max, rescale it: "
                      "l_new = α·l + rowsum P̃", variant=_no_alpha_on_l),
              Mistake("keep O unnormalised (do not divide by l here): the division happens once, after the "
                      "last tile", variant=_normalised),
              Mistake("the new max forgets the old one: m_new = max(m, rowmax S_j) (np.maximum), so that "
                      "α = e^(m − m_new) is at most 1", variant=_max_forgets_old),
              Mistake("a row whose max is still −inf must stay at l = 0, O = 0 without NaN: e^(−inf − (−inf)) is "
                      "NaN, so use 0 as the max in the exponent where it is −inf", tag="masked"),
              Mistake("only the first tile fails: start from m = −inf, l = 0, O = 0 and the same formulas apply "
                      "(α = e^(−inf) = 0)", tag="first")])


# --- flash_attention (FlashAttention-2's forward loop) ------------------------------------------
def _qkv(r, b, h, h_kv, n_q, n_k, d_h, dtype=np.float64):
    return (r.standard_normal((b, h, n_q, d_h)).astype(dtype), r.standard_normal((b, h_kv, n_k, d_h)).astype(dtype),
            r.standard_normal((b, h_kv, n_k, d_h)).astype(dtype))


def flash_cases():
    r = _rng(91)
    return [
        Case("n=8, tiles of 4 × 4, no mask", _qkv(r, 1, 2, 2, 8, 8, 4), {"block_q": 4, "block_k": 4}),
        Case("n=7, tiles of 3 × 2 that do not divide n", _qkv(r, 2, 2, 2, 7, 7, 4), {"block_q": 3, "block_k": 2},
             frozenset({"ragged"})),
        Case("causal, n=9, tiles of 4 × 3", _qkv(r, 1, 2, 2, 9, 9, 8), {"causal": True, "block_q": 4, "block_k": 3},
             frozenset({"causal"})),
        Case("causal, 3 queries after 5 cached keys (n_q=3, n_k=8)", _qkv(r, 1, 1, 1, 3, 8, 4),
             {"causal": True, "block_q": 2, "block_k": 3}, frozenset({"causal", "offset"})),
        Case("GQA: h=4, h_kv=2, tiles of 2 × 5", _qkv(r, 1, 4, 2, 6, 6, 4), {"block_q": 2, "block_k": 5},
             frozenset({"gqa"})),
        Case("tiles of 1 × 1", _qkv(r, 1, 1, 1, 5, 5, 2), {"block_q": 1, "block_k": 1}),
        Case("float32, default tiles", _qkv(r, 1, 2, 2, 10, 10, 8, np.float32), tags=frozenset({"float32"})),
    ]


def _flash_unnormalised(q, k, v, *, causal=False, block_q=None, block_k=None):
    """Σ_j e^(s_ij − m_i) v_j without the final division by l."""
    n_rep = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, n_rep, axis=1), np.repeat(v, n_rep, axis=1)
    s = q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        s = np.where(causal_mask(q.shape[2], k.shape[2]), s, -np.inf)
    m = s.max(-1, keepdims=True)
    return (np.exp(s - m) @ v).astype(q.dtype)


def _flash_no_alpha(q, k, v, *, causal=False, block_q=None, block_k=None):
    """The tile loop with O never rescaled by α (the running sum l is)."""
    n_rep = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, n_rep, axis=1), np.repeat(v, n_rep, axis=1)
    n_q, n_k, d_h = q.shape[2], k.shape[2], q.shape[3]
    Br, Bc = block_q or 128, block_k or 128
    allowed = causal_mask(n_q, n_k) if causal else np.ones((n_q, n_k), dtype=bool)
    out = np.zeros(q.shape)
    for r0 in range(0, n_q, Br):
        m = np.full((*q.shape[:2], min(Br, n_q - r0), 1), -np.inf)
        l, O = np.zeros(m.shape), np.zeros((*m.shape[:-1], d_h))
        for c0 in range(0, n_k, Bc):
            S = q[..., r0:r0 + Br, :] @ k[..., c0:c0 + Bc, :].swapaxes(-1, -2) / math.sqrt(d_h)
            S = np.where(allowed[r0:r0 + Br, c0:c0 + Bc], S, -np.inf)
            m, l, O = _no_alpha_on_O(m, l, O, S, v[..., c0:c0 + Bc, :])
        out[..., r0:r0 + Br, :] = O / np.where(l == 0, 1, l)
    return out.astype(q.dtype)


FLASH = Spec(
    "flash_attention", flash_attention, flash_cases, "transformer/flash/tiled.py", dims=("b", "h", "n_q", "d_h"),
    mistakes=[Mistake("α is not applied to O: when a later tile raises a row's max, the output so far must shrink "
                      "by α = e^(m − m_new) too: O = α·O + P̃ V_j", variant=_flash_no_alpha),
              Mistake("the output is not normalised: after the last key tile divide O by l (O / l), once per row",
                      variant=_flash_unnormalised),
              Mistake("only causal fails: put −inf on the scores of keys after the query (key j > query i + "
                      "n_k − n_q) before the update, and skip tiles entirely above the diagonal", tag="causal"),
              Mistake("with n_k > n_q the queries are the last n_q positions: query row r sits at r + n_k − n_q",
                      tag="offset"),
              Mistake("only the tiles that do not divide n fail: the last tile is shorter, slice up to "
                      "min(n, start + B)", tag="ragged"),
              Mistake("only the cases with h_kv < h fail: repeat each K/V head h / h_kv times (np.repeat axis=1)",
                      tag="gqa"),
              Mistake("only the cases with h_kv < h fail: repeat each K/V head h / h_kv times (np.repeat axis=1)",
                      raises=r"broadcast", tag="gqa")])
