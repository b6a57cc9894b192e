"""A trained encoder–decoder's weight dict, layer by layer, as encoder_decoder.py's records (and back).

Training keeps its weights as a dict of named arrays ("W_E", "enc.{l}.self.W_q", "enc.{l}.ln1_g", …,
"dec.{l}.cross.W_k", …, see train/seq2seq.py's `Seq2SeqConfig.parameter_shapes`): the optimizer's
format and the checkpoint's. Read into a `Seq2SeqEncoderLayer` or `Seq2SeqDecoderLayer`, a layer is
the same arrays, not copies, so an optimizer's in-place update is the layer's; its gradients
(`encoder_decoder_backward.py`) come back as a record of the same kind and go the other way into
the dict's names. The record's fields are the dict's names, but for the attentions:

    self_attn.W_q … W_o   <->  "self.W_q" … "self.W_o"        (no biases: the trained attention has none)
    cross_attn.W_q … W_o  <->  "cross.W_q" … "cross.W_o"

>>> import numpy as np
>>> params = {f"enc.0.{k}": np.ones(2) for k in ("self.W_q", "self.W_k", "self.W_v", "self.W_o", "W_1", "b_1",
...                                              "W_2", "b_2", "ln1_g", "ln1_b", "ln2_g", "ln2_b")}
>>> lw = seq2seq_encoder_weights(params, 0)
>>> lw.self_attn.W_k is params["enc.0.self.W_k"], params_from_layer(lw, "enc.0.") == params
(True, True)
"""
from __future__ import annotations

from dataclasses import fields

from . import encoder_decoder_params_checks as checks
from .encoder_decoder import Seq2SeqDecoderLayer, Seq2SeqEncoderLayer
from ..core.heads import AttentionWeights
from ..require import checked_by

__all__ = ["seq2seq_encoder_weights", "seq2seq_decoder_weights", "params_from_layer"]

ATTENTION_NAMES = ("W_q", "W_k", "W_v", "W_o")
ATTENTION_PREFIX = {"self_attn": "self.", "cross_attn": "cross."}  # a record's attention -> its names in the dict


def attention_weights(params: dict, prefix: str) -> AttentionWeights:  # "enc.0.self." -> W_q, W_k, W_v, W_o
    return AttentionWeights(*(params[prefix + name] for name in ATTENTION_NAMES))


@checked_by(checks.seq2seq_encoder_weights)
def seq2seq_encoder_weights(params: dict, l: int) -> Seq2SeqEncoderLayer:
    """Encoder layer l of the dict ("enc.{l}.…") as a Seq2SeqEncoderLayer: the same arrays, no copy."""
    p = f"enc.{l}."
    return Seq2SeqEncoderLayer(self_attn=attention_weights(params, p + "self."),
                               W_1=params[p + "W_1"], b_1=params[p + "b_1"],
                               W_2=params[p + "W_2"], b_2=params[p + "b_2"],
                               ln1_g=params[p + "ln1_g"], ln1_b=params[p + "ln1_b"],
                               ln2_g=params[p + "ln2_g"], ln2_b=params[p + "ln2_b"])


@checked_by(checks.seq2seq_decoder_weights)
def seq2seq_decoder_weights(params: dict, l: int) -> Seq2SeqDecoderLayer:
    """Decoder layer l of the dict ("dec.{l}.…") as a Seq2SeqDecoderLayer: the same arrays, no copy."""
    p = f"dec.{l}."
    return Seq2SeqDecoderLayer(self_attn=attention_weights(params, p + "self."),
                               cross_attn=attention_weights(params, p + "cross."),
                               W_1=params[p + "W_1"], b_1=params[p + "b_1"],
                               W_2=params[p + "W_2"], b_2=params[p + "b_2"],
                               ln1_g=params[p + "ln1_g"], ln1_b=params[p + "ln1_b"],
                               ln2_g=params[p + "ln2_g"], ln2_b=params[p + "ln2_b"],
                               ln3_g=params[p + "ln3_g"], ln3_b=params[p + "ln3_b"])


def params_from_layer(lw: Seq2SeqEncoderLayer | Seq2SeqDecoderLayer, prefix: str) -> dict:
    """A layer's record (its weights, or their gradients) as named arrays under prefix ("enc.0.", "dec.1."),
    the names of the dict it was read from: no copy. The attentions' biases, None, have no name."""
    named = {}
    for field in fields(lw):
        w = getattr(lw, field.name)
        if field.name in ATTENTION_PREFIX:  # self_attn.W_q -> "self.W_q", …
            named.update({prefix + ATTENTION_PREFIX[field.name] + name: getattr(w, name) for name in ATTENTION_NAMES})
        else:
            named[prefix + field.name] = w
    return named
