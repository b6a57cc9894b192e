"""Workbook, lesson 15 · Encoder–decoder and cross-attention (`lessons/15_cross_attention.py`).

Fill in the bodies; keep the names and signatures. Check your work from the repository root,
with the virtual environment active:

    python -m transformer check 15

Shapes use the course's dimension names: b batch, h heads, d model width; the decoder's n_dec
target positions are the queries (n_q), the encoder's n_enc source positions the cross-attention's
keys (n_k). A mask is boolean, True = may attend.
"""
from __future__ import annotations

import numpy as np

from transformer import causal_mask, ffn, layer_norm, relu  # or your own from 05 and 10
from transformer import multi_head_attention  # or your own from 04: context=z gives cross-attention


def seq2seq_encoder_layer(x, lw: Seq2SeqEncoderLayer, h: int, *, mask=None, activation=relu, eps: float = 1e-5):
    # [b, n_enc, d] -> [b, n_enc, d], [b, h, n_enc, n_enc]
    """One post-norm encoder layer of the encoder–decoder, and of BERT: two sub-layers, each
    LayerNorm(x + sublayer(x)).

        1. self-attention:  x1 = LayerNorm(x + MHA(x; mask))        ln1
        2. FFN:             out = LayerNorm(x1 + FFN(x1))            ln2

    The self-attention is bidirectional: every word sees every word, the later ones too; `mask`
    (broadcastable to (b, h, n, n), True = may attend; None: every key) hides only the padding of
    shorter sentences. lw holds the weights: lw.self_attn (AttentionWeights), lw.W_1, lw.b_1,
    lw.W_2, lw.b_2 (the FFN, with `activation`), lw.ln1_g, lw.ln1_b, lw.ln2_g, lw.ln2_b (the
    LayerNorms, with eps). x (b, n_enc, d)  ->  (the output (b, n_enc, d), the attention weights
    (b, h, n_enc, n_enc)). all-MiniLM-L6-v2 runs six of these, with GELU and BERT's eps of 1e-12.

    After trying: the package's version is `transformer/models/encoder_decoder.py`, `seq2seq_encoder_layer`.
    """
    raise NotImplementedError(
        "seq2seq_encoder_layer: start with sub-layer 1, multi_head_attention(x, lw.self_attn, h, mask=mask, "
        "return_weights=True), and print the shapes it returns; then add x and normalise.")


def seq2seq_decoder_layer(y, z, lw: Seq2SeqDecoderLayer, h: int, *, causal: bool = True, self_mask=None,
                          cross_mask=None, activation=relu, eps: float = 1e-5):
    # [b, n_dec, d], [b, n_enc, d] -> [b, n_dec, d], [b, h, n_dec, n_dec], [b, h, n_dec, n_enc]
    """One post-norm decoder layer of the encoder–decoder: three sub-layers, each LayerNorm(x + sublayer(x)).

        1. masked self-attention:  y1 = LayerNorm(y + MHA(y, y, y; self mask))        ln1
        2. cross-attention:        y2 = LayerNorm(y1 + MHA(y1, z, z; cross_mask))     ln2
        3. FFN:                    out = LayerNorm(y2 + FFN(y2))                      ln3

    MHA(queries' input, keys' and values' input, …). In 2 the queries come from the decoder (y1) and
    the keys and values from the encoder output z: `multi_head_attention(y1, lw.cross_attn, h,
    context=z)`. The self mask is the causal mask when causal (position i sees j ≤ i), combined with
    self_mask by & when that is given too; the cross-attention takes cross_mask alone (the source's
    padding), never a causal mask. lw holds the weights: lw.self_attn and lw.cross_attn
    (AttentionWeights), lw.W_1, lw.b_1, lw.W_2, lw.b_2 (the FFN, with `activation`), lw.ln1_g,
    lw.ln1_b … lw.ln3_b (the LayerNorms, with eps).
    y (b, n_dec, d), z (b, n_enc, d)  ->  (the output (b, n_dec, d), the self-attention weights
    (b, h, n_dec, n_dec), the cross-attention weights (b, h, n_dec, n_enc)).

    After trying: the package's version is `transformer/models/encoder_decoder.py`, `seq2seq_decoder_layer`.
    """
    raise NotImplementedError(
        "seq2seq_decoder_layer: start with sub-layer 1 alone, multi_head_attention(..., return_weights=True) with "
        "the causal mask, and print the shapes it returns; sub-layer 2 is the same call with context=z.")
