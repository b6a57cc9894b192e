"""The tiny trainable decoder: SmolLM2's architecture (models/llama.py) at the sizes of a DecoderConfig,
with its weights in a dict of named arrays that an optimizer updates in place.

    ids (b, n) --embed--> x (b, n, d)
    L × [ a = RMSNorm(x)
          q, k, v = RoPE(a W_q), RoPE(a W_k), a W_v        GQA: h query heads, h_kv key/value heads
          x = x + Attention(q, k, v) W_o                   causal, and same-document for packed rows;
                                                           training: dropout on the weights P (cfg.dropout)
          x = x + SwiGLU(RMSNorm(x)) ]
    RMSNorm --tied LM head: x W_Eᵀ--> logits (b, n, v)

The maths is not here: a DecoderConfig is a LlamaConfig (`cfg.llama_config`: d_h = d / h,
n_ctx = n_max, RoPE in the rotate-half layout of HF checkpoints) and the dict is a LlamaWeights of
the same arrays (`weights_from_params`), so `decoder_forward` is `llama.forward` keeping `saved`,
the activations its backward needs (the model's activation memory, counted by `activation_bytes`),
and `decoder_backward` is `llama_backward.forward_backward`, walking the same steps in reverse,
each through the core's `*_backward` beside its forward. What training adds is the attention it
passes in: the softmax keeping its weights P (with dropout in training), or with attention="tiled"
FlashAttention's tiled forward and backward (flash/), whose backward rebuilds the weights tile by
tile from the saved row log-sum-exp, so that no n × n array is kept.

The door of each public function checks its inputs once (`decoder_checks.py`); the formulas it calls
inside are trusted (require.checked_by skips their checks): a check per call would cost as much as a
small model's maths.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from . import decoder_checks
from ..backend import get_xp, namespace
from ..require import checked_by
from ..core.loss import cross_entropy, cross_entropy_backward
from ..core.masks import causal_mask, document_mask
from ..core.positions import rope_cos_sin
from ..flash.backward import flash_attention_backward
from ..flash.tiled import flash_attention
from ..models.llama import LlamaConfig, dropout_attention, forward, softmax_attention
from ..models.llama_backward import dropout_attention_backward, forward_backward, softmax_attention_backward
from ..models.llama_params import llama_config_of, params_from_weights, weights_from_params

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

    @functools.cached_property
    def llama_config(self) -> LlamaConfig:  # the same model as a LlamaConfig, made once
        return llama_config_of(self)

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


@functools.lru_cache(maxsize=16)
def rope_tables(n_max: int, d_h: int, base: float, dtype, xp):  # -> cos, sin [n_max, d_h/2]
    """RoPE's cos and sin of positions 0 … n_max − 1, made once per size, dtype and backend: a training
    run asks for them at every step, and `forward` takes the rows of each token's position."""
    return rope_cos_sin(xp.arange(n_max), d_h, base, dtype)


def tiled_attention(q, k, v, mask, *, doc=None, block_q=None, block_k=None):  # -> [b, h, n, d_h], {"lse"}
    """FlashAttention's tiled forward as the model's attention: causal, and same-document for packed rows
    (doc), each tile building its own part of the mask (mask: None); keeps each row's log-sum-exp (b, h, n)."""
    o, lse = flash_attention(q, k, v, causal=True, doc=doc, return_lse=True, block_q=block_q, block_k=block_k)
    return o, {"lse": lse}


def tiled_attention_backward(do, q, k, v, o, kept, *, doc=None, block_q=None, block_k=None):  # -> dq, dk, dv
    """Its backward: P rebuilt tile by tile from q, k and the saved log-sum-exp (flash/backward.py)."""
    return flash_attention_backward(do, q, k, v, o, kept["lse"], causal=True, doc=doc, block_q=block_q,
                                    block_k=block_k)


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
    b, n = ids.shape
    ids = xp.astype(ids, xp.int64)
    if positions is None:
        positions = xp.broadcast_to(xp.arange(n)[None, :], (b, n))  # [b, n]: RoPE's angles kept per row
    doc = None if doc_ids is None else xp.astype(doc_ids, xp.int64)  # [b, n]
    if attention == "tiled":  # FlashAttention: each tile builds its own part of the mask
        mask, attend = None, functools.partial(tiled_attention, doc=doc, block_q=block_q, block_k=block_k)
    else:  # [n, n] or [b, 1, n, n]: causal, and a token sees only its own document
        mask = causal_mask(n, xp=xp) if doc is None else document_mask(doc, causal=True)
        attend = softmax_attention  # GQA inside: query head i reads key/value head i // (h / h_kv)
        if training and cfg.dropout > 0:  # O = dropout(P) V, keep-masks drawn from one generator, layer by layer
            draw = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
            attend = functools.partial(dropout_attention, p=cfg.dropout, rng=draw)
    saved = {}
    cos, sin = rope_tables(cfg.n_max, cfg.d_h, cfg.rope_base, params["W_E"].dtype, xp)  # [n_max, d_h/2] each
    logits = forward(ids, weights_from_params(params, cfg.L), cfg.llama_config, cos, sin, positions=positions,
                     mask=mask, attention=attend, saved=saved)  # [b, n, v]
    if attention == "tiled" and doc is not None:
        saved["doc"] = doc  # the tiled backward rebuilds the mask of each tile from it
    return logits, saved


@checked_by(decoder_checks.decoder_backward)
def decoder_backward(d_logits, saved: dict, params: dict, cfg: DecoderConfig, *, block_q=None, block_k=None):
    # [b, n, v] -> grads: name -> array, the keys and shapes of params
    """∂loss/∂(every weight) from ∂loss/∂logits and the saved activations, last layer first
    (`llama_backward.forward_backward`), with the backward of the attention the forward ran.
    With tied weights W_E gets two terms, the LM head's and the embedding's."""
    if "layers.0.lse" in saved:  # FlashAttention's forward
        attention_backward = functools.partial(tiled_attention_backward, doc=saved.get("doc"), block_q=block_q,
                                               block_k=block_k)
    elif "layers.0.keep" in saved:  # the forward dropped out attention weights
        attention_backward = functools.partial(dropout_attention_backward, p=cfg.dropout)
    else:
        attention_backward = softmax_attention_backward
    grads = forward_backward(d_logits, saved, weights_from_params(params, cfg.L), cfg.llama_config,
                             attention_backward=attention_backward)  # LlamaWeights of gradients
    named = params_from_weights(grads)
    return {k: named[k] for k in params}


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
