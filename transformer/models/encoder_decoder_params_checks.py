"""The refusals of `models/encoder_decoder_params.py`, one check per public function and of the same name."""
from __future__ import annotations

from ..require import require_int


def layer_in(params, l, side, kind, names):
    """params is a dict holding layer l of this side ("enc", "dec"): each of its names under "{side}.{l}."."""
    if not isinstance(params, dict):
        raise TypeError(f"params must be a dict of name -> array (init_seq2seq's), got {type(params).__name__}")
    require_int(l=l)  # -1, 2.5 and True were looked up as 'enc.-1.…', as a KeyError
    missing = [f"{side}.{l}.{name}" for name in names if f"{side}.{l}.{name}" not in params]
    if missing:
        held = sum(1 for k in params if k.startswith(f"{side}.") and k.endswith(".W_1"))
        raise ValueError(f"params hold no {kind} layer l={l}: {missing[0]!r} is missing ({len(missing)} of "
                         f"{len(names)} names; the dict holds {held} {kind} layers)")


ENCODER = ("self.W_q", "self.W_k", "self.W_v", "self.W_o", "W_1", "b_1", "W_2", "b_2", "ln1_g", "ln1_b", "ln2_g",
           "ln2_b")
DECODER = ENCODER + ("cross.W_q", "cross.W_k", "cross.W_v", "cross.W_o", "ln3_g", "ln3_b")


def seq2seq_encoder_weights(params, l):
    layer_in(params, l, "enc", "encoder", ENCODER)


def seq2seq_decoder_weights(params, l):
    layer_in(params, l, "dec", "decoder", DECODER)
