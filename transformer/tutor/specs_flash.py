"""The checker's cases for lessons 08, 09, 16 and 17: the online softmax's merge and update, FlashAttention-2's
loop, the key tiles a kernel's query block reads, and where mma.sync keeps each element across a warp."""
from __future__ import annotations

import math

import numpy as np

from ..core.masks import causal_mask
from ..core.online_softmax import exp_minus, merge_softmax_stats, online_attention_update
from ..flash.cuda_kernels import key_tiles_read, mma_fragment_layout
from ..flash.tiled import flash_attention
from .cases import Case, Mistake, Spec

__all__ = ["MERGE_STATS", "ONLINE_UPDATE", "FLASH", "KEY_TILES", "FRAGMENTS"]


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
                                                                 m()[:2], l()[:2]), tags=frozenset({"empty"})),
            Case("both parts empty: m_a = m_b = −inf, l_a = l_b = 0 (rows no key has reached yet)",
                 (np.full((2, 1), -np.inf), np.zeros((2, 1)), np.full((2, 1), -np.inf), np.zeros((2, 1))),
                 tags=frozenset({"both-empty"}))]


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
                      "factor 0 where m is −inf", tag="empty"),
              Mistake("two empty parts merge into an empty one, m = −inf and l = 0: there m − m_part is −inf − (−inf), "
                      "NaN, for both parts, so give each factor 0 where its own m_part is −inf", tag="both-empty")])


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


def _alpha_flipped(m, l, O, S_j, V_j):  # α = e^(m_new − m), at least 1: what came before grows
    m_new = np.maximum(m, S_j.max(-1, keepdims=True))
    P = exp_minus(S_j, m_new)
    alpha = np.where(np.isneginf(m), 0.0, np.exp(m_new - np.where(np.isneginf(m), 0, m)))
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
              Mistake("α's exponent is the wrong way round: α = e^(m − m_new), the old max minus the new, so α ≤ 1 and "
                      "what came before shrinks when the max goes up", variant=_alpha_flipped),
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


MEMORY_N = 1024  # the memory cases' n_q = n_k: the scores, 8.4 MB in float64, are 128 of the first case's 64 × 64 tiles
WIDTH_BC = 16  # the key tiles' width in the case of one query tile: a loop that takes Bc from block_q holds 8.4 MB


def flash_cases():
    r = _rng(91)
    return [
        Case("n=8, tiles of 4 × 4, no mask", _qkv(r, 1, 2, 2, 8, 8, 4), {"block_q": 4, "block_k": 4}),
        Case("n=7, tiles of 3 × 2 that do not divide n", _qkv(r, 2, 2, 2, 7, 7, 4), {"block_q": 3, "block_k": 2},
             frozenset({"ragged"})),
        Case("causal, n=9, tiles of 4 × 3", _qkv(r, 1, 2, 2, 9, 9, 8), {"causal": True, "block_q": 4, "block_k": 3},
             frozenset({"causal", "ragged"})),
        Case("causal, 3 queries after 5 cached keys (n_q=3, n_k=8)", _qkv(r, 1, 1, 1, 3, 8, 4),
             {"causal": True, "block_q": 2, "block_k": 3}, frozenset({"causal", "offset", "ragged"})),
        Case("GQA: h=4, h_kv=2, tiles of 2 × 5", _qkv(r, 1, 4, 2, 6, 6, 4), {"block_q": 2, "block_k": 5},
             frozenset({"gqa"})),
        Case("tiles of 1 × 1", _qkv(r, 1, 1, 1, 5, 5, 2), {"block_q": 1, "block_k": 1}),
        Case("float32, default tiles", _qkv(r, 1, 2, 2, 10, 10, 8, np.float32), tags=frozenset({"float32"})),
        Case("causal, 6 queries over 4 keys (n_q > n_k): rows 0 and 1 see no key and return zeros",
             _qkv(r, 1, 1, 1, 6, 4, 4), {"causal": True, "block_q": 4, "block_k": 2},
             frozenset({"causal", "no-key", "ragged"})),
        Case(f"n = {MEMORY_N:,}, tiles of 64 × 64: the peak memory of tiles, not of the whole score matrix",
             _qkv(r, 1, 1, 1, MEMORY_N, MEMORY_N, 16), {"block_q": 64, "block_k": 64}, frozenset({"memory"}),
             max_bytes=MEMORY_N * MEMORY_N * 8 // 3,
             memory_note=f"the n_q × n_k scores alone are {MEMORY_N * MEMORY_N * 8 / 1e6:.1f} MB in float64, and "
                         "FlashAttention never holds them — for each query tile, loop over key tiles of Bc keys and "
                         "keep only that tile's S_ij and the running m, l and O"),
        Case(f"n = {MEMORY_N:,} in one query tile (block_q = {MEMORY_N:,}) over key tiles of {WIDTH_BC}: Bc is block_k",
             _qkv(r, 1, 1, 1, MEMORY_N, MEMORY_N, 16), {"block_q": MEMORY_N, "block_k": WIDTH_BC},
             frozenset({"memory"}), max_bytes=MEMORY_N * MEMORY_N * 8 // 3,
             memory_note=f"with block_q = {MEMORY_N:,} every query is in one tile, so the key tiles alone keep S_ij "
                         f"small: Bc = block_k = {WIDTH_BC} keys makes S_ij {MEMORY_N:,} × {WIDTH_BC} "
                         f"({MEMORY_N * WIDTH_BC * 8 / 1e3:.0f} kB), where Bc = Br makes it the whole "
                         f"{MEMORY_N * MEMORY_N * 8 / 1e6:.1f} MB score matrix — take Bc from block_k"),
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


def _flash_unguarded(q, k, v, *, causal=False, block_q=None, block_k=None):  # O / l where l = 0: NaN, not 0
    out = flash_attention(q, k, v, causal=causal, block_q=block_q, block_k=block_k)
    if not causal or q.shape[2] <= k.shape[2]:
        raise ValueError("every row sees a key")  # a variant that cannot run on a case says nothing about it
    out[..., :q.shape[2] - k.shape[2], :] = np.nan  # [b, h, n_q − n_k, d_h] the rows that see no key
    return out


def _flash_strict_causal(q, k, v, *, causal=False, block_q=None, block_k=None):  # key j < position, not ≤
    if not causal:
        raise ValueError("no causal mask")
    n_rep = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, n_rep, axis=1), np.repeat(v, n_rep, axis=1)
    n_q, n_k = q.shape[2], k.shape[2]
    s = q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1])  # [b, h, n_q, n_k]
    i, j = np.arange(n_q)[:, None] + n_k - n_q, np.arange(n_k)[None, :]
    s = np.where(j < i, s, -np.inf)
    m = s.max(-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(m), m, 0))
    z = e.sum(-1, keepdims=True)
    return (e / np.where(z == 0, 1, z) @ v).astype(q.dtype)


def _flash_scaled(factor):
    """flash_attention whose scores are factor(d_h) × the right ones: √d_h when 1/√d_h is left out, 1/√d_h when
    the scores are divided by d_h."""
    def variant(q, k, v, **kwargs):
        return flash_attention((q * factor(q.shape[-1])).astype(q.dtype), k, v, **kwargs)
    return variant


FLASH = Spec(
    "flash_attention", flash_attention, flash_cases, "transformer/flash/tiled.py", dims=("b", "h", "n_q", "d_h"),
    mistakes=[Mistake("the last query tile is shorter when Br does not divide n_q: size its m, l, O and the query "
                      "positions of its causal mask from the rows it really has (Qi.shape[2]), not from Br",
                      raises=r"must have shape|could not be broadcast", tag="ragged"),
              Mistake("α is not applied to O: when a later tile raises a row's max, the output so far must shrink "
                      "by α = e^(m − m_new) too: O = α·O + P̃ V_j", variant=_flash_no_alpha),
              Mistake("the scores are not scaled: S_j = Q_i K_jᵀ / √d_h", variant=_flash_scaled(math.sqrt)),
              Mistake("the scores are divided by d_h: the formula divides by √d_h",
                      variant=_flash_scaled(lambda d_h: 1 / math.sqrt(d_h))),
              Mistake("the output is not normalised: after the last key tile divide O by l (O / l), once per row",
                      variant=_flash_unnormalised),
              Mistake("a row that sees no key (causal, n_q > n_k) has l = 0, and O / l is 0 / 0 = NaN: divide by 1 "
                      "where l is 0 (np.where(l == 0, 1, l)), so that the row returns zeros", variant=_flash_unguarded),
              Mistake("the diagonal: a query sees its own key, so key j is kept when j ≤ its position (i + n_k − n_q), "
                      "not j <", variant=_flash_strict_causal),
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


# --- lesson 16: the key tiles a block of queries reads ---------------------------------------------------
def tiles_cases():
    row = np.array([[0, 0, 0, 1, 1, 2, -1, -1]])  # three documents, two padding slots
    return [Case("n=8, block_q=2, block_k=2, causal", (8, 2, 2), {"causal": True}),
            Case("n=10, block_q=4, block_k=3, causal: partial last tiles", (10, 4, 3), {"causal": True}),
            Case("n=8, block_q=4, block_k=4, causal=False", (8, 4, 4), {"causal": False}, frozenset({"noncausal"})),
            Case("doc [[0 0 0 1 1 2 −1 −1]], block_q=4, block_k=2, causal", (8, 4, 2), {"causal": True, "doc": row},
                 frozenset({"doc"})),
            Case("doc [[0 0 0 1 1 1 −1 −1]], blocks of 2, causal: the last block holds padding only and reads nothing",
                 (8, 2, 2), {"causal": True, "doc": np.array([[0, 0, 0, 1, 1, 1, -1, -1]])},
                 frozenset({"doc", "pad-block"})),
            Case("b=2 rows of documents, n=9, block_q=3, block_k=2, causal=False",
                 (9, 3, 2), {"causal": False, "doc": np.array([[0, 0, 0, 0, 1, 1, 1, 2, 2], [0, 0, 1, 1, 1, 1, 1, -1, -1]])},
                 frozenset({"doc", "noncausal"}))]


def _tiles(n, block_q, block_k, *, causal, doc=None, first_row=False, inclusive=False, docs=True, doc_start=True,
           floor=False):
    """key_tiles_read with one mistake switched on: the causal bound from the block's first row, the end
    tile counted inclusively, the documents left out, or their first key, and ⌊n / block⌋ tiles."""
    tiles = (lambda size: n // size) if floor else (lambda size: -(-n // size))
    n_q_tiles, n_k_tiles = tiles(block_q), tiles(block_k)
    rows = [None] if doc is None or not docs else list(np.asarray(doc))
    out = np.zeros((len(rows), n_q_tiles, n_k_tiles), bool)
    for r, d in enumerate(rows):
        for t in range(n_q_tiles):
            q = np.arange(t * block_q, min(n, (t + 1) * block_q))  # the block's rows
            if d is None:
                first, end = 0, n
            else:
                mine = d[q][d[q] >= 0]
                keys = np.flatnonzero(np.isin(d, mine))
                first, end = (keys[0], keys[-1] + 1) if len(keys) else (n, 0)
            if not doc_start:
                first = 0
            if causal:
                end = min(end, (q[0] + 1) if first_row else (q[-1] + 1))
            for j in range(n_k_tiles):
                out[r, t, j] = j >= first // block_k and (j * block_k <= end if inclusive else j * block_k < end)
    return out


KEY_TILES = Spec(
    "key_tiles_read", key_tiles_read, tiles_cases, "transformer/flash/cuda_kernels.py", dims=("b", "Tr", "Tc"),
    mistakes=[Mistake("causal: a block's last row sees the most keys, so the block reads up to the tile holding its "
                      "LAST row's key, not its first row's", variant=lambda *a, **k: _tiles(*a, **k, first_row=True)),
              Mistake("key tile j holds keys j·block_k … j·block_k + block_k − 1: it is read when j·block_k < end "
                      "(end is one past the last key), not ≤", variant=lambda *a, **k: _tiles(*a, **k, inclusive=True)),
              Mistake("with doc, a block reads only the keys of the documents its rows hold (one row of the result "
                      "per batch row of doc)", variant=lambda *a, **k: _tiles(*a, **k, docs=False)),
              Mistake("with doc, reading starts at the tile holding the first key of the block's first document: "
                      "the tiles before it hold other documents", variant=lambda *a, **k: _tiles(*a, **k, doc_start=False)),
              Mistake("⌈n / block⌉ tiles: the last tile may be partly filled (-(-n // block))",
                      variant=lambda *a, **k: _tiles(*a, **k, floor=True)),
              Mistake("causal=False: every key of the block's documents (all n without doc) may be read",
                      tag="noncausal"),
              Mistake("a block of padding only (doc −1 in each of its rows) holds no document: it reads no tile, and "
                      "its row of the result stays False (there is no first key to take)", tag="pad-block"),
              Mistake("a block of padding only (doc −1 in each of its rows) holds no document: it reads no tile, and "
                      "its row of the result stays False (there is no first key to take)",
                      raises=r"out of bounds|empty", tag="pad-block")])


# --- lesson 17: where mma.sync keeps each element across a warp --------------------------------------------
def fragment_cases():
    return [Case('operand "C" (16 × 8, the scores S, float32)', ("C",)),
            Case('operand "A" of m16n8k16 (16 × 16, P in float16)', ("A",)),
            Case('operand "B" of m16n8k16 (16 × 8: 16 keys × 8 columns of V)', ("B",)),
            Case('operand "A" of m16n8k8 (16 × 8, TF32)', ("A", "m16n8k8"), tags=frozenset({"tf32"})),
            Case('operand "B" of m16n8k8 (8 × 8, TF32)', ("B", "m16n8k8"), tags=frozenset({"tf32"}))]


def _fragments(change: str):
    """mma_fragment_layout with one mistake in one operand; every other operand as the package lays it out."""
    def variant(operand, shape="m16n8k16"):
        lane, reg, half = (a.copy() for a in mma_fragment_layout(operand, shape))
        r, c = np.indices(lane.shape)
        if change == "rows 2g, 2g+1" and operand == "C":
            lane, reg = 4 * (r // 2) + c // 2, 2 * (r % 2) + c % 2
        elif change == "C registers" and operand == "C":
            reg = r // 8 + 2 * (c % 2)
        elif change == "A registers" and (operand, shape) == ("A", "m16n8k16"):
            reg = 2 * (r // 8) + c // 8
        elif change == "halves" and shape == "m16n8k16" and operand in "AB":
            half = 1 - half
        elif change == "B like A" and (operand, shape) == ("B", "m16n8k16"):
            lane, reg = 4 * (r % 8) + c // 2, 2 * (r // 8) + c % 2
        elif change == "tf32 like fp16" and (operand, shape) == ("A", "m16n8k8"):
            lane = 4 * (r % 8) + c // 2
        elif change == "tf32 B by row" and (operand, shape) == ("B", "m16n8k8"):
            lane, reg = 4 * r + c % 4, c // 4  # k and the column of B swapped
        elif change == "no row % 8" and operand in ("A", "C"):
            lane = 4 * r + lane % 4  # 4·row + t: rows 8 … 15 land on lanes 32 … 63
        elif change == "order":
            return lane, half, reg  # (lane, half, reg), not (lane, reg, half)
        else:  # not this mistake's operand: a variant that cannot run on a case says nothing about it
            raise ValueError(f"this mistake is not in operand {operand} of {shape}")
        return lane, reg, half
    return variant


FRAGMENTS = Spec(
    "mma_fragment_layout", mma_fragment_layout, fragment_cases, "transformer/flash/cuda_kernels.py",
    dims=("row", "col"), names=("lane", "reg", "half"),
    mistakes=[Mistake("lane 4g + t holds rows g AND g + 8 (g = row % 8), not two neighbouring rows",
                      variant=_fragments("rows 2g, 2g+1")),
              Mistake("C's four registers: c0, c1 are columns 2t, 2t + 1 of row g; c2, c3 the same columns of row "
                      "g + 8 (reg = 2·(row // 8) + col % 2)", variant=_fragments("C registers")),
              Mistake("A's registers: a0 rows g, a1 rows g + 8 of columns 0 … 7; a2, a3 the same rows of columns "
                      "8 … 15 (reg = row // 8 + 2·(col // 8))", variant=_fragments("A registers")),
              Mistake("a register holds two float16: the even column (A) or row (B) in the low half, half 0",
                      variant=_fragments("halves")),
              Mistake("B is k × n and goes by column: lane 4·col + (k % 8) // 2 holds rows 2t, 2t + 1 of column g",
                      variant=_fragments("B like A")),
              Mistake("TF32 (m16n8k8) keeps one element a register: lane 4g + t holds A[g][t] and A[g][t + 4], "
                      "t = col % 4", variant=_fragments("tf32 like fp16")),
              Mistake("TF32 B (k × n, 8 × 8) goes by column: lane 4·col + k % 4 holds rows k = t and t + 4 of "
                      "column g, in b0 and b1 (reg = k // 4)", variant=_fragments("tf32 B by row")),
              Mistake("a warp has 32 lanes, 0 … 31: the row's part of a lane is g = row % 8, and rows g and g + 8 "
                      "share a lane (in different registers)", variant=_fragments("no row % 8")),
              Mistake("return (lane, reg, half) in that order: lane (0 … 31), the register, then the half of it",
                      variant=_fragments("order")),
              Mistake('shape "m16n8k8" (TF32) has its own layout: one element a register, half always 0',
                      tag="tf32")])
