"""The refusals of encoder_decoder.py's doors, reached as checks.seq2seq_encoder_layer and
checks.seq2seq_decoder_layer: each names the bad value in one line, or returns None."""
from __future__ import annotations

from ..core import heads_checks, layers_checks
from ..require import require_bool, require_float, require_int, require_real


def sequence(name: str, x, d: int | None = None):
    """x floating-point (b, n, d) with n ≥ 1, and d as given."""
    require_float(name, x)
    if x.ndim != 3 or x.shape[1] == 0 or (d is not None and x.shape[2] != d):
        want = "d" if d is None else f"d={d}"
        raise ValueError(f"{name} must be (b, n, {want}) with n ≥ 1, got shape {tuple(x.shape)}")


def layer_weights(lw, kind, attentions):
    """lw holds a layer's weights (T.Seq2SeqEncoderLayer or T.Seq2SeqDecoderLayer), read by name below."""
    if not all(hasattr(lw, f) for f in ("W_1", "W_2", *attentions)):  # None: "has no attribute 'W_1'"
        raise TypeError(f"lw must be a T.{kind} (the layer's weights), got {type(lw).__name__}")


def sublayers(x, lw, h, activation, eps, norms):
    """The FFN's matrices and the LayerNorms' γ, β against x's width d; h heads dividing d."""
    require_int(h=h, low=1)
    if x.shape[2] % h:
        raise ValueError(f"d={x.shape[2]} must be a multiple of the heads h={h}")
    if not callable(activation):
        raise TypeError(f"activation must be a function such as T.relu, got {activation!r}")
    require_real(eps=eps)
    layers_checks.ffn(x, lw.W_1, lw.W_2, lw.b_1, lw.b_2, activation)
    for k in norms:
        layers_checks.layer_norm(x, getattr(lw, f"ln{k}_g"), getattr(lw, f"ln{k}_b"), eps)


def saved_dict(saved):
    """saved None, or a dict to fill: the activations a backward pass reads."""
    if saved is not None and not isinstance(saved, dict):
        raise TypeError(f"saved must be a dict to receive the activations, got {type(saved).__name__}")


def seq2seq_encoder_layer(x, lw, h, *, mask, activation, eps, saved):
    sequence("x", x)
    layer_weights(lw, "Seq2SeqEncoderLayer", ("self_attn",))
    sublayers(x, lw, h, activation, eps, (1, 2))
    heads_checks.multi_head_attention(x, lw.self_attn, h, None, mask=mask, context=None, return_weights=True)
    saved_dict(saved)


def seq2seq_decoder_layer(y, z, lw, h, *, causal, self_mask, cross_mask, activation, eps, saved):
    sequence("y", y)
    sequence("z", z, y.shape[2])
    if z.shape[0] != y.shape[0]:
        raise ValueError(f"z (encoder output) must have the batch b={y.shape[0]} of y, got shape {tuple(z.shape)}")
    require_bool(causal=causal)
    layer_weights(lw, "Seq2SeqDecoderLayer", ("self_attn", "cross_attn"))
    sublayers(y, lw, h, activation, eps, (1, 2, 3))
    heads_checks.multi_head_attention(y, lw.self_attn, h, None, mask=self_mask, context=None, return_weights=True)
    heads_checks.multi_head_attention(y, lw.cross_attn, h, None, mask=cross_mask, context=z, return_weights=True)
    saved_dict(saved)
