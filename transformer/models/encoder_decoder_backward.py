"""The backward pass of encoder_decoder.py's layers: each sub-layer in reverse, through the core's `*_backward`.

    forward (encoder_decoder.py)                       backward (here), last step first
    a = attention_sublayer(x, c)                       attention_sublayer_backward: linear_backward ×4,
        Q = x W_q, K = c W_k, V = c W_v,                 scaled_dot_product_attention_backward, the heads'
        o = softmax(Q Kᵀ/√d_h + mask) V, a = o W_o       split and merge in reverse
    x1 = LayerNorm(r1),  r1 = x + a                    layer_norm_backward from r1
    x2 = LayerNorm(r2),  r2 = x1 + FFN(x1)             layer_norm_backward from r2, ffn_backward from x1

Backward of a post-norm sub-layer, y = LayerNorm(r), r = x + F(x):

    dr = layer_norm_backward(dy, r)          the norm is on the residual path itself,
    dx = dr + (∂F/∂x)ᵀ dr                    so every gradient passes through it

What each step reads is what the layer's `saved=` kept (the names are the forward's), and the
gradients come back with the weights' structure: a Seq2SeqEncoderLayer or Seq2SeqDecoderLayer (and
AttentionWeights) of arrays of the weights' shapes, None where the weight is None (a bias, a β).
The decoder's cross-attention reads its keys and values from the encoder output z, so its backward
also returns dz, this layer's part of z's gradient.
"""
from __future__ import annotations

from .encoder_decoder import Seq2SeqDecoderLayer, Seq2SeqEncoderLayer
from ..core.attention import scaled_dot_product_attention_backward
from ..core.heads import AttentionWeights, merge_heads, merge_heads_backward, split_heads_backward
from ..core.layers import ffn_backward, layer_norm_backward, linear_backward

__all__ = ["attention_sublayer_backward", "seq2seq_encoder_layer_backward", "seq2seq_decoder_layer_backward"]


def attention_sublayer_backward(d_out, x, c, w: AttentionWeights, h: int, s: dict):
    # [b, n_q, d] -> dx [b, n_q, d], dc [b, n_k, d], AttentionWeights of gradients
    """attention_sublayer in reverse, from q, k, v, P, o it saved in s:

        dW_o = merge(o)ᵀ d_out,   do = split(d_out W_oᵀ)
        dq, dk, dv = scaled_dot_product_attention_backward(do, q, k, v, P)
        dx = dQ W_qᵀ,   dc = dK W_kᵀ + dV W_vᵀ       (dQ = merge(dq), …)

    Self-attention passed c = x: its caller adds dx and dc."""
    dm, dW_o, db_o = linear_backward(d_out, merge_heads(s["o"]), w.W_o, w.b_o is not None)  # dm [b, n_q, h·d_h]
    do = merge_heads_backward(dm, h)  # [b, h, n_q, d_h]
    dq, dk, dv = scaled_dot_product_attention_backward(do, s["q"], s["k"], s["v"], s["P"])  # [b, h, ·, d_h]
    dx, dW_q, db_q = linear_backward(split_heads_backward(dq), x, w.W_q, w.b_q is not None)  # [b, n_q, d]
    dc_k, dW_k, db_k = linear_backward(split_heads_backward(dk), c, w.W_k, w.b_k is not None)  # [b, n_k, d]
    dc_v, dW_v, db_v = linear_backward(split_heads_backward(dv), c, w.W_v, w.b_v is not None)  # [b, n_k, d]
    return dx, dc_k + dc_v, AttentionWeights(dW_q, dW_k, dW_v, dW_o, db_q, db_k, db_v, db_o)  # c fed K and V: they add


def seq2seq_encoder_layer_backward(dx2, lw: Seq2SeqEncoderLayer, h: int, s: dict, *, activation: str = "relu",
                                   eps: float = 1e-5):
    # [b, n_enc, d] -> dx [b, n_enc, d], Seq2SeqEncoderLayer of gradients
    """seq2seq_encoder_layer in reverse, from what its saved= kept in s (x, self, r1, x1, r2): the FFN
    sub-layer, then the attention's. activation names the FFN's g, as ffn_backward takes it ("relu":
    the original's)."""
    # FFN sub-layer: x2 = LayerNorm(r2), r2 = x1 + FFN(x1)
    dx1, dln2_g, dln2_b = layer_norm_backward(dx2, s["r2"], lw.ln2_g, eps, lw.ln2_b is not None)  # [b, n, d]
    df, dW_1, dW_2, db_1, db_2 = ffn_backward(dx1, s["x1"], lw.W_1, lw.W_2, lw.b_1, lw.b_2, activation=activation)
    dx1 = dx1 + df  # residual: both paths add
    # attention sub-layer: x1 = LayerNorm(r1), r1 = x + SelfAttention(x)
    dr1, dln1_g, dln1_b = layer_norm_backward(dx1, s["r1"], lw.ln1_g, eps, lw.ln1_b is not None)  # [b, n, d]
    dx_q, dx_kv, d_self = attention_sublayer_backward(dr1, s["x"], s["x"], lw.self_attn, h, s["self"])
    grads = Seq2SeqEncoderLayer(self_attn=d_self, W_1=dW_1, W_2=dW_2, ln1_g=dln1_g, ln2_g=dln2_g, b_1=db_1, b_2=db_2,
                                ln1_b=dln1_b, ln2_b=dln2_b)
    return dr1 + dx_q + dx_kv, grads  # x fed the residual, the queries, the keys and the values


def seq2seq_decoder_layer_backward(dy3, z, lw: Seq2SeqDecoderLayer, h: int, s: dict, *, activation: str = "relu",
                                   eps: float = 1e-5):
    # [b, n_dec, d], [b, n_enc, d] -> dy [b, n_dec, d], dz [b, n_enc, d], Seq2SeqDecoderLayer of gradients
    """seq2seq_decoder_layer in reverse, from what its saved= kept in s (y, self, r1, y1, cross, r2, y2,
    r3): the FFN, the cross-attention (whose keys and values gave dz), then the masked self-attention."""
    # 3. FFN: y3 = LayerNorm(r3), r3 = y2 + FFN(y2)
    dy2, dln3_g, dln3_b = layer_norm_backward(dy3, s["r3"], lw.ln3_g, eps, lw.ln3_b is not None)  # [b, n_dec, d]
    df, dW_1, dW_2, db_1, db_2 = ffn_backward(dy2, s["y2"], lw.W_1, lw.W_2, lw.b_1, lw.b_2, activation=activation)
    dy2 = dy2 + df
    # 2. cross-attention: y2 = LayerNorm(r2), r2 = y1 + CrossAttention(y1, z)
    dr2, dln2_g, dln2_b = layer_norm_backward(dy2, s["r2"], lw.ln2_g, eps, lw.ln2_b is not None)
    dy1_q, dz, d_cross = attention_sublayer_backward(dr2, s["y1"], z, lw.cross_attn, h, s["cross"])  # dz [b, n_enc, d]
    dy1 = dr2 + dy1_q
    # 1. masked self-attention: y1 = LayerNorm(r1), r1 = y + SelfAttention(y)
    dr1, dln1_g, dln1_b = layer_norm_backward(dy1, s["r1"], lw.ln1_g, eps, lw.ln1_b is not None)
    dy_q, dy_kv, d_self = attention_sublayer_backward(dr1, s["y"], s["y"], lw.self_attn, h, s["self"])
    grads = Seq2SeqDecoderLayer(self_attn=d_self, cross_attn=d_cross, W_1=dW_1, W_2=dW_2, ln1_g=dln1_g,
                                ln2_g=dln2_g, ln3_g=dln3_g, b_1=db_1, b_2=db_2, ln1_b=dln1_b, ln2_b=dln2_b,
                                ln3_b=dln3_b)
    return dr1 + dy_q + dy_kv, dz, grads
