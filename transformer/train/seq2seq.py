"""The original Transformer, small and trainable: a post-norm encoder–decoder with its backward pass.

    src (b, n_src) --embed·√d + PE--> x (b, n_src, d)
    L_enc × [ x = LayerNorm(x + SelfAttention(x))           padding mask: no query reads a PAD key
              x = LayerNorm(x + FFN(x)) ]                    FFN(x) = ReLU(x W_1 + b_1) W_2 + b_2
    z = x                                                    the encoder output, "the memory"
    tgt_in (b, n_tgt) --embed·√d + PE--> y (b, n_tgt, d)
    L_dec × [ y = LayerNorm(y + SelfAttention(y))           causal: position i reads j ≤ i
              y = LayerNorm(y + CrossAttention(y, z))        Q = y C_q, K = z C_k, V = z C_v; padding mask
              y = LayerNorm(y + FFN(y)) ]
    logits = y W_Eᵀ                                          (b, n_tgt, v), the LM head tied to W_E

"Attention Is All You Need" (§3) at toy size: sinusoidal positions (§3.5), embeddings scaled by
√d (§3.4) and one table W_E shared by the source, the target and the output projection (the
vocabulary is shared: `tasks/translation_data.py`). The projections of attention have no bias; the FFN
has b_1, b_2 and every LayerNorm its γ, β.

The layers are not written here: each runs `models/encoder_decoder.py`'s `seq2seq_encoder_layer` or
`seq2seq_decoder_layer`, the layers tested against torch's, with `saved=` keeping what the backward
needs, and the backward is theirs, beside them (`models/encoder_decoder_backward.py`). The weights
stay a dict of named arrays (the optimizer's and the checkpoint's format); each layer reads its
part as a Seq2SeqEncoderLayer / Seq2SeqDecoderLayer of the same arrays (`encoder_decoder_params.py`).
This module adds what surrounds the layers: the embeddings, the masks, the tied head, and the
gradients that gather from several layers.

Cross-attention's keys and values are read from z by every decoder layer, so z's gradient is the
sum of L_dec terms (one per layer) before it enters the encoder's backward. W_E gets four terms:
the tied head's, the target embedding's, the source embedding's (each scaled by √d, as the
forward).

Greedy decoding with a KV cache is in `seq2seq_decode.py`. The doors check once
(`seq2seq_checks.py`); the core's formulas they call inside are trusted, as in `decoder.py`.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from . import seq2seq_checks
from ..backend import get_xp, namespace
from ..require import checked_by
from ..core.embedding import embed, embed_backward, lm_head_backward
from ..core.loss import cross_entropy, cross_entropy_backward
from ..core.masks import padding_mask
from ..core.positions import sinusoidal_positions
from ..models.encoder_decoder import attention_sublayer, seq2seq_decoder_layer, seq2seq_encoder_layer
from ..models.encoder_decoder_backward import seq2seq_decoder_layer_backward, seq2seq_encoder_layer_backward
from ..models.encoder_decoder_params import (ATTENTION_NAMES, params_from_layer, seq2seq_decoder_weights,
                                             seq2seq_encoder_weights)

# attention_sublayer was defined here: it lives beside the layers now (models/encoder_decoder.py)
__all__ = ["Seq2SeqConfig", "init_seq2seq", "seq2seq_forward", "seq2seq_backward", "seq2seq_loss_and_grads",
           "seq2seq_encode", "seq2seq_decoder", "embed_tokens", "attention_sublayer"]


@dataclass(frozen=True)
class Seq2SeqConfig:
    """The legend of names: every size of the model.   d_h = d / h."""
    v: int  # shared vocabulary: PAD, BOS, EOS, source words, target words
    d: int  # model width, d_model
    h: int  # heads of every attention (self and cross)
    d_ff: int  # FFN hidden width
    L_enc: int  # encoder layers
    L_dec: int  # decoder layers
    n_max: int  # the longest source or target sequence: positions 0 … n_max − 1
    eps: float = 1e-5  # LayerNorm epsilon (torch's default)

    def __post_init__(self):
        seq2seq_checks.seq2seq_config(self)
        for f in ("v", "d", "h", "d_ff", "L_enc", "L_dec", "n_max"):
            object.__setattr__(self, f, int(getattr(self, f)))  # NumPy integers become plain numbers
        object.__setattr__(self, "eps", float(self.eps))

    @property
    def d_h(self) -> int:
        return self.d // self.h

    def as_dict(self) -> dict:
        """The fields as plain numbers, for a checkpoint's config."""
        return asdict(self)

    def parameter_count(self) -> int:
        """The numbers of parameter_shapes, counted without listing them (a config may ask for 2⁴⁰ of them):
        W_E, then an encoder layer's 4 attention matrices, FFN and 2 norms, a decoder layer's 8, FFN and 3."""
        d, d_ff = self.d, self.d_ff
        ffn = 2 * d * d_ff + d_ff + d  # W_1, b_1, W_2, b_2
        return self.v * d + self.L_enc * (4 * d * d + ffn + 2 * 2 * d) + self.L_dec * (8 * d * d + ffn + 3 * 2 * d)

    def parameter_shapes(self) -> dict:  # name -> shape, in the order init_seq2seq draws them
        """"W_E", then per encoder layer "enc.{l}.self.W_q|W_k|W_v|W_o", "ln1_g|ln1_b",
        "W_1", "b_1", "W_2", "b_2", "ln2_g|ln2_b"; per decoder layer the same with a "cross." attention
        and a third norm after it: "dec.{l}.self.…", "ln1_…", "cross.W_q|W_k|W_v|W_o", "ln2_…",
        FFN, "ln3_…"."""
        d, d_ff = self.d, self.d_ff
        attn = lambda pre: {f"{pre}.{w}": (d, d) for w in ATTENTION_NAMES}  # noqa: E731  h·d_h = d
        norm = lambda k: {f"ln{k}_g": (d,), f"ln{k}_b": (d,)}  # noqa: E731
        ff = {"W_1": (d, d_ff), "b_1": (d_ff,), "W_2": (d_ff, d), "b_2": (d,)}
        shapes = {"W_E": (self.v, d)}
        for l in range(self.L_enc):
            layer = {**attn("self"), **norm(1), **ff, **norm(2)}
            shapes.update({f"enc.{l}.{k}": s for k, s in layer.items()})
        for l in range(self.L_dec):
            layer = {**attn("self"), **norm(1), **attn("cross"), **norm(2), **ff, **norm(3)}
            shapes.update({f"dec.{l}.{k}": s for k, s in layer.items()})
        return shapes


@checked_by(seq2seq_checks.init_seq2seq)
def init_seq2seq(cfg: Seq2SeqConfig, seed: int = 0, *, dtype="float32", xp=None) -> dict:
    """Weights drawn with np.random.default_rng(seed), in the order of `cfg.parameter_shapes()`:

        W_E                  N(0, 1/d): the embedding times √d has unit variance, as the positions
        every other matrix   N(0, 1/d_in): each projection keeps unit-variance inputs at unit variance
        biases, β  0;   γ  1

    Post-norm renormalises after every sub-layer, so no depth-dependent shrinking is needed.
    """
    xp = namespace(xp)
    rng = np.random.default_rng(seed)
    params = {}
    for name, shape in cfg.parameter_shapes().items():
        kind = name.rsplit(".", 1)[-1]
        if kind.endswith("_g"):
            w = np.ones(shape)  # γ
        elif len(shape) == 1:
            w = np.zeros(shape)  # β and biases
        else:
            w = rng.standard_normal(shape) / math.sqrt(shape[1] if name == "W_E" else shape[0])
        params[name] = xp.asarray(w.astype(dtype))
    return params


def embed_tokens(ids, W_E, n_offset: int = 0):  # [b, n] -> [b, n, d]
    """X = W_E[ids]·√d + PE[n_offset : n_offset + n] (§3.4–3.5): at √d the token part and the
    sinusoidal positions (entries in [−1, 1]) have the same scale."""
    xp = get_xp(W_E)
    d = W_E.shape[1]
    n = ids.shape[1]
    pe = sinusoidal_positions(n_offset + n, d, xp=xp, dtype=W_E.dtype)[n_offset:, :]  # [n, d]
    return embed(ids, W_E) * math.sqrt(d) + pe  # [b, n, d]


# --- the whole model ---------------------------------------------------------------------------------
def seq2seq_encode(params, src, cfg, src_lengths):  # [b, n_src], [b] -> z [b, n_src, d], per-layer saved
    """The encoder: embeddings·√d + positions, then L_enc post-norm layers (`seq2seq_encoder_layer`)
    under the padding mask. Returns z, what each layer saved for its backward, and the mask."""
    xp = get_xp(params["W_E"])
    src = xp.astype(xp.asarray(src), xp.int64)
    lengths = xp.astype(xp.asarray(src_lengths), xp.int64)
    mask = padding_mask(lengths, src.shape[1])  # [b, 1, 1, n_src]: PAD keys hidden
    x = embed_tokens(src, params["W_E"])  # [b, n_src, d]
    saved = []
    for l in range(cfg.L_enc):
        s = {}  # what this layer's backward reads
        x, _ = seq2seq_encoder_layer(x, seq2seq_encoder_weights(params, l), cfg.h, mask=mask, eps=cfg.eps,
                                     saved=s)  # [b, n_src, d]
        saved.append(s)
    return x, saved, mask


def seq2seq_decoder(params, tgt, z, cfg, cross_mask):  # [b, n_tgt], [b, n_src, d] -> y [b, n_tgt, d], saved
    """The decoder on the whole target prefix at once: embeddings·√d + positions, then L_dec layers
    (`seq2seq_decoder_layer`: causal self-attention), each computing its cross-attention K = z C_k and
    V = z C_v from the encoder output."""
    y = embed_tokens(tgt, params["W_E"])  # [b, n_tgt, d]
    saved = []
    for l in range(cfg.L_dec):
        s = {}  # what this layer's backward reads
        y, _, _ = seq2seq_decoder_layer(y, z, seq2seq_decoder_weights(params, l), cfg.h, cross_mask=cross_mask,
                                        eps=cfg.eps, saved=s)  # [b, n_tgt, d]
        saved.append(s)
    return y, saved


@checked_by(seq2seq_checks.seq2seq_forward)
def seq2seq_forward(params: dict, src, tgt_in, cfg: Seq2SeqConfig, src_lengths):
    # [b, n_src], [b, n_tgt], [b] -> logits [b, n_tgt, v], saved
    """Logits of every target position (teacher forcing: tgt_in is BOS + the answer so far), and
    what the backward needs:

      "src", "tgt"      the ids (embedding backward)
      "enc": L_enc dicts  x (layer input), r1, r2 (the LayerNorms' inputs), x1 (the FFN's input),
                          "self": q, k, v, P, o of the attention
      "z"               the encoder output (cross-attention's K and V)
      "dec": L_dec dicts  y, r1, r2, r3, y1 (cross-attention's queries' input), y2 (the FFN's input),
                          "self" and "cross": q, k, v, P, o; "cross"'s P is (b, h, n_tgt, n_src)
      "y"               the last decoder output (LM head backward)

    >>> import numpy as np
    >>> cfg = Seq2SeqConfig(v=11, d=8, h=2, d_ff=12, L_enc=1, L_dec=2, n_max=8)
    >>> src, lengths, tgt_in = np.array([[3, 4, 5], [6, 7, 0]]), np.array([3, 2]), np.array([[1, 8], [1, 9]])
    >>> logits, saved = seq2seq_forward(init_seq2seq(cfg), src, tgt_in, cfg, lengths)
    >>> logits.shape, saved["dec"][1]["cross"]["P"].shape, float(saved["dec"][0]["cross"]["P"][1, :, :, 2].max())
    ((2, 2, 11), (2, 2, 2, 3), 0.0)
    """
    xp = get_xp(params["W_E"])
    tgt = xp.astype(xp.asarray(tgt_in), xp.int64)
    z, enc_saved, cross_mask = seq2seq_encode(params, src, cfg, src_lengths)  # [b, n_src, d]
    y, dec_saved = seq2seq_decoder(params, tgt, z, cfg, cross_mask)  # [b, n_tgt, d]
    logits = y @ params["W_E"].mT  # [b, n_tgt, v] tied head
    src = xp.astype(xp.asarray(src), xp.int64)
    return logits, {"src": src, "tgt": tgt, "enc": enc_saved, "z": z, "dec": dec_saved, "y": y}


@checked_by(seq2seq_checks.seq2seq_backward)
def seq2seq_backward(d_logits, saved: dict, params: dict, cfg: Seq2SeqConfig) -> dict:
    # [b, n_tgt, v] -> grads: name -> array, the keys and shapes of params
    """∂loss/∂(every weight) from ∂loss/∂logits: the decoder last layer first, z's gradient summed
    over the decoder layers, then the encoder; W_E's four terms added at the end."""
    grads = {}
    dy, dW_head = lm_head_backward(d_logits, saved["y"], params["W_E"])  # [b, n_tgt, d], [v, d]
    z = saved["z"]
    dz = 0.0
    for l in reversed(range(cfg.L_dec)):
        dy, dz_l, g = seq2seq_decoder_layer_backward(dy, z, seq2seq_decoder_weights(params, l), cfg.h,
                                                     saved["dec"][l], eps=cfg.eps)  # [b, n_tgt, d], [b, n_src, d]
        dz = dz + dz_l  # every decoder layer read K and V from z
        grads.update(params_from_layer(g, f"dec.{l}."))
    dx = dz  # [b, n_src, d]
    for l in reversed(range(cfg.L_enc)):
        dx, g = seq2seq_encoder_layer_backward(dx, seq2seq_encoder_weights(params, l), cfg.h, saved["enc"][l],
                                               eps=cfg.eps)  # [b, n_src, d]
        grads.update(params_from_layer(g, f"enc.{l}."))
    scale = math.sqrt(cfg.d)  # X = W_E[ids]·√d + PE: the positions are fixed, the table gets dX·√d
    grads["W_E"] = (dW_head + embed_backward(dy * scale, saved["tgt"], cfg.v)
                    + embed_backward(dx * scale, saved["src"], cfg.v))
    return {k: grads[k] for k in params}


@checked_by(seq2seq_checks.seq2seq_loss_and_grads)
def seq2seq_loss_and_grads(params: dict, batch, cfg: Seq2SeqConfig):  # TranslationBatch -> float, grads
    """Mean cross-entropy of tgt_out given (src_ids, src_lengths, tgt_in), over the positions that
    are not ignore_index (−100: the padding after EOS), and its gradients.

    batch: a TranslationBatch, or any (src_ids, src_lengths, tgt_in, tgt_out) tuple."""
    src_ids, src_lengths, tgt_in, tgt_out = batch
    xp = get_xp(params["W_E"])
    logits, saved = seq2seq_forward(params, src_ids, tgt_in, cfg, src_lengths)  # [b, n_tgt, v]
    targets = xp.astype(xp.asarray(tgt_out), xp.int64)  # [b, n_tgt]
    loss = cross_entropy(logits, targets)
    d_logits = cross_entropy_backward(logits, targets)  # [b, n_tgt, v]
    return float(loss), seq2seq_backward(d_logits, saved, params, cfg)
