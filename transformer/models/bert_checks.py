"""The refusals of bert.py's public functions, one check per function and of the same name.

A function of `bert.py` names its check at the door (`@checked_by(checks.bert_encode)`); the check
receives every argument by keyword, the function's defaults filled in (it states none), and raises a
one-line error naming the bad value, or returns None. A method's check takes `self` first and is
named class_method (`minilm_embed`); a config's is named after its class (`bert_config`). Checks
shared by several doors (a weight matrix, an index array, one layer's weights) are the small
functions at the top.
"""
from __future__ import annotations

from ..backend import get_xp, to_numpy
from ..core import masks_checks, shared_checks
from ..core.packing_checks import documents_fit
from ..require import (broadcastable_to, require_array, require_bool, require_float, require_int, require_real,
                       require_vector)
from ..tokenizers import wordpiece_checks
from .shared_checks import layer_and_head

# The config and weight classes (BertConfig, Seq2SeqEncoderLayer, …) appear in annotations only, never
# imported: bert.py imports this module, and the annotations are never evaluated.


def require_matrix(name: str, W, shape: tuple, dims: str):
    """W floating-point with shape `shape`; dims names it, as in "(d, d_ff) = (384, 1536)"."""
    require_float(name, W)
    if tuple(W.shape) != shape:
        raise ValueError(f"{name} must have shape {dims} = {shape}, got {tuple(W.shape)}")


def indices(name: str, a, size: int, dim: str, shape=None):
    """a an integer array, (b, n) or broadcastable to shape, with values in [0, size)."""
    require_array(name, a)
    xp = get_xp(a)
    fits = a.ndim == 2 if shape is None else broadcastable_to(a.shape, shape)
    if not xp.isdtype(a.dtype, "integral") or not fits:
        want = "(b, n)" if shape is None else f"broadcastable to (b, n) = {shape}"
        raise TypeError(f"{name} must be a {want} integer array, got dtype {a.dtype}, shape {tuple(a.shape)}")
    if a.size and bool(xp.any((a < 0) | (a >= size))):  # one device -> host transfer (a GPU would wrap a bad index)
        raise ValueError(f"{name} must lie in [0, {dim}={size}), got min {int(xp.min(a))}, max {int(xp.max(a))}")


def bert_layer_weights(lw: Seq2SeqEncoderLayer, cfg: BertConfig, where: str = "lw."):
    """One layer's arrays against cfg: matrices and LayerNorm gains required, biases and β may be None."""
    d, f = cfg.d, cfg.d_ff
    for name in ("W_q", "W_k", "W_v", "W_o"):  # h heads of d_h = d / h: h·d_h = d columns
        require_matrix(f"{where}self_attn.{name}", getattr(lw.self_attn, name), (d, d), "(d, d)")
    require_matrix(f"{where}W_1", lw.W_1, (d, f), "(d, d_ff)")
    require_matrix(f"{where}W_2", lw.W_2, (f, d), "(d_ff, d)")
    gains = {"ln1_g": lw.ln1_g, "ln2_g": lw.ln2_g}  # LayerNorm γ (d,)
    a = lw.self_attn
    biases = {"self_attn.b_q": a.b_q, "self_attn.b_k": a.b_k, "self_attn.b_v": a.b_v, "self_attn.b_o": a.b_o,
              "ln1_b": lw.ln1_b, "b_2": lw.b_2, "ln2_b": lw.ln2_b}  # (d,), or None: no bias, no β
    for name, p in [*gains.items(), *((k, p) for k, p in biases.items() if p is not None)]:
        require_vector(where + name, p, d, "d")
    if lw.b_1 is not None:
        require_vector(where + "b_1", lw.b_1, f, "d_ff")


def bert_embedding_weights(w: BertWeights, cfg: BertConfig):
    """The three embedding tables and the LayerNorm over their sum."""
    d = cfg.d
    require_matrix("w.W_E", w.W_E, (cfg.v, d), "(v, d)")
    require_matrix("w.W_pos", w.W_pos, (cfg.n_max, d), "(n_max, d)")
    require_matrix("w.W_type", w.W_type, (cfg.n_types, d), "(n_types, d)")
    require_vector("w.ln_g", w.ln_g, d, "d")
    if w.ln_b is not None:
        require_vector("w.ln_b", w.ln_b, d, "d")


def bert_weights(w: BertWeights, cfg: BertConfig):
    """Every array of w floating-point with the shape cfg gives it, named by its place in w."""
    bert_embedding_weights(w, cfg)
    if len(w.layers) != cfg.L:
        raise ValueError(f"w holds {len(w.layers)} layers, but the config says L={cfg.L}")
    for i, lw in enumerate(w.layers):
        bert_layer_weights(lw, cfg, f"w.layers[{i}].")


def bert_tokens(ids, cfg: BertConfig, token_types=None, positions=None):
    """ids (b, n) in [0, v) with 1 ≤ n ≤ n_max; token_types in [0, n_types), positions in [0, n_max)."""
    indices("ids", ids, cfg.v, "v")
    b, n = ids.shape
    if n == 0:
        raise ValueError(f"ids must hold at least one token per row, got shape {tuple(ids.shape)}")
    if n > cfg.n_max:
        raise ValueError(f"sequence of n={n} tokens exceeds the {cfg.n_max} learned positions")
    if token_types is not None:
        indices("token_types", token_types, cfg.n_types, "n_types", (b, n))
    if positions is not None:
        indices("positions", positions, cfg.n_max, "n_max", (b, n))


def learned_positions_range(name: str, value, n_max: int):
    """A length in [2, n_max]: room for [CLS] and [SEP], within the learned positions."""
    if not 2 <= value <= n_max:
        raise ValueError(f"{name} must lie in [2, {n_max}] (the learned positions), got {value}")


def one_text(text):
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")


def bert_config(cfg: BertConfig):
    """A config built by hand is checked as one read from a file is; errors name the field."""
    if cfg.n_seq is None:  # then n_seq = min(256, n_max): n_max must be a size first
        require_int(n_max=cfg.n_max, low=1)
    n_seq = min(256, int(cfg.n_max)) if cfg.n_seq is None else cfg.n_seq
    sizes = {f: getattr(cfg, f) for f in ("v", "d", "h", "L", "d_ff", "n_max", "n_types")}
    require_int(**sizes, n_seq=n_seq, low=1)
    require_real(eps=cfg.eps, positive=True)  # LayerNorm divides by √(var + eps)
    if cfg.d % cfg.h:
        raise ValueError(f"d={cfg.d} is not a multiple of h={cfg.h}: the head size d / h = {cfg.d / cfg.h:g} "
                         "must be a whole number")
    if not 2 <= n_seq <= cfg.n_max:
        raise ValueError(f"n_seq must lie in [2, n_max={cfg.n_max}] (room for [CLS] and [SEP], within the "
                         f"learned positions), got n_seq={n_seq}")


def bert_embeddings(ids, w: BertWeights, cfg: BertConfig, token_types, positions):
    bert_tokens(ids, cfg, token_types, positions)
    bert_embedding_weights(w, cfg)


def encoder_mask(lengths, n, causal):
    require_array("lengths", lengths)  # its backend makes the mask: a list has none
    require_bool(causal=causal)
    masks_checks.padding_mask(lengths, n, xp=None)
    if causal:
        masks_checks.causal_mask(n, None, None, xp=None)


def bert_encode(ids, lengths, w: BertWeights, cfg: BertConfig, *, token_types, causal, keep, mask, positions):
    bert_tokens(ids, cfg, token_types, positions)
    require_bool(causal=causal, keep=keep)
    bert_weights(w, cfg)
    b, n = ids.shape
    if mask is not None:
        shared_checks.mask_against(mask, (b, cfg.h, n, n), "(b, h, n, n)")
    elif lengths is None:
        raise ValueError("bert_encode needs lengths (real tokens per row) or a mask")
    else:  # the padding mask is built from lengths: their type and range as encoder_mask refuses them
        require_array("lengths", lengths)
        if tuple(lengths.shape) != (b,):
            raise ValueError(f"lengths must have shape (b,) = ({b},), one per row of ids, got {tuple(lengths.shape)}")
        encoder_mask(lengths, n, causal)


def mean_pool(hidden, lengths):
    require_float("hidden", hidden)
    if hidden.ndim != 3:
        raise ValueError(f"hidden must be (b, n, d), got shape {tuple(hidden.shape)}")
    require_array("lengths", lengths)
    b, n = hidden.shape[:2]
    lengths_np = to_numpy(lengths)  # host copy: b numbers
    if lengths_np.dtype.kind not in "iu":
        raise TypeError(f"lengths must be integers (token counts), got dtype {lengths_np.dtype}: {lengths_np.tolist()}")
    if tuple(lengths.shape) != (b,) or ((lengths_np < 0) | (lengths_np > n)).any():
        raise ValueError(f"lengths must be {b} numbers in [0, n={n}], got {lengths_np.tolist()}")


def l2_normalize(x, eps):
    require_float("x", x)
    require_real(eps=eps, positive=True)  # the floor of the norm: a zero row stays zero


def minilm_init(self: MiniLM, weights: BertWeights, config: BertConfig, tokenizer, xp):
    bert_weights(weights, config)
    top = max(tokenizer.vocab.values())
    if top >= config.v:  # the embedding lookup would fail (NumPy) or wrap silently (a GPU)
        raise ValueError(f"the tokenizer's ids reach {top}, beyond the v={config.v} rows of the embedding table")


def minilm_forward(self: MiniLM, texts, *, causal, max_length, keep):
    max_length = self.config.n_seq if max_length is None else max_length
    require_int(max_length=max_length, low=None)  # its range is checked next
    learned_positions_range("max_length", max_length, self.config.n_max)
    require_bool(causal=causal, keep=keep)
    wordpiece_checks.check_texts(texts)


def minilm_embed(self: MiniLM, texts, *, batch_size):
    wordpiece_checks.check_texts(texts)
    require_int(batch_size=batch_size, low=1)


def minilm_embed_packed(self: MiniLM, texts, n_ctx, *, restart_positions):
    wordpiece_checks.check_texts(texts)
    if n_ctx is not None:  # None: the total length, at most n_max
        require_int(n_ctx=n_ctx)
    require_bool(restart_positions=restart_positions)
    if n_ctx is not None:
        learned_positions_range("n_ctx", n_ctx, self.config.n_max)
    if n_ctx is not None and n_ctx < self.config.n_seq:  # a text cut to n_seq tokens may then not fit a row
        texts = [texts] if isinstance(texts, str) else texts
        documents_fit([len(self.tokenizer.encode(t, self.config.n_seq)) for t in texts], n_ctx)


def minilm_iter_attention_weights(self: MiniLM, text, *, causal):
    one_text(text)
    wordpiece_checks.check_texts([text])
    require_bool(causal=causal)


def minilm_attention_weights(self: MiniLM, text, *, causal, layer, head):
    minilm_iter_attention_weights(self, text, causal=causal)
    layer_and_head(self.config.L, self.config.h, layer, head)


def minilm_hidden_states(self: MiniLM, text):
    one_text(text)
    minilm_forward(self, [text], causal=False, max_length=None, keep=True)  # as forward([text]) refuses it
