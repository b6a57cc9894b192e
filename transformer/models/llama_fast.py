"""The decode step made fast: an engine of the generation loop (generation.py) for NumPy and the KVCache.

A decode step multiplies one vector per sequence by every weight matrix, so it reads all of the
weights (538 MB in float32 for SmolLM2-135M) to do 2 FLOPs per weight: its time is the bytes
moved over the memory bandwidth (lesson 13), plus whatever runs between the matrix products.
Run as `llama.forward` writes it, ~40 small NumPy operations a layer each allocate their
result and pass through a Python function or two, and 7 separate matrix-vector products a layer
stream more slowly than a few larger ones. `FastForward` keeps the maths and changes how it runs.
Each of its lines rewrites one readable formula of llama.py:

    readable (llama.forward, decoder_block, attention_block)      fast (FastForward.__call__)
    x = embed(ids, W_E)                                            np.take(W_E, ids, out=x)
    rms_norm(x, γ, eps)                                            rms_norm_into(x, γ, eps, out, ms)
    q, k, v = x W_q, x W_k, x W_v  (then split_heads)              x @ [W_q | W_k | W_v] into one buffer (fused)
    apply_rope_interleaved(q | k, cos, sin)                        q and k as complex pairs × e^{iθ}, one multiply
    apply_rope_half (rope_layout="half", a trained decoder)        the same, W_q and W_k's columns reordered once
    scores · 1/√d_h                                                the 1/√d_h rides on the query's turn
    cache.update(layer, k, v)                                      the same (KVCache.update)
    repeat_kv, then softmax(q Kᵀ + mask) V                         attend: g·n queries per KV head against K, V
                                                                   unrepeated; the mask as a 0 / −inf bias
    merge_heads(o) @ W_o,  x + …                                   np.matmul(o, W_o, out=y); x += y
    swiglu_ffn: silu(x W_gate) ∘ x W_up, @ W_down                  x @ [W_gate | W_up] (fused); σ in place
    lm_head(rms_norm(x[:, -1]), W_E)                               the last position only, into a buffer

- fused weights: q, k and v come from one product and the SwiGLU's gate and up from another, 4
  products a layer instead of 7. The loader stores each group as one matrix and the separate ones
  as column views of it (`fuse_columns`), so nothing is held twice and `llama.forward` reads the
  same numbers;
- every intermediate is written into an array allocated once per shape (`out=`), and the loop
  over layers is one Python function with its weights bound beforehand.

It is tested equal to `llama.forward` (same greedy tokens, logits within 1e-5 relative);
`generation.engine_for` picks it wherever it applies (on CuPy, or with a paged cache, the readable
engine runs).
"""
from __future__ import annotations

import numpy as np

from . import llama_fast_checks as checks
from ..core.kv_cache import KVCache
from ..core.positions import interleaved_to_half_permutation
from ..require import checked_by

__all__ = ["fuse_columns", "FastForward", "decode_matrices", "half_to_interleaved_columns", "half_to_interleaved_order"]


def fuse_columns(*Ws, xp=np):  # k × [d_in, d_j] -> [d_in, Σ d_j], k × [d_in, d_j]
    """[W_1 | W_2 | …] as one C-ordered matrix, and each W_j as a view of its columns.

    x @ [W_q | W_k | W_v] = [x W_q | x W_k | x W_v]: one matrix-vector product instead of three,
    and the views keep `x @ W_q` working unchanged, on the same memory.

    >>> W, (A, B) = fuse_columns(np.ones((2, 1)), np.zeros((2, 2)))
    >>> W.shape, A.shape, B.shape, W.flags["C_CONTIGUOUS"], bool(np.shares_memory(A, W))
    ((2, 3), (2, 1), (2, 2), True, True)
    """
    W = xp.concat(Ws, axis=1)  # [d_in, Σ d_j]
    edges = np.cumsum([0] + [Wj.shape[1] for Wj in Ws])
    return W, [W[:, int(a):int(b)] for a, b in zip(edges[:-1], edges[1:])]


def decode_matrices(w, fused: bool = True) -> list:  # LlamaWeights -> the matrices a decode step multiplies by
    """What a decode step reads, in order: per layer [W_q | W_k | W_v], W_o, [W_gate | W_up], W_down
    (each fused matrix once where the loader fused them, else, or with fused=False, the separate
    ones), then the LM head (d, v). A matrix-vector product with each is the step's floor: the
    time to stream the weights, its roofline."""
    mats = []
    for i, lw in enumerate(w.layers):
        fused = fused and fused_layer(w, i)
        qkv, gu = ((fused[0],), (fused[1],)) if fused else ((lw.W_q, lw.W_k, lw.W_v), (lw.W_gate, lw.W_up))
        mats += [*qkv, lw.W_o, *gu, lw.W_down]
    return mats + [w.W_E.T if w.W_out is None else w.W_out]


def fused_layer(w, i: int):  # -> (W_qkv [d, (h + 2h_kv)·d_h], W_gate_up [d, 2·d_ff]) or None
    """Layer i's fused matrices, where the loader stored them fused (`fuse_columns`) and the layer's
    matrices are still their column views; else None (a matrix replaced after loading breaks the link,
    and then the separate ones are read). Found from the arrays themselves: the weights carry no field
    for the fast path."""
    lw = w.layers[i]
    qkv, gu = joined_columns(lw.W_q, lw.W_k, lw.W_v), joined_columns(lw.W_gate, lw.W_up)
    return (qkv, gu) if qkv is not None and gu is not None else None


def joined_columns(*Ws):  # k × [d_in, d_j] -> [d_in, Σ d_j] or None
    """The matrix [W_1 | W_2 | …] whose consecutive column views the W_j are, or None where they are not:
    each W_j a view of one C-ordered base of exactly Σ d_j columns, starting where the one before ends."""
    base = getattr(Ws[0], "base", None)
    if not isinstance(base, np.ndarray) or base.ndim != 2 or not base.flags.c_contiguous:
        return None
    if base.shape != (Ws[0].shape[0], sum(W.shape[1] for W in Ws)):
        return None
    start, item = base.__array_interface__["data"][0], base.itemsize
    edges = np.cumsum([0] + [W.shape[1] for W in Ws])
    for W, e in zip(Ws, edges[:-1]):
        if W.base is not base or W.__array_interface__["data"][0] != start + int(e) * item or W.strides != base.strides:
            return None
    return base


def half_to_interleaved_columns(W, heads: int, d_h: int):  # [d, heads·d_h] -> [d, heads·d_h], a copy
    """Each head's columns reordered from the rotate-half layout to interleaved pairs: W[:, p⁻¹] per head.

    Why it is exact: `interleaved_to_half_permutation` gives p with apply_rope_half(x[p]) =
    apply_rope_interleaved(x)[p]. With W' = W[:, p⁻¹], q' = a W' = q[p⁻¹], whose interleaved rotation is
    the half rotation of q, permuted by p⁻¹; the same for k, and q·k does not change when both vectors
    are permuted alike. So the complex-pair RoPE below serves both layouts."""
    return np.take(W, half_to_interleaved_order(heads, d_h), axis=1)


def half_to_interleaved_order(heads: int, d_h: int):  # -> [heads·d_h] column indices
    """The column order `half_to_interleaved_columns` takes: p⁻¹ within each head, p =
    `interleaved_to_half_permutation(d_h)` (also the GPU decode step's, decode_plan.device_matrices)."""
    inverse = np.argsort(interleaved_to_half_permutation(d_h))  # p⁻¹
    return (np.arange(heads)[:, None] * d_h + inverse[None, :]).reshape(-1)  # [heads·d_h]


class Buffers:
    """The arrays one pass of n new tokens for b sequences writes, made once, and views into them."""

    def __init__(self, cfg, b: int, n: int, dtype):
        h, h_kv, d_h, d, d_ff = cfg.h, cfg.h_kv, cfg.d_h, cfg.d, cfg.d_ff
        qd, kvd, g = h * d_h, h_kv * d_h, h // h_kv

        def buf(*shape):  # -> [shape], written before it is read
            return np.empty(shape, dtype=dtype)

        self.x, self.xn, self.y = buf(b, n, d), buf(b, n, d), buf(b, n, d)  # residual stream, its RMSNorm, a sublayer
        self.ms = buf(b, n, 1)  # mean square of each row
        self.qkv, self.o = buf(b, n, qd + 2 * kvd), buf(b, n, qd)  # [q | k | v] of the new tokens; attention output
        self.gu, self.a = buf(b, n, 2 * d_ff), buf(b, n, d_ff)  # [gate | up]; SwiGLU's hidden activation
        # views (copy=False: a reshape that would copy raises instead of silently writing elsewhere)
        cdt = np.result_type(dtype, np.complex64)  # complex of the model's float width
        self.qk = np.reshape(self.qkv[..., :qd + kvd].view(cdt), (b, n, h + h_kv, d_h // 2), copy=False)  # as complex
        self.q = np.reshape(self.qkv[..., :qd], (b, n, h_kv, g, d_h), copy=False)  # queries grouped by KV head
        self.k = np.reshape(self.qkv[..., qd:qd + kvd], (b, n, h_kv, d_h), copy=False)
        self.v = np.reshape(self.qkv[..., qd + kvd:], (b, n, h_kv, d_h), copy=False)
        self.o5 = np.reshape(self.o, (b, n, h_kv, g, d_h), copy=False)  # merged heads = the groups in order
        self.gate, self.up = self.gu[..., :d_ff], self.gu[..., d_ff:]
        self.logits = buf(b, cfg.v)  # the last position's


def rms_norm_into(x, gamma, eps: float, out, ms):  # [..., d], [d] -> out [..., d] (ms [..., 1] scratch)
    """out = x / √(mean(x²) + eps) · γ, as core.layers.rms_norm, written into out."""
    np.multiply(x, x, out=out)
    np.add.reduce(out, axis=-1, keepdims=True, out=ms)  # [..., 1]
    ms /= x.shape[-1]
    ms += eps
    np.sqrt(ms, out=ms)
    np.divide(x, ms, out=out)
    out *= gamma


class FastForward:
    """`llama.forward` through a KVCache, in buffers made once per shape (b sequences × n new tokens).

    Called with ids (b, n), it writes the new tokens' keys and values at the cache's slots
    t … t + n − 1 (t = cache.length), advances the cache and returns the logits of the last
    position (b, v), or of every position (b, n, v) with last_only=False: a buffer, overwritten
    by the next call of the same shape. n = 1 is a decode step; n > 1 a prefill pass, causal within
    the new tokens. NumPy arrays and the contiguous `KVCache` only (`applies`). `fused=False`
    reads the separate matrices even where fused ones exist (to measure what fusing buys). With
    rope_layout="half" the cache holds each key head's features in the reordered order: a cache only
    this engine writes and reads (the loop runs one engine per generation).
    """

    def __init__(self, w, cfg, *, fused: bool = True):
        h, h_kv, d_h = cfg.h, cfg.h_kv, cfg.d_h
        qd, kvd = h * d_h, h_kv * d_h
        self.cfg, self.dtype, self.buffers = cfg, w.W_E.dtype, {}  # (b, n) -> Buffers
        self.W_E, self.norm = w.W_E, w.norm
        self.W_head = w.W_E.T if w.W_out is None else w.W_out  # [d, v]
        # per head, the factor on its RoPE turn: 1/√d_h for queries (the score scale), 1 for keys
        self.head_scale = np.array([d_h ** -0.5] * h + [1.0] * h_kv, dtype=self.dtype)[:, None]  # [h + h_kv, 1]
        self.layers = []  # per layer: the norms, and each product as (matrix, the columns of the buffer it fills)
        half = cfg.rope_layout == "half"  # RoPE on pairs (i, i + d_h/2): W_q and W_k reordered to adjacent pairs
        for i, lw in enumerate(w.layers):
            fz = fused_layer(w, i) if fused and not half else None
            W_q, W_k = ((half_to_interleaved_columns(lw.W_q, h, d_h), half_to_interleaved_columns(lw.W_k, h_kv, d_h))
                        if half else (lw.W_q, lw.W_k))
            qkv = [(fz[0], slice(None))] if fz else [(W_q, slice(0, qd)), (W_k, slice(qd, qd + kvd)),
                                                     (lw.W_v, slice(qd + kvd, None))]
            gu = [(fz[1], slice(None))] if fz else [(lw.W_gate, slice(0, cfg.d_ff)), (lw.W_up, slice(cfg.d_ff, None))]
            self.layers.append((lw.attn_norm, qkv, lw.W_o, lw.ffn_norm, gu, lw.W_down))

    @staticmethod
    def applies(w, cache) -> bool:
        """NumPy weights in float32 or float64 and the contiguous KVCache: what this class is written for (its
        RoPE views pairs of floats as complex numbers, which float16 has no NumPy type for)."""
        return (type(cache) is KVCache and isinstance(w.W_E, np.ndarray) and isinstance(cache.k[0], np.ndarray)
                and w.W_E.dtype in (np.float32, np.float64))

    @classmethod
    def for_model(cls, model, cache):  # Llama, cache -> FastForward or None
        """The fast pass for `model` and `cache`, or None where it does not apply (CuPy, a paged
        cache) or where `model.fast_path` is False: then `llama.forward` runs."""
        fast = model.fast_path and cache is not None and cls.applies(model.weights, cache)
        return cls(model.weights, model.config) if fast else None

    @staticmethod
    def attend(q, K, V, hide=None, empty_rows: bool = False):
        # [b, h_kv, g·n, d_h], 2 × [b, h_kv, n_k, d_h] -> [b, h_kv, g·n, d_h]
        """softmax(q Kᵀ + hide) V for the g·n queries that share each key/value head, q already scaled
        by 1/√d_h: one product per head against its keys, K and V never repeated (GQA as one matmul).
        hide: (b or 1, 1, 1, n, n_k) of 0 or -inf (the mask as a bias). empty_rows: some query sees
        no key at all (left padding): its weights are 0, as in core.attention.softmax, never NaN."""
        s = np.matmul(q, K.swapaxes(-1, -2))  # [b, h_kv, g·n, n_k]
        if hide is not None:
            b, h_kv, gn, n_k = s.shape
            np.reshape(s, (b, h_kv, gn // hide.shape[-2], hide.shape[-2], n_k), copy=False)[...] += hide
        m = np.maximum.reduce(s, axis=-1, keepdims=True)  # [b, h_kv, g·n, 1] row max
        if empty_rows:
            m[m == -np.inf] = 0.0
        s -= m
        np.exp(s, out=s)
        z = np.add.reduce(s, axis=-1, keepdims=True)  # [b, h_kv, g·n, 1]
        if empty_rows:
            z[z == 0] = 1.0
        s /= z
        return np.matmul(s, V)  # [b, h_kv, g·n, d_h]

    @checked_by(checks.fast_forward_call)
    def __call__(self, ids, cache: KVCache, cos, sin, positions, key_valid=None, *, last_only: bool = True):
        # [b, n] int, cache, 2 × [rows, d_h/2], [b, n] int, [b, t + n] bool -> [b, v] (or [b, n, v])
        """ids (b, n) at positions (b, n) after the cache's t tokens; key_valid (b, t + n) is False
        where a key is left padding (None: no padding)."""
        cfg, (b, n), t = self.cfg, ids.shape, cache.length
        h_kv, g, d_h = cfg.h_kv, cfg.h // cfg.h_kv, cfg.d_h
        B = self.buffers.get((b, n)) or self.buffers.setdefault((b, n), Buffers(cfg, b, n, self.dtype))
        x, xn, y, ms, o, a = B.x, B.xn, B.y, B.ms, B.o, B.a
        np.take(self.W_E, ids, axis=0, out=x)  # embedding: [b, n, d]
        # RoPE at each token's position: e^{iθ}, one complex number per pair, times the head's scale
        turn = (cos[positions] + 1j * sin[positions]).astype(B.qk.dtype)  # [b, n, d_h/2]
        turn = turn[:, :, None, :] * self.head_scale  # [b, n, h + h_kv, d_h/2]
        # the mask as a bias on the scores (0 or -inf): causal among the new tokens, padded keys hidden
        hide = None
        if n > 1 or (key_valid is not None and not key_valid.all()):
            see = np.arange(t + n)[None, :] <= t + np.arange(n)[:, None]  # [n, t + n] causal
            see = see[None] if key_valid is None else see[None] & key_valid[:, None, :]  # [b or 1, n, t + n]
            hide = np.where(see, self.dtype.type(0), self.dtype.type(-np.inf))[:, None, None]  # [b|1, 1, 1, n, t + n]
        empty_rows = hide is not None and key_valid is not None and n > 1  # a query of padding may see no key
        for layer, (g1, qkv_mats, W_o, g2, gu_mats, W_down) in enumerate(self.layers):
            # attention: project (one product when fused), RoPE, store the new keys and values
            rms_norm_into(x, g1, cfg.eps, xn, ms)
            for W, cols in qkv_mats:
                np.matmul(xn, W, out=B.qkv[..., cols])  # [b, n, d] @ [d, ·] -> [b, n, ·]
            np.multiply(B.qk, turn, out=B.qk)  # q and k turned, q scaled by 1/√d_h
            K, V = cache.update(layer, B.k.swapaxes(1, 2), B.v.swapaxes(1, 2))  # [b, h_kv, t + n, d_h]
            # GQA: each KV head's g·n queries against its t + n keys
            q = np.reshape(B.q.transpose(0, 2, 3, 1, 4), (b, h_kv, g * n, d_h))  # a view when n = 1, else a copy
            pv = self.attend(q, K, V, hide, empty_rows)  # [b, h_kv, g·n, d_h]
            np.copyto(B.o5, np.reshape(pv, (b, h_kv, g, n, d_h)).transpose(0, 3, 1, 2, 4))  # o [b, n, h·d_h]
            np.matmul(o, W_o, out=y)  # [b, n, d]
            x += y  # residual
            # SwiGLU: silu(x W_gate) ⊙ (x W_up), then W_down; silu(g) = g · σ(g), σ(g) = 1 / (1 + e^{-g})
            rms_norm_into(x, g2, cfg.eps, xn, ms)
            for W, cols in gu_mats:
                np.matmul(xn, W, out=B.gu[..., cols])  # [b, n, d] @ [d, ·] -> [b, n, ·]
            np.negative(B.gate, out=a)
            np.exp(a, out=a)
            a += 1.0
            np.divide(1.0, a, out=a)  # σ(gate)
            a *= B.gate
            a *= B.up
            np.matmul(a, W_down, out=y)  # [b, n, d_ff] @ [d_ff, d] -> [b, n, d]
            x += y  # residual
        cache.advance(n)
        if last_only:  # the final RMSNorm and the LM head on the last position only
            x, xn, ms = x[:, -1], xn[:, -1], ms[:, -1]  # [b, d]
        rms_norm_into(x, self.norm, cfg.eps, xn, ms)
        return np.matmul(xn, self.W_head, out=B.logits) if last_only else xn @ self.W_head  # [b, v] or [b, n, v]
