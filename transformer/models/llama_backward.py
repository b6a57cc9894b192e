"""The backward pass of llama.py's forward: the same steps in reverse, each through the core's `*_backward`.

    forward (llama.forward, decoder_block, attention_block)     backward (here), last step first
    x = embed(ids, W_E)                                         embed_backward (+ the LM head's dW_E when tied)
    L × [ a = RMSNorm(x)                                        decoder_block_backward, last layer first:
          q, k, v = RoPE(a W_q), RoPE(a W_k), a W_v               linear_backward ×3, RoPE's transpose
          o, kept = attention(q, k, v, mask)                      attention_backward (passed in, as attention was)
          x_mid = x + merge(o) W_o                                linear_backward, merge_heads_backward
          f = RMSNorm(x_mid);  x = x_mid + SwiGLU(f) ]            swiglu_ffn_backward, rms_norm_backward
    h = RMSNorm(x);  logits = h W_Eᵀ (tied) or h W_out          rms_norm_backward, lm_head_backward

A residual x + F(x) passes its gradient dx by unchanged and into F: each sub-block's backward adds
its part, dx + (∂F/∂x)ᵀ dx. What each step reads is what `forward(..., saved=)` kept (the names
are forward's), and the gradients come back with the weights' structure, a `LlamaWeights` of
arrays of the weights' shapes. The attention's backward is passed in as its forward was:
`softmax_attention_backward` reads the saved weights P, `dropout_attention_backward` also the
keep-mask; train/ passes FlashAttention's, which rebuilds P tile by tile from the row log-sum-exp.
"""
from __future__ import annotations

import math

from . import llama_backward_checks as checks
from .llama import LayerWeights, LlamaConfig, LlamaWeights
from ..core.attention import (dropout, dropout_backward, repeat_kv, repeat_kv_backward,
                              scaled_dot_product_attention_backward, softmax_backward)
from ..core.embedding import embed_backward, lm_head_backward
from ..core.heads import merge_heads, merge_heads_backward, split_heads_backward
from ..core.layers import linear_backward, rms_norm_backward, swiglu_ffn_backward
from ..core.positions import apply_rope_half_backward, apply_rope_interleaved_backward
from ..require import checked_by

__all__ = ["softmax_attention_backward", "dropout_attention_backward", "attention_block_backward",
           "decoder_block_backward", "forward_backward"]


def softmax_attention_backward(do, q, k, v, o, kept):  # [b, h, n, d_h] -> dq [b, h, n, d_h], dk, dv [b, h_kv, n_k, d_h]
    """softmax_attention's backward, from the weights P it kept (`scaled_dot_product_attention_backward`)."""
    return scaled_dot_product_attention_backward(do, q, k, v, kept["P"])


def dropout_attention_backward(do, q, k, v, o, kept, *, p: float):  # [b, h, n, d_h] -> dq, dk, dv
    """dropout_attention's backward: scaled_dot_product_attention_backward's lines with the dropout's
    transpose between V and the softmax, from the weights P and the keep-mask it kept:

        dV = P̃ᵀ dO,   dP̃ = dO Vᵀ,   dP = dropout_backward(dP̃) = dP̃ ∘ keep / (1 − p)
        dS = P ∘ (dP − rowsum(dP ∘ P)),   dQ = dS K / √d_h,   dK = dSᵀ Q / √d_h
    """
    P, keep = kept["P"], kept["keep"]
    n_rep = q.shape[1] // k.shape[1]
    scale = 1.0 / math.sqrt(q.shape[-1])
    K, V = repeat_kv(k, n_rep), repeat_kv(v, n_rep)  # [b, h, n_k, d_h]
    dV = dropout(P, p, mask=keep)[0].mT @ do  # P̃ rebuilt from P and the mask: [b, h, n_k, d_h]
    dS = softmax_backward(dropout_backward(do @ V.mT, keep, p), P)  # [b, h, n, n_k]
    dq = (dS @ K) * scale  # [b, h, n, d_h]
    dK = (dS.mT @ q) * scale  # [b, h, n_k, d_h]
    return dq, repeat_kv_backward(dK, n_rep), repeat_kv_backward(dV, n_rep)


def attention_block_backward(d_out, lw: LayerWeights, cfg: LlamaConfig, s: dict, cos, sin,
                             attention_backward):  # [b, n, d] -> da [b, n, d], {"W_q", "W_k", "W_v", "W_o"}
    """attention_block in reverse: the output projection, the attention, RoPE (its transpose is the
    rotation by −θ), then the three projections of a, whose gradients add."""
    dz, dW_o, _ = linear_backward(d_out, merge_heads(s["o"]), lw.W_o)  # dz [b, n, h·d_h]
    do = merge_heads_backward(dz, cfg.h)  # [b, h, n, d_h]
    dq, dk, dv = attention_backward(do, s["q"], s["k"], s["v"], s["o"], s)  # [b, h, n, d_h], 2 × [b, h_kv, n, d_h]
    rope_backward = apply_rope_interleaved_backward if cfg.rope_layout == "interleaved" else apply_rope_half_backward
    dq = rope_backward(dq, cos, sin)  # [b, h, n, d_h]
    dk = rope_backward(dk, cos, sin)  # [b, h_kv, n, d_h]
    da, grads = 0.0, {"W_o": dW_o}
    for name, dH in (("W_q", dq), ("W_k", dk), ("W_v", dv)):  # a feeds three projections: their dA add
        dA, grads[name], _ = linear_backward(split_heads_backward(dH), s["a"], getattr(lw, name))
        da = da + dA  # [b, n, d]
    return da, grads


def decoder_block_backward(dx, lw: LayerWeights, cfg: LlamaConfig, s: dict, cos, sin,
                           attention_backward):  # [b, n, d] -> [b, n, d], LayerWeights of gradients
    """decoder_block in reverse, from the activations s it saved (x, a, q, k, v, o, what the attention
    kept, x_mid, f): the FFN sub-block, then the attention sub-block."""
    # FFN sub-block: x_out = x_mid + SwiGLU(RMSNorm(x_mid))
    df, dW_gate, dW_up, dW_down = swiglu_ffn_backward(dx, s["f"], lw.W_gate, lw.W_up, lw.W_down)  # df [b, n, d]
    dx_mid, d_ffn_norm = rms_norm_backward(df, s["x_mid"], lw.ffn_norm, cfg.eps)
    dx = dx + dx_mid  # [b, n, d]
    # attention sub-block: x_mid = x + Attention(RMSNorm(x))
    da, grads = attention_block_backward(dx, lw, cfg, s, cos, sin, attention_backward)  # da [b, n, d]
    dx_attn, d_attn_norm = rms_norm_backward(da, s["x"], lw.attn_norm, cfg.eps)
    return dx + dx_attn, LayerWeights(attn_norm=d_attn_norm, ffn_norm=d_ffn_norm, W_gate=dW_gate, W_up=dW_up,
                                      W_down=dW_down, **grads)


@checked_by(checks.forward_backward)
def forward_backward(d_logits, saved: dict, w: LlamaWeights, cfg: LlamaConfig, *,
                     attention_backward=softmax_attention_backward):  # [b, n, v] -> LlamaWeights of gradients
    """∂loss/∂(every weight) from ∂loss/∂logits and the activations `forward(..., saved=saved)` kept,
    last layer first. attention_backward(do, q, k, v, o, kept) -> dq, dk, dv is the backward of the
    attention the forward ran (kept: the layer's saved activations). Tied weights: W_E gets two terms,
    the LM head's and the embedding's."""
    if cfg.tied:  # logits = h W_Eᵀ
        dh, dW_head = lm_head_backward(d_logits, saved["h"], w.W_E)  # [b, n, d], [v, d]
        dW_out = None
    else:  # logits = h W_out
        dh, dW_out, _ = linear_backward(d_logits, saved["h"], w.W_out)  # [b, n, d], [d, v]
    dx, d_norm = rms_norm_backward(dh, saved["x_final"], w.norm, cfg.eps)  # [b, n, d]
    layers = [None] * len(w.layers)
    for l in reversed(range(len(w.layers))):
        s = {name.split(".", 2)[2]: t for name, t in saved.items() if name.startswith(f"layers.{l}.")}
        dx, layers[l] = decoder_block_backward(dx, w.layers[l], cfg, s, saved["cos"], saved["sin"],
                                               attention_backward)  # [b, n, d]
    dW_E = embed_backward(dx, saved["ids"], cfg.v)  # [v, d] scatter-add over the ids
    return LlamaWeights(W_E=dW_E + dW_head if cfg.tied else dW_E, layers=layers, norm=d_norm, W_out=dW_out)
