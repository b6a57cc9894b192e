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
from ..core.heads import AttentionWeights, multi_head_attention
from ..core.layers import ffn, layer_norm, relu
from ..core.masks import causal_mask
from ..require import checked_by

__all__ = ["Seq2SeqEncoderLayer", "Seq2SeqDecoderLayer", "seq2seq_encoder_layer", "seq2seq_decoder_layer"]


@dataclass
class Seq2SeqEncoderLayer:
    """One encoder layer's weights, in the notes' orientation (x @ W); biases and β may be None."""
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


@checked_by(checks.seq2seq_encoder_layer)
def seq2seq_encoder_layer(x, lw: Seq2SeqEncoderLayer, h: int, *, mask=None, activation=relu, eps: float = 1e-5):
    # [b, n_enc, d] -> [b, n_enc, d], [b, h, n_enc, n_enc]
    """Post-norm encoder layer. mask: broadcastable to (b, h, n_enc, n_enc), True = may attend
    (None: every key, the bidirectional encoder; pass a padding mask for padded batches)."""
    # the door checked every shape once: the parts it calls are trusted
    a, p = multi_head_attention(x, lw.self_attn, h, mask=mask, return_weights=True)  # [b, n, d], [b, h, n, n]
    x = layer_norm(x + a, lw.ln1_g, lw.ln1_b, eps)  # [b, n, d]
    f = ffn(x, lw.W_1, lw.W_2, lw.b_1, lw.b_2, activation=activation)  # d -> d_ff -> d
    return layer_norm(x + f, lw.ln2_g, lw.ln2_b, eps), p  # [b, n, d]


@checked_by(checks.seq2seq_decoder_layer)
def seq2seq_decoder_layer(y, z, lw: Seq2SeqDecoderLayer, h: int, *, causal: bool = True, self_mask=None,
                          cross_mask=None, activation=relu, eps: float = 1e-5):
    # [b, n_dec, d], [b, n_enc, d] -> [b, n_dec, d], [b, h, n_dec, n_dec], [b, h, n_dec, n_enc]
    """Post-norm decoder layer over the encoder output z.

    causal: position i of y sees only j ≤ i (training with the target shifted right).
    self_mask, broadcastable to (b, h, n_dec, n_dec), is combined with it by &; cross_mask,
    broadcastable to (b, h, n_dec, n_enc), hides source keys (padding). True = may attend.
    """
    xp = get_xp(y)
    keep = self_mask
    if causal:  # the future of the target is hidden
        future = causal_mask(y.shape[1], xp=xp)  # [n_dec, n_dec]
        keep = future if keep is None else keep & future
    # 1. masked self-attention
    a, p_self = multi_head_attention(y, lw.self_attn, h, mask=keep, return_weights=True)
    y = layer_norm(y + a, lw.ln1_g, lw.ln1_b, eps)  # [b, n_dec, d]
    # 2. cross-attention: queries from y, keys and values from z
    c, p_cross = multi_head_attention(y, lw.cross_attn, h, mask=cross_mask, context=z,
                                      return_weights=True)  # [b, n_dec, d], [b, h, n_dec, n_enc]
    y = layer_norm(y + c, lw.ln2_g, lw.ln2_b, eps)  # [b, n_dec, d]
    # 3. position-wise FFN
    f = ffn(y, lw.W_1, lw.W_2, lw.b_1, lw.b_2, activation=activation)  # [b, n_dec, d]
    return layer_norm(y + f, lw.ln3_g, lw.ln3_b, eps), p_self, p_cross
