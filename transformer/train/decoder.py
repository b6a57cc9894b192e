"""A tiny trainable decoder: a forward pass that keeps what its backward needs, and the backward.

    ids (b, n) --embed--> x (b, n, d)
    L × [ a = RMSNorm(x)
          q, k, v = RoPE(a W_q), RoPE(a W_k), a W_v        GQA: h query heads, h_kv key/value heads
          x = x + Attention(q, k, v) W_o                   causal, and same-document for packed rows;
                                                           training: dropout on the weights P (cfg.dropout)
          x = x + SwiGLU(RMSNorm(x)) ]
    RMSNorm --tied LM head: x W_Eᵀ--> logits (b, n, v)

SmolLM2's architecture (models/llama.py), with RoPE in the rotate-half layout, written as pure
functions of a dict of named weights so that an optimizer can update them in place. The backward
pass walks the same steps in reverse, each through the core's `*_backward` beside its forward;
the arrays the forward keeps for it (`saved`) are the model's activation memory, counted by
`activation_bytes`. With attention="tiled" the forward is FlashAttention's and the backward
rebuilds the weights tile by tile from the saved row log-sum-exp, so no n × n array is kept.

The door of each public function checks its inputs once (`decoder_checks.py`); the core's formulas it
calls inside are trusted (require.checked_by skips their checks), as in models/llama.py: the shapes were
checked at the door, and a check per call would cost as much as a small model's maths.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import decoder_checks
from ..backend import get_xp, namespace
from ..require import checked_by
from ..core.attention import (attention_scores, dropout, dropout_backward, repeat_kv, repeat_kv_backward,
                              scaled_dot_product_attention, scaled_dot_product_attention_backward, softmax,
                              softmax_backward)
from ..core.embedding import embed, embed_backward, lm_head_backward
from ..core.heads import merge_heads, merge_heads_backward, split_heads, split_heads_backward
from ..core.layers import linear_backward, rms_norm, rms_norm_backward, swiglu_ffn, swiglu_ffn_backward
from ..core.loss import cross_entropy, cross_entropy_backward
from ..core.masks import causal_mask, document_mask
from ..core.positions import apply_rope_half, apply_rope_half_backward, rope_cos_sin
from ..flash.backward import flash_attention_backward
from ..flash.tiled import flash_attention

__all__ = ["DecoderConfig", "init_decoder", "decoder_forward", "decoder_backward",
           "decoder_loss_and_grads", "activation_bytes"]

INIT_STD = 0.02  # GPT-2's initialisation: N(0, 0.02²) for every matrix


@dataclass(frozen=True)
class DecoderConfig:
    """The legend of names: every size of the model.   d_h = d / h."""
    v: int  # vocabulary size
    d: int  # model width, d_model
    h: int  # query heads
    h_kv: int  # key/value heads: h_kv = h is MHA, 1 < h_kv < h GQA, h_kv = 1 MQA
    L: int  # layers (decoder blocks)
    d_ff: int  # SwiGLU hidden width
    n_max: int  # the longest sequence (positions 0 … n_max − 1)
    rope_base: float = 10000.0  # RoPE: pair i turns by m · base^(−2i/d_h)
    eps: float = 1e-5  # RMSNorm epsilon
    tied: bool = True  # LM head = embedding table transposed; False adds W_out (d, v)
    dropout: float = 0.0  # attention-weight dropout p, in training only (0: none, as every run here)

    def __post_init__(self):
        decoder_checks.decoder_config(self)
        for f in ("v", "d", "h", "h_kv", "L", "d_ff", "n_max"):
            object.__setattr__(self, f, int(getattr(self, f)))  # NumPy integers become plain numbers
        object.__setattr__(self, "rope_base", float(self.rope_base))
        object.__setattr__(self, "eps", float(self.eps))
        object.__setattr__(self, "dropout", float(self.dropout))

    @property
    def d_h(self) -> int:
        return self.d // self.h

    def parameter_shapes(self) -> dict:  # name -> shape, in the order init_decoder draws them
        """Every weight's name and shape: "W_E", then per layer "layers.{l}.norm1", "layers.{l}.W_q",
        "W_k", "W_v", "W_o", "norm2", "W_gate", "W_up", "W_down", then the final "norm" (and "W_out")."""
        d, hd, kvd = self.d, self.h * self.d_h, self.h_kv * self.d_h
        shapes = {"W_E": (self.v, d)}
        for l in range(self.L):
            shapes.update({f"layers.{l}.{k}": s for k, s in (
                ("norm1", (d,)), ("W_q", (d, hd)), ("W_k", (d, kvd)), ("W_v", (d, kvd)), ("W_o", (hd, d)),
                ("norm2", (d,)), ("W_gate", (d, self.d_ff)), ("W_up", (d, self.d_ff)), ("W_down", (self.d_ff, d)))})
        shapes["norm"] = (d,)
        if not self.tied:
            shapes["W_out"] = (d, self.v)
        return shapes


@checked_by(decoder_checks.init_decoder)
def init_decoder(cfg: DecoderConfig, seed: int = 0, *, dtype="float32", xp=None) -> dict:
    """Weights drawn as GPT-2 draws them: matrices N(0, 0.02²), the two projections that write into
    the residual stream (W_o, W_down) N(0, (0.02/√(2L))²) so that the stream's variance does not
    grow with the 2L additions, norms' gains 1. Drawn on the host with
    np.random.default_rng(seed), in the order of `cfg.parameter_shapes()`, then moved to xp.
    """
    xp = namespace(xp)
    rng = np.random.default_rng(seed)
    params = {}
    for name, shape in cfg.parameter_shapes().items():
        kind = name.rsplit(".", 1)[-1]
        if kind.startswith("norm"):
            w = np.ones(shape)  # [d]
        else:
            std = INIT_STD / math.sqrt(2 * cfg.L) if kind in ("W_o", "W_down") else INIT_STD
            w = rng.standard_normal(shape) * std
        params[name] = xp.asarray(w.astype(dtype))
    return params


def _layer(params, l):  # -> this layer's weights without the "layers.{l}." prefix
    pre = f"layers.{l}."
    return {k[len(pre):]: w for k, w in params.items() if k.startswith(pre)}


def _rope_tables(positions, cfg, dtype):  # [b, n] -> cos, sin [b, 1, n, d_h/2]
    xp = get_xp(positions)
    b, n = positions.shape
    cos, sin = rope_cos_sin(xp.reshape(positions, (-1,)), cfg.d_h, cfg.rope_base, dtype)  # [b·n, d_h/2]
    return xp.reshape(cos, (b, 1, n, cfg.d_h // 2)), xp.reshape(sin, (b, 1, n, cfg.d_h // 2))


def _qkv(a, p, cfg, cos, sin):  # [b, n, d] -> q [b, h, n, d_h], k, v [b, h_kv, n, d_h]
    """Project, split into heads, and rotate q and k by their positions (RoPE)."""
    q = apply_rope_half(split_heads(a @ p["W_q"], cfg.h), cos, sin)  # [b, h, n, d_h]
    k = apply_rope_half(split_heads(a @ p["W_k"], cfg.h_kv), cos, sin)  # [b, h_kv, n, d_h]
    v = split_heads(a @ p["W_v"], cfg.h_kv)  # [b, h_kv, n, d_h]
    return q, k, v


@checked_by(decoder_checks.decoder_forward)
def decoder_forward(params: dict, ids, cfg: DecoderConfig, *, positions=None, doc_ids=None, attention="plain",
                    block_q=None, block_k=None, training=False, rng=None):  # [b, n] int -> logits [b, n, v], saved
    """The model on ids (b, n), keeping the activations its backward needs.

    positions: (b, n) RoPE positions (default 0 … n − 1 in every row; packed rows restart them).
    doc_ids: (b, n) document index of each token of packed rows (−1 = padding): a token sees only
    earlier tokens of its own document (`document_mask`). attention: "plain" keeps the weights P
    (b, h, n, n) of every layer; "tiled" runs FlashAttention (block_q × block_k tiles) and keeps
    only each row's log-sum-exp (b, h, n).
    training, rng: with cfg.dropout = p > 0 and training=True, each layer's weights P are dropped
    out before P V (`dropout`, keep-masks drawn from rng: a np.random.Generator or a seed) and the
    keep-masks are saved; training=False (the default: evaluation, generation) never drops.

    saved (the activation memory; `activation_bytes` is its formula):
      "ids", "cos", "sin" (and "doc" when tiled and packed)    for the embedding and RoPE backward
      per layer "layers.{l}.":
        "x"  block input        (RMSNorm 1 backward)        "a"  RMSNorm 1 output   (W_q, W_k, W_v)
        "q", "k", "v"  after RoPE (attention backward)      "o"  attention output   (W_o; tiled: D)
        "P"  weights (plain) or "lse" (tiled)               "x_mid" after the attention residual
        "keep"  the dropout keep-mask of P (training with cfg.dropout > 0 only)
        "f"  RMSNorm 2 output   (SwiGLU backward, which recomputes its d_ff-wide hidden from f)
      "x_final" (final RMSNorm backward), "h" its output (LM head backward).
    """
    xp = get_xp(params["W_E"])
    dtype = params["W_E"].dtype
    b, n = ids.shape
    ids = xp.astype(ids, xp.int64)
    if positions is None:
        positions = xp.broadcast_to(xp.arange(n)[None, :], (b, n))  # [b, n]
    cos, sin = _rope_tables(positions, cfg, dtype)  # [b, 1, n, d_h/2] each
    saved = {"ids": ids, "cos": cos, "sin": sin}
    doc = None if doc_ids is None else xp.astype(doc_ids, xp.int64)  # [b, n]
    if attention == "tiled" and doc is not None:
        saved["doc"] = doc  # the tiled backward rebuilds the mask of each tile from it
    mask = None  # tiled: each tile builds its own part of the mask
    if attention == "plain":  # [n, n] or [b, 1, n, n]: causal, and a token sees only its own document
        mask = causal_mask(n, xp=xp) if doc is None else document_mask(doc, causal=True)
    drop = training and cfg.dropout > 0
    draw = (rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)) if drop else None
    x = embed(ids, params["W_E"])  # [b, n, d]
    for l in range(cfg.L):
        p, s = _layer(params, l), {}
        s["x"] = x
        s["a"] = a = rms_norm(x, p["norm1"], cfg.eps)  # [b, n, d]
        s["q"], s["k"], s["v"] = q, k, v = _qkv(a, p, cfg, cos, sin)
        if drop:  # attention-weight dropout: O = dropout(P) V, as the Annotated Transformer and nanoGPT do
            s["o"], s["P"], s["keep"] = _attention_dropout(q, k, v, mask, cfg.dropout, draw)
        elif attention == "plain":  # GQA inside: query head i reads key/value head i // (h / h_kv)
            s["o"], s["P"] = scaled_dot_product_attention(q, k, v, mask, return_weights=True)
        else:  # [b, h, n, d_h], [b, h, n]
            s["o"], s["lse"] = flash_attention(q, k, v, causal=True, doc=doc, return_lse=True,
                                               block_q=block_q, block_k=block_k)
        s["x_mid"] = x = x + merge_heads(s["o"]) @ p["W_o"]  # [b, n, d] residual
        s["f"] = f = rms_norm(x, p["norm2"], cfg.eps)  # [b, n, d]
        x = x + swiglu_ffn(f, p["W_gate"], p["W_up"], p["W_down"])  # [b, n, d] residual
        saved.update({f"layers.{l}.{k}": t for k, t in s.items()})
    saved["x_final"] = x
    saved["h"] = hN = rms_norm(x, params["norm"], cfg.eps)  # [b, n, d]
    logits = hN @ (params["W_E"].mT if cfg.tied else params["W_out"])  # [b, n, v]
    return logits, saved


def _attention_dropout(q, k, v, mask, p, rng):  # q [b, h, n, d_h], k, v [b, h_kv, n, d_h] -> o, P, keep
    """scaled_dot_product_attention with dropout on its weights: P = softmax(q kᵀ/√d_h + mask),
    P̃ = dropout(P), o = P̃ V. Keeps P (for the softmax backward) and the keep-mask (for P̃)."""
    n_rep = q.shape[1] // k.shape[1]
    K, V = repeat_kv(k, n_rep), repeat_kv(v, n_rep)  # GQA: [b, h, n, d_h]
    P = softmax(attention_scores(q, K), mask=mask)  # [b, h, n, n]
    P_drop, keep = dropout(P, p, rng=rng)  # [b, h, n, n], kept weights scaled by 1/(1 − p)
    return P_drop @ V, P, keep  # [b, h, n, d_h]


def _attention_dropout_backward(do, q, k, v, P, keep, p):  # [b, h, n, d_h] -> dq, dk, dv
    """The attention backward with P̃ = dropout(P) between the softmax and V:

        dV = P̃ᵀ dO,   dP̃ = dO Vᵀ,   dP = dropout_backward(dP̃) = dP̃ ∘ keep / (1 − p)
        dS = P ∘ (dP − rowsum(dP ∘ P)),   dQ = dS K / √d_h,   dK = dSᵀ Q / √d_h
    (scaled_dot_product_attention_backward's lines, with the dropout's transpose added)."""
    n_rep = q.shape[1] // k.shape[1]
    scale = 1.0 / math.sqrt(q.shape[-1])
    K, V = repeat_kv(k, n_rep), repeat_kv(v, n_rep)  # [b, h, n, d_h]
    dV = dropout(P, p, mask=keep)[0].mT @ do  # P̃ rebuilt from P and the mask: [b, h, n, d_h]
    dS = softmax_backward(dropout_backward(do @ V.mT, keep, p), P)  # [b, h, n, n]
    dq = (dS @ K) * scale  # [b, h, n, d_h]
    dK = (dS.mT @ q) * scale
    return dq, repeat_kv_backward(dK, n_rep), repeat_kv_backward(dV, n_rep)


def _block_backward(dx, p, s, cfg, cos, sin, doc, block_q, block_k):  # [b, n, d] -> [b, n, d], grads
    """One pre-norm block in reverse. Residual: the gradient of x + F(x) is dx + (∂F/∂x)ᵀ dx, so
    each sub-block's backward adds its part to the dx that flows past it unchanged."""
    g = {}
    # FFN sub-block: x_out = x_mid + SwiGLU(RMSNorm(x_mid))
    df, g["W_gate"], g["W_up"], g["W_down"] = swiglu_ffn_backward(dx, s["f"], p["W_gate"], p["W_up"],
                                                                  p["W_down"])  # df [b, n, d]
    dx_mid, g["norm2"] = rms_norm_backward(df, s["x_mid"], p["norm2"], cfg.eps)
    dx = dx + dx_mid  # [b, n, d]
    # attention sub-block: x_mid = x + merge(o) W_o
    dz, g["W_o"], _ = linear_backward(dx, merge_heads(s["o"]), p["W_o"])  # dz [b, n, h·d_h]
    do = merge_heads_backward(dz, cfg.h)  # [b, h, n, d_h]
    if "keep" in s:  # the forward dropped out attention weights
        dq, dk, dv = _attention_dropout_backward(do, s["q"], s["k"], s["v"], s["P"], s["keep"], cfg.dropout)
    elif "P" in s:  # dq [b, h, n, d_h], dk, dv [b, h_kv, n, d_h]
        dq, dk, dv = scaled_dot_product_attention_backward(do, s["q"], s["k"], s["v"], s["P"])
    else:
        dq, dk, dv = flash_attention_backward(do, s["q"], s["k"], s["v"], s["o"], s["lse"], causal=True,
                                              doc=doc, block_q=block_q, block_k=block_k)
    dq = apply_rope_half_backward(dq, cos, sin)  # RoPE's transpose: the rotation by −θ
    dk = apply_rope_half_backward(dk, cos, sin)
    da = 0.0
    for name, dH in (("W_q", dq), ("W_k", dk), ("W_v", dv)):  # a feeds three projections: their dA add
        dA, g[name], _ = linear_backward(split_heads_backward(dH), s["a"], p[name])
        da = da + dA  # [b, n, d]
    dx_attn, g["norm1"] = rms_norm_backward(da, s["x"], p["norm1"], cfg.eps)
    return dx + dx_attn, g


@checked_by(decoder_checks.decoder_backward)
def decoder_backward(d_logits, saved: dict, params: dict, cfg: DecoderConfig, *, block_q=None, block_k=None):
    # [b, n, v] -> grads: name -> array, the keys and shapes of params
    """∂loss/∂(every weight) from ∂loss/∂logits and the saved activations, last layer first.
    With tied weights W_E gets two terms, the LM head's and the embedding's."""
    grads = {}
    if cfg.tied:  # logits = h W_Eᵀ
        dh, dW_head = lm_head_backward(d_logits, saved["h"], params["W_E"])  # [b, n, d], [v, d]
    else:  # logits = h W_out
        dh, grads["W_out"], _ = linear_backward(d_logits, saved["h"], params["W_out"])
    dx, grads["norm"] = rms_norm_backward(dh, saved["x_final"], params["norm"], cfg.eps)  # [b, n, d]
    for l in reversed(range(cfg.L)):
        s = {k.split(".", 2)[2]: t for k, t in saved.items() if k.startswith(f"layers.{l}.")}
        dx, g = _block_backward(dx, _layer(params, l), s, cfg, saved["cos"], saved["sin"], saved.get("doc"),
                                block_q, block_k)
        grads.update({f"layers.{l}.{k}": t for k, t in g.items()})
    dW_E = embed_backward(dx, saved["ids"], cfg.v)  # [v, d] scatter-add over the ids
    grads["W_E"] = dW_E + dW_head if cfg.tied else dW_E
    return {k: grads[k] for k in params}


@checked_by(decoder_checks.decoder_loss_and_grads)
def decoder_loss_and_grads(params: dict, ids, targets, cfg: DecoderConfig, *, positions=None, doc_ids=None,
                           attention="plain", block_q=None, block_k=None, training=False,
                           rng=None):  # [b, n] ×2 -> float, grads
    """Mean next-token cross-entropy over the targets that are not −100, and its gradients.
    The options are decoder_forward's."""
    logits, saved = decoder_forward(params, ids, cfg, positions=positions, doc_ids=doc_ids, attention=attention,
                                    block_q=block_q, block_k=block_k, training=training, rng=rng)  # [b, n, v]
    loss = cross_entropy(logits, targets)
    d_logits = cross_entropy_backward(logits, targets)  # [b, n, v]
    return float(loss), decoder_backward(d_logits, saved, params, cfg, block_q=block_q, block_k=block_k)


@checked_by(decoder_checks.activation_bytes)
def activation_bytes(cfg: DecoderConfig, b: int, n: int, *, attention="plain", packed=False, itemsize=4) -> int:
    """Bytes of `saved`, the activations decoder_forward keeps for the backward pass:

        per layer: 4·b·n·d (x, a, x_mid, f) + 2·b·h·n·d_h (q, o) + 2·b·h_kv·n·d_h (k, v)
                   + b·h·n² (plain: the weights P)   or   b·h·n (tiled: the log-sum-exp)
        once:      2·b·n·d (x_final, h) + b·n·d_h (cos and sin) + 8·b·n (ids, int64)
                   + 8·b·n (tiled and packed: the document ids)
    times itemsize bytes for the floats. The n² term is the only one that grows faster than n:
    the tiled backward keeps O(n) per head instead. (Training with cfg.dropout > 0 keeps besides
    each layer's keep-mask of P, b·h·n² booleans: not counted here.)
    """
    d, h, h_kv, d_h = cfg.d, cfg.h, cfg.h_kv, cfg.d_h
    weights = b * h * n * n if attention == "plain" else b * h * n  # P or lse
    per_layer = 4 * b * n * d + 2 * b * h * n * d_h + 2 * b * h_kv * n * d_h + weights
    once = 2 * b * n * d + b * n * d_h
    ints = 8 * b * n * (2 if attention == "tiled" and packed else 1)
    return (cfg.L * per_layer + once) * itemsize + ints
