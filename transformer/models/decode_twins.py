"""Each CUDA kernel of the decode step (decode_kernels/*.cu) written again in NumPy: its twin.

A twin takes its kernel's arguments in the kernel's order (arrays of any shape holding the kernel's
contiguous data, the ints and floats as numbers) and writes what the kernel writes, in place, split
the way the kernel splits the work: the same attention splits with the same unnormalised partials
(m, ℓ, Σ e^{s−m} v), the same per-block best (value, index) of the vocabulary, the same state updates.
Every twin takes the launch's grid as a keyword, `grid=`, last (the attention's splits and the
vocabulary's blocks are the grid's; the other kernels' results do not depend on it). So

- a test compares *every* buffer a kernel writes with its twin's, the intermediate ones included,
  not only the final logits; and checks each twin against a float64 formula of its own;
- a CPU runs the whole step (`decode_step.TwinLauncher`) from the same launch list as the GPU, so the
  step's buffers, state and ids can be read on a machine without one.

Each twin returns at once when state[DONE] is set, as its kernel does. Arithmetic is float32, as on
the GPU; sums run in NumPy's order, not the kernel's, so a twin agrees with its kernel to rounding.

    embed                   x = W_E[tok]
    norm_matvec             y = W · (γ ⊙ x / rms(x))
    norm_matvec_rope        the same for W_qkv, then q = RoPE(q)·q_scale;  K[:, pos], V[:, pos] = RoPE(k), v
    attend_split            per (KV head, split of the keys): m, ℓ, o for its g query heads; then
                            o = Σ_s e^{m_s−M} o_s / Σ_s e^{m_s−M} ℓ_s (the kernel's last block of a KV head)
    matvec_residual         x += W · a
    swiglu_matvec_residual  x += W · (silu(g) ⊙ u)
    sample_filter           top-k, then top-p: the kept set as bounds = (threshold, last) on the logits
    sample_blocks           per block of the vocabulary: its best (score, index) among the kept tokens
    sample_finish           tok = the best of the blocks; out[step] = tok; pos, step += 1; done?
"""
from __future__ import annotations

import math

import numpy as np

from ..core.positions import apply_rope_interleaved
from .decode_plan import DONE, POS, STEP, TOK, counter_uniforms

__all__ = ["embed", "norm_matvec", "norm_matvec_rope", "attend_split", "matvec_residual",
           "swiglu_matvec_residual", "sample_filter", "sample_blocks", "sample_finish", "gumbel", "kept", "TWINS"]

F32 = np.float32


def _flat(a):  # any shape -> [size], a view: a twin's writes reach the caller's buffer as a kernel's do
    if not a.flags.c_contiguous:
        raise ValueError(f"a kernel's buffer is one contiguous block of memory; got a strided view of shape {a.shape}")
    return a.reshape(-1)


def _rows(a, n: int, m: int):  # the first n·m elements of `a` -> [n, m] (row-major, as the kernel indexes it)
    return _flat(a)[:int(n) * int(m)].reshape(int(n), int(m))


def _done(state) -> bool:
    return bool(_flat(state)[DONE])


def gumbel(u):  # [n] float32 in (0, 1) -> [n] float32
    """g = −log(−log u): Gumbel noise. argmax_i (z_i + g_i) is a draw from softmax(z)."""
    return -np.log(-np.log(u))  # [n]


def embed(W_E, state, x, d, *, grid=None):  # [v·d], [4], [d] (written)
    """x = W_E[tok], tok = state[TOK]."""
    if _done(state):
        return
    tok, d = int(_flat(state)[TOK]), int(d)
    _flat(x)[:d] = _flat(W_E)[tok * d:(tok + 1) * d]  # [d]


def norm_matvec(x, gamma, W, y, state, n_rows, d_in, eps, *, grid=None):  # [d_in], [d_in], [n_rows·d_in], [n_rows]
    """y = inv · W (γ ⊙ x),  inv = 1 / √(Σ x² / d_in + ε): RMSNorm then a matrix–vector product.

    >>> x, y = np.array([3, 4], np.float32), np.full(2, np.nan, np.float32)
    >>> norm_matvec(x, np.ones(2, np.float32), np.eye(2, dtype=np.float32), y, np.zeros(4, np.int32), 2, 2, 0.0)
    >>> y  # x / √((9 + 16) / 2)
    array([0.84852815, 1.1313709 ], dtype=float32)
    """
    if _done(state):
        return
    x, gamma = _flat(x)[:d_in], _flat(gamma)[:d_in]  # [d_in] each
    inv = F32(1) / np.sqrt((x * x).sum() / F32(d_in) + F32(eps))  # 1 / rms(x)
    _flat(y)[:n_rows] = inv * (_rows(W, n_rows, d_in) @ (gamma * x))  # [n_rows]


def norm_matvec_rope(x, gamma, W, cos, sin, q, K, V, state, h, h_kv, d_h, max_len, d_in, eps, q_scale, *,
                     grid=None):
    """qkv = W · (γ ⊙ x / rms(x)) (`norm_matvec`), then q = RoPE(q)·q_scale;  K[kvh, pos] = RoPE(k);
    V[kvh, pos] = v  (pos = state[POS]); qkv itself is not kept.

    W [(h + 2h_kv)·d_h, d_in]: rows [q heads | k heads | v heads]; cos, sin [max_len, d_h/2]; q [h·d_h]
    (written); K, V [h_kv, max_len, d_h]: one layer's cache, slot pos written."""
    if _done(state):
        return
    qkv = np.empty((h + 2 * h_kv) * d_h, F32)  # [(h + 2h_kv)·d_h]: the kernel keeps it in registers
    norm_matvec(x, gamma, W, qkv, state, len(qkv), d_in, eps)
    _rope_append(qkv, cos, sin, q, K, V, state, h, h_kv, d_h, max_len, q_scale)


def _rope_append(qkv, cos, sin, q, K, V, state, h, h_kv, d_h, max_len, q_scale):
    pos, half = int(_flat(state)[POS]), d_h // 2
    heads = _rows(qkv, h + 2 * h_kv, d_h)  # [h + 2h_kv, d_h]
    c, s = _rows(cos, max_len, half)[pos:pos + 1], _rows(sin, max_len, half)[pos:pos + 1]  # [1, d_h/2] each
    rotated = apply_rope_interleaved.unchecked(heads[:h + h_kv, None], c, s)[:, 0]  # [h + h_kv, d_h]
    _rows(q, h, d_h)[:] = rotated[:h] * F32(q_scale)  # [h, d_h]
    _rows(K, h_kv * max_len, d_h).reshape(h_kv, max_len, d_h)[:, pos] = rotated[h:]  # [h_kv, d_h]
    _rows(V, h_kv * max_len, d_h).reshape(h_kv, max_len, d_h)[:, pos] = heads[h + h_kv:]  # [h_kv, d_h]


def attend_split(q, K, V, part_o, part_ml, o, arrivals, state, h, h_kv, d_h, max_len, split, *, grid=None):
    """Per KV head kvh and split s of the keys [s·split, min(s·split + split, pos + 1)), for its g = h/h_kv
    query heads: m = max_k s_k, ℓ = Σ_k e^{s_k − m}, o_s = Σ_k e^{s_k − m} V[kvh, k] (not divided by ℓ),
    s_k = q · K[kvh, k]. A split with no key (past pos) is not written. Then the splits merged
    (`_merge_splits`; on the GPU by the last block of each KV head to finish): o. arrivals, the kernel's
    count of finished blocks, is 0 before and after.

    q [h·d_h] (scaled already); K, V [h_kv, max_len, d_h]; part_o [h, n_splits, d_h],
    part_ml [h, n_splits, 2] = (m, ℓ) and o [h·d_h] written; n_splits = grid[1], else ⌈max_len / split⌉."""
    if _done(state):
        return
    g, n_keys = h // h_kv, int(_flat(state)[POS]) + 1
    n_splits = math.ceil(max_len / split) if grid is None else int(grid[1])
    Kc = _rows(K, h_kv * max_len, d_h).reshape(h_kv, max_len, d_h)[:, :n_keys]  # [h_kv, n_keys, d_h]
    Vc = _rows(V, h_kv * max_len, d_h).reshape(h_kv, max_len, d_h)[:, :n_keys]  # [h_kv, n_keys, d_h]
    scores = _rows(q, h, d_h).reshape(h_kv, g, d_h) @ Kc.swapaxes(-1, -2)  # [h_kv, g, n_keys]  (GQA: g heads a KV head)
    part_o = _rows(part_o, h * n_splits, d_h).reshape(h_kv, g, n_splits, d_h)  # row (head, s), head = kvh·g + a
    part_ml = _rows(part_ml, h * n_splits, 2).reshape(h_kv, g, n_splits, 2)  # (m, ℓ)
    for s in range(min(n_splits, math.ceil(n_keys / split))):  # the splits that hold a key
        k0, k1 = s * split, min(s * split + split, n_keys)
        m = scores[..., k0:k1].max(axis=-1)  # [h_kv, g]
        p = np.exp(scores[..., k0:k1] - m[..., None])  # [h_kv, g, k1 − k0]
        part_ml[:, :, s] = np.stack([m, p.sum(axis=-1)], axis=-1)  # [h_kv, g, 2]
        part_o[:, :, s] = p @ Vc[:, k0:k1]  # [h_kv, g, d_h]
    _merge_splits(part_o, part_ml, o, state, h, d_h, n_splits, split)


def _merge_splits(part_o, part_ml, o, state, h, d_h, n_splits, split):
    """o = Σ_s e^{m_s−M} o_s / Σ_s e^{m_s−M} ℓ_s, M = max_s m_s: the splits that hold a key merged
    (s ≤ pos / split; the others are not read)."""
    used = min(n_splits, int(_flat(state)[POS]) // split + 1)
    ml = _rows(part_ml, h * n_splits, 2).reshape(h, n_splits, 2)[:, :used]  # [h, used, (m, ℓ)]
    m, l = ml[..., 0], ml[..., 1]  # [h, used] each
    w = np.exp(m - m.max(axis=-1, keepdims=True))  # [h, used]  e^{m_s − M}
    o_s = _rows(part_o, h * n_splits, d_h).reshape(h, n_splits, d_h)[:, :used]  # [h, used, d_h]
    _rows(o, h, d_h)[:] = (w[..., None] * o_s).sum(axis=1) / (w * l).sum(axis=-1, keepdims=True)  # [h, d_h]


def matvec_residual(a, W, x, state, n_rows, d_in, *, grid=None):  # [d_in], [n_rows·d_in], [n_rows] (added to)
    """x += W · a."""
    if _done(state):
        return
    _flat(x)[:n_rows] += _rows(W, n_rows, d_in) @ _flat(a)[:d_in]  # [n_rows]


def swiglu_matvec_residual(gu, W, x, state, n_rows, d_ff, *, grid=None):  # [2·d_ff], [n_rows·d_ff], [n_rows]
    """x += W · (silu(g) ⊙ u),  [g | u] = gu,  silu(g) = g / (1 + e^{−g})."""
    if _done(state):
        return
    g, u = _flat(gu)[:d_ff], _flat(gu)[d_ff:2 * d_ff]  # [d_ff] each
    act = g / (F32(1) + np.exp(-g)) * u  # [d_ff]
    _flat(x)[:n_rows] += _rows(W, n_rows, d_ff) @ act  # [n_rows]


def sample_filter(logits, bounds, state, v, inv_temperature, top_k, top_p, *, grid=None):
    """The kept set of top-k, then top-p, by core.sampling.filter_logits' rule, written as
    bounds = (threshold, last): token i is kept iff logits_i > threshold, or logits_i = threshold and i ≤ last.

    In the order of falling logit (ties in vocabulary order) both filters keep a head of the order:
    top-k every token ≥ the k-th largest logit (ties at it all kept); top-p, over those, with
    w_i = e^{(x_i − max)·inv_temperature} and Z = Σ w_i, each token whose mass before it is < top_p·Z.
    threshold is the last kept token's logit; last is its id when the tokens tied at that logit are cut
    (a tie at the top-p boundary), else v. top_k = 0 (or ≥ v) and top_p = 1 are off: (−∞, v).

    >>> bounds, x = np.zeros(2, np.float32), np.array([1, 3, 2, 3, 0], np.float32)
    >>> sample_filter(x, bounds, np.zeros(4, np.int32), 5, 1.0, 3, 1.0)
    >>> bounds.tolist()  # top-3: the logits ≥ 2, ids 1, 2, 3
    [2.0, 5.0]
    >>> sample_filter(x, bounds, np.zeros(4, np.int32), 5, 1.0, 0, 0.5)
    >>> bounds.tolist()  # p ≈ (.05, .39, .14, .39, .02): .39 before id 3 (kept), .78 before id 2
    [3.0, 5.0]
    >>> sample_filter(x, bounds, np.zeros(4, np.int32), 5, 1.0, 0, 0.3)
    >>> bounds.tolist()  # .39 before id 3: of the two 3s only id 1 is kept
    [3.0, 1.0]
    """
    if _done(state):
        return
    if not (0 < top_k < v or F32(top_p) < 1):  # nothing to filter
        _flat(bounds)[:2] = -np.inf, v
        return
    x = _flat(logits)[:v] + F32(0)  # [v]; −0 made +0: the two tie, as floats do
    order = np.argsort(-x, kind="stable")  # [v] falling logit, ties in vocabulary order
    n_kept = v  # the kept set is order[:n_kept]
    if 0 < top_k < v:
        n_kept = int((x >= x[order[top_k - 1]]).sum())  # every token ≥ the k-th largest
    if F32(top_p) < 1:
        w = np.exp((x[order[:n_kept]] - x.max()) * F32(inv_temperature)).astype(np.float64)  # [n_kept]
        mass_before = np.cumsum(w) - w  # [n_kept] the mass of the tokens before each
        n_kept = int((mass_before < float(F32(top_p) * F32(w.sum()))).sum())  # ≥ 1: the first has 0 before it
    cut_tie = n_kept < v and x[order[n_kept]] == x[order[n_kept - 1]]
    _flat(bounds)[:2] = x[order[n_kept - 1]], order[n_kept - 1] if cut_tie else v


def kept(logits, bounds, v):  # [v], (threshold, last) or a null pointer -> [v] bool
    """Which tokens sample_blocks keeps: logits_i > threshold, or = threshold and i ≤ last (all: no bounds)."""
    x = _flat(logits)[:v]  # [v]
    if not isinstance(bounds, np.ndarray):  # a null pointer (np.uint64(0), as CuPy passes one): no filter
        return np.ones(v, dtype=bool)
    threshold, last = _flat(bounds)[0], int(_flat(bounds)[1])
    return (x > threshold) | ((x == threshold) & (np.arange(v) <= last))  # [v]


def sample_blocks(logits, bounds, best_v, best_i, state, v, inv_temperature, seed, *, grid):
    """Block b of grid[0] takes [b·chunk, min(v, (b+1)·chunk)), chunk = ⌈v / grid[0]⌉, and writes its
    best score and its index (ties: the lowest index; an empty block: −∞ and v).

    score = logits (inv_temperature = 0, greedy), else logits · inv_temperature + gumbel(u),
    u = counter_uniforms(seed, state[STEP], v); −∞ outside the kept set of sample_filter's bounds
    (a null pointer, np.uint64(0): every token kept)."""
    if _done(state):
        return
    n_blocks = int(grid[0])
    chunk = math.ceil(v / n_blocks)
    score = _flat(logits)[:v]  # [v]
    if inv_temperature != 0:
        score = score * F32(inv_temperature) + gumbel(counter_uniforms(int(seed), int(_flat(state)[STEP]), v))  # [v]
    score = np.where(kept(logits, bounds, v), score, -np.inf).astype(F32)  # [v]
    padded = np.full(n_blocks * chunk, -np.inf, F32)  # [n_blocks·chunk]
    padded[:v] = score
    blocks = padded.reshape(n_blocks, chunk)  # [n_blocks, chunk]
    arg = blocks.argmax(axis=-1)  # [n_blocks]  the first of the largest
    start = np.arange(n_blocks) * chunk  # [n_blocks]
    empty = start >= v  # [n_blocks]
    _flat(best_v)[:n_blocks] = np.where(empty, -np.inf, blocks[np.arange(n_blocks), arg])  # [n_blocks]
    _flat(best_i)[:n_blocks] = np.where(empty, v, start + arg)  # [n_blocks]


def sample_finish(best_v, best_i, state, out, n_blocks, max_new, eos, *, grid=None):
    """tok = the best_i of the largest best_v (ties: the lowest index); out[step] = tok; then
    state = (tok, pos + 1, step + 1, tok == eos or step + 1 ≥ max_new).

    >>> state, out = np.array([7, 5, 1, 0], np.int32), np.zeros(3, np.int32)
    >>> sample_finish(np.array([2.0, 3.0, 3.0], np.float32), np.array([4, 40, 30], np.int32), state, out, 3, 3, -1)
    >>> state.tolist(), out.tolist()
    ([30, 6, 2, 0], [0, 30, 0])
    """
    if _done(state):
        return
    values, ids = _flat(best_v)[:n_blocks], _flat(best_i)[:n_blocks]  # [n_blocks] each
    tok = int(ids[values == values.max()].min())
    st = _flat(state)
    step = int(st[STEP])
    _flat(out)[step] = tok
    st[TOK], st[POS], st[STEP] = tok, st[POS] + 1, step + 1
    st[DONE] = int(tok == eos or step + 1 >= max_new)


TWINS = {"embed": embed, "norm_matvec": norm_matvec, "norm_matvec_rope": norm_matvec_rope,
         "attend_split": attend_split, "matvec_residual": matvec_residual,
         "swiglu_matvec_residual": swiglu_matvec_residual, "sample_filter": sample_filter,
         "sample_blocks": sample_blocks, "sample_finish": sample_finish}
