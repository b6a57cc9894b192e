"""The original Transformer's encoder and decoder layers ("Attention Is All You Need", §3.1).

Both are post-norm: each sub-layer is wrapped as LayerNorm(x + Sublayer(x)).

    encoder layer, x (b, n_enc, d):
        x = LayerNorm(x + SelfAttention(x))            no mask: every source token sees every other
        x = LayerNorm(x + FFN(x))
    decoder layer, y (b, n_dec, d), encoder output z (b, n_enc, d):
        y = LayerNorm(y + SelfAttention(y, causal))    position i sees positions j ≤ i
        y = LayerNorm(y + CrossAttention(y, z))         Q = y W_q, K = z W_k, V = z W_v
        y = LayerNorm(y + FFN(y))

Cross-attention's weights are (b, h, n_dec, n_enc): not square. torch.nn.TransformerEncoderLayer
and TransformerDecoderLayer with norm_first=False compute the same layers (tests/test_encoder_decoder.py).
BERT's layer is the encoder layer with GELU for ReLU: MiniLM (bert.py) runs seq2seq_encoder_layer with
activation=gelu, eps=1e-12 on Seq2SeqEncoderLayer records (BertLayer is the same class).

Training runs these same layers (train/seq2seq.py): with `saved=` each keeps the activations its
backward needs (`encoder_decoder_backward.py`, beside it), and `encoder_decoder_params.py` reads a
trained weight dict's layers as Seq2SeqEncoderLayer / Seq2SeqDecoderLayer, the same arrays.

>>> import numpy as np, transformer as T
>>> rng = np.random.default_rng(0); d, h, d_ff = 8, 2, 16
>>> attn = lambda: T.AttentionWeights(*(rng.normal(size=(d, d)) / d ** 0.5 for _ in range(4)))
>>> lw = T.Seq2SeqDecoderLayer(self_attn=attn(), cross_attn=attn(), W_1=rng.normal(size=(d, d_ff)),
...                            W_2=rng.normal(size=(d_ff, d)), ln1_g=np.ones(d), ln2_g=np.ones(d), ln3_g=np.ones(d))
>>> y, w_self, w_cross = T.seq2seq_decoder_layer(rng.normal(size=(1, 3, d)), rng.normal(size=(1, 5, d)), lw, h)
>>> y.shape, w_self.shape, w_cross.shape
((1, 3, 8), (1, 2, 3, 3), (1, 2, 3, 5))
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import encoder_decoder_checks as checks
from ..backend import get_xp
from ..core.attention import scaled_dot_product_attention
from ..core.heads import AttentionWeights, merge_heads, split_heads
from ..core.layers import ffn, layer_norm, linear, relu
from ..core.masks import causal_mask
from ..require import checked_by

__all__ = ["Seq2SeqEncoderLayer", "Seq2SeqDecoderLayer", "attention_sublayer", "seq2seq_encoder_layer",
           "seq2seq_decoder_layer"]


@dataclass
class Seq2SeqEncoderLayer:
    """One encoder layer's weights, in the notes' orientation (x @ W); biases and β may be None.
    A BERT layer's too (MiniLM has every bias and β): BertLayer is this class."""
    self_attn: AttentionWeights  # W_q, W_k, W_v (d, d), W_o (d, d)
    W_1: Any  # (d, d_ff)
    W_2: Any  # (d_ff, d)
    ln1_g: Any  # (d,) LayerNorm γ after self-attention
    ln2_g: Any  # (d,) LayerNorm γ after the FFN
    b_1: Any = None  # (d_ff,)
    b_2: Any = None  # (d,)
    ln1_b: Any = None  # (d,) LayerNorm β
    ln2_b: Any = None  # (d,)


@dataclass
class Seq2SeqDecoderLayer:
    """One decoder layer's weights: three sub-layers, so three LayerNorms; biases and β may be None."""
    self_attn: AttentionWeights  # masked self-attention over the target
    cross_attn: AttentionWeights  # W_q from the decoder state, W_k and W_v applied to the encoder output
    W_1: Any  # (d, d_ff)
    W_2: Any  # (d_ff, d)
    ln1_g: Any  # (d,) after self-attention
    ln2_g: Any  # (d,) after cross-attention
    ln3_g: Any  # (d,) after the FFN
    b_1: Any = None  # (d_ff,)
    b_2: Any = None  # (d,)
    ln1_b: Any = None  # (d,)
    ln2_b: Any = None  # (d,)
    ln3_b: Any = None  # (d,)


def attention_sublayer(x, c, w: AttentionWeights, h: int, mask=None, saved: dict | None = None):
    # [b, n_q, d], [b, n_k, d] -> [b, n_q, d], [b, h, n_q, n_k]
    """softmax(Q Kᵀ/√d_h + mask) V W_o with Q = x W_q, K = c W_k, V = c W_v (c = x: self-attention;
    c = z: cross-attention): `multi_head_attention` written out step by step, so that saved can
    receive what the backward reads: q, k, v (b, h, ·, d_h), P (b, h, n_q, n_k), o (b, h, n_q, d_h)."""
    q = split_heads(linear(x, w.W_q, w.b_q), h)  # [b, h, n_q, d_h]
    k = split_heads(linear(c, w.W_k, w.b_k), h)  # [b, h, n_k, d_h]
    v = split_heads(linear(c, w.W_v, w.b_v), h)  # [b, h, n_k, d_h]
    o, P = scaled_dot_product_attention(q, k, v, mask, return_weights=True)  # [b, h, n_q, d_h], [b, h, n_q, n_k]
    if saved is not None:
        saved.update(q=q, k=k, v=v, P=P, o=o)
    return linear(merge_heads(o), w.W_o, w.b_o), P  # [b, n_q, h·d_h] @ [h·d_h, d] -> [b, n_q, d]


@checked_by(checks.seq2seq_encoder_layer)
def seq2seq_encoder_layer(x, lw: Seq2SeqEncoderLayer, h: int, *, mask=None, activation=relu, eps: float = 1e-5,
                          saved: dict | None = None):
    # [b, n_enc, d] -> [b, n_enc, d], [b, h, n_enc, n_enc]
    """Post-norm encoder layer. mask: broadcastable to (b, h, n_enc, n_enc), True = may attend
    (None: every key, the bidirectional encoder; pass a padding mask for padded batches).

    saved: a dict that receives what `seq2seq_encoder_layer_backward` reads: "x" (the layer's input),
    "r1", "r2" (the LayerNorms' inputs), "x1" (the FFN's input), "self": q, k, v, P, o of the attention."""
    # the door checked every shape once: the parts it calls are trusted
    s_self = None if saved is None else {}
    a, p = attention_sublayer(x, x, lw.self_attn, h, mask, s_self)  # [b, n, d], [b, h, n, n]
    r1 = x + a  # [b, n, d] residual
    x1 = layer_norm(r1, lw.ln1_g, lw.ln1_b, eps)  # [b, n, d]
    r2 = x1 + ffn(x1, lw.W_1, lw.W_2, lw.b_1, lw.b_2, activation=activation)  # d -> d_ff -> d, residual
    if saved is not None:
        saved.update(x=x, self=s_self, r1=r1, x1=x1, r2=r2)
    return layer_norm(r2, lw.ln2_g, lw.ln2_b, eps), p  # [b, n, d]


@checked_by(checks.seq2seq_decoder_layer)
def seq2seq_decoder_layer(y, z, lw: Seq2SeqDecoderLayer, h: int, *, causal: bool = True, self_mask=None,
                          cross_mask=None, activation=relu, eps: float = 1e-5, saved: dict | None = None):
    # [b, n_dec, d], [b, n_enc, d] -> [b, n_dec, d], [b, h, n_dec, n_dec], [b, h, n_dec, n_enc]
    """Post-norm decoder layer over the encoder output z.

    causal: position i of y sees only j ≤ i (training with the target shifted right).
    self_mask, broadcastable to (b, h, n_dec, n_dec), is combined with it by &; cross_mask,
    broadcastable to (b, h, n_dec, n_enc), hides source keys (padding). True = may attend.
    saved: a dict that receives what `seq2seq_decoder_layer_backward` reads: "y" (the layer's input),
    "r1", "r2", "r3" (the LayerNorms' inputs), "y1" (the cross-attention's queries' input), "y2" (the
    FFN's input), "self" and "cross": q, k, v, P, o of each attention.
    """
    xp = get_xp(y)
    keep = self_mask
    if causal:  # the future of the target is hidden
        future = causal_mask(y.shape[1], xp=xp)  # [n_dec, n_dec]
        keep = future if keep is None else keep & future
    s_self, s_cross = (None, None) if saved is None else ({}, {})
    # 1. masked self-attention
    a, p_self = attention_sublayer(y, y, lw.self_attn, h, keep, s_self)  # [b, n_dec, d], [b, h, n_dec, n_dec]
    r1 = y + a  # [b, n_dec, d] residual
    y1 = layer_norm(r1, lw.ln1_g, lw.ln1_b, eps)  # [b, n_dec, d]
    # 2. cross-attention: queries from y1, keys and values from z
    c, p_cross = attention_sublayer(y1, z, lw.cross_attn, h, cross_mask, s_cross)  # [b, n_dec, d], [b, h, n_dec, n_enc]
    r2 = y1 + c  # [b, n_dec, d]
    y2 = layer_norm(r2, lw.ln2_g, lw.ln2_b, eps)  # [b, n_dec, d]
    # 3. position-wise FFN
    r3 = y2 + ffn(y2, lw.W_1, lw.W_2, lw.b_1, lw.b_2, activation=activation)  # [b, n_dec, d]
    if saved is not None:
        saved.update(y=y, self=s_self, r1=r1, y1=y1, cross=s_cross, r2=r2, y2=y2, r3=r3)
    return layer_norm(r3, lw.ln3_g, lw.ln3_b, eps), p_self, p_cross  # [b, n_dec, d]
