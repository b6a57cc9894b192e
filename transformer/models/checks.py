"""Every refusal of the models' public functions, one check per function and of the same name.

A function of `bert.py` or `llama.py` names its check at the door (`@checked_by(checks.bert_encode)`);
the check receives every argument by keyword, the function's defaults filled in (it states none), and
raises a one-line error naming the bad value, or returns None. A method's check takes `self` first
and is named class_method (`minilm_embed`); a config's is named after its class (`bert_config`).
Checks shared by several doors (a weight matrix, an index array, one layer's weights) are the small
functions at the top.
"""
from __future__ import annotations

import numpy as np

from ..backend import get_xp, to_numpy
from ..core import embedding_checks, masks_checks, packing_checks, sampling_checks, shared_checks
from ..core.packing_checks import documents_fit
from ..require import (broadcastable_to, require_array, require_bool, require_float, require_int, require_real,
                       require_vector, stand_in)
from ..tokenizers import shared_checks as tokenizer_shared, wordpiece_checks
# The doors of encoder_decoder.py (the original Transformer's layers)
from .encoder_decoder_checks import seq2seq_decoder_layer, seq2seq_encoder_layer

# The config and weight classes (bert.BertConfig, …) appear in annotations only, never imported:
# the models import this module, and the annotations are never evaluated.


# --- shared pieces --------------------------------------------------------------------------
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


def bert_layer_weights(lw: BertLayer, cfg: BertConfig, where: str = "lw."):
    """One layer's arrays against cfg: matrices and LayerNorm gains required, biases and β may be None."""
    d, f = cfg.d, cfg.d_ff
    for name in ("W_q", "W_k", "W_v", "W_o"):  # h heads of d_h = d / h: h·d_h = d columns
        require_matrix(f"{where}attn.{name}", getattr(lw.attn, name), (d, d), "(d, d)")
    require_matrix(f"{where}W_1", lw.W_1, (d, f), "(d, d_ff)")
    require_matrix(f"{where}W_2", lw.W_2, (f, d), "(d_ff, d)")
    gains = {"ln1_g": lw.ln1_g, "ln2_g": lw.ln2_g}  # LayerNorm γ (d,)
    biases = {"attn.b_q": lw.attn.b_q, "attn.b_k": lw.attn.b_k, "attn.b_v": lw.attn.b_v, "attn.b_o": lw.attn.b_o,
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


# --- bert.py --------------------------------------------------------------------------------
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
    require_bool(causal=causal)
    masks_checks.padding_mask(lengths, n, xp=None)
    if causal:
        masks_checks.causal_mask(n, None, None, xp=None)


def encoder_layer(x, lw: BertLayer, cfg: BertConfig, mask):
    require_float("x", x)
    if x.ndim != 3 or x.shape[1] == 0 or x.shape[2] != cfg.d:
        raise ValueError(f"x must be (b, n, d) with n ≥ 1 and d={cfg.d}, got shape {tuple(x.shape)}")
    bert_layer_weights(lw, cfg)
    if mask is not None:
        b, n = x.shape[:2]
        shared_checks.mask_against(mask, (b, cfg.h, n, n), "(b, h, n, n)")


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
    if tuple(lengths.shape) != (b,) or ((lengths_np < 0) | (lengths_np > n)).any():
        raise ValueError(f"lengths must be {b} numbers in [0, n={n}], got {lengths_np.tolist()}")


def l2_normalize(x, eps):
    require_float("x", x)
    require_real(eps=eps, positive=True)  # the floor of the norm: a zero row stays zero


def minilm(self: MiniLM, weights: BertWeights, config: BertConfig, tokenizer, xp):
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


def layer_and_head(L: int, h: int, layer, head):
    """layer and head None, or Python-style indices into the L layers and h heads (−1 the last)."""
    for name, value, count in (("layer", layer, L), ("head", head, h)):
        if value is not None:
            require_int(low=None, **{name: value})
            if not -count <= value < count:
                raise ValueError(f"{name}={value} does not exist: the model has {count} {name}s "
                                 f"(0 … {count - 1}, or -1 for the last)")


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


# --- llama_fast.py --------------------------------------------------------------------------
def fast_forward_call(self, ids, cache, cos, sin, positions, key_valid, *, last_only):
    """Shapes, and the few ids and positions of the pass (b·n numbers, not the weights): ids (b, n)
    integers in [0, v) for a NumPy KVCache of b rows with room for n more, positions (b or 1, n)
    rows of the RoPE tables, key_valid (b, t + n) booleans."""
    from ..core.kv_cache import KVCache
    if type(cache) is not KVCache or not isinstance(cache.k[0], np.ndarray):
        raise TypeError(f"FastForward runs with the contiguous KVCache on NumPy arrays, got {type(cache).__name__}: "
                        "use llama.forward, which takes any cache on any backend")
    if not isinstance(ids, np.ndarray) or ids.ndim != 2 or ids.shape[1] < 1 or not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(f"ids must be a NumPy (b, n) integer array with n ≥ 1, got "
                         f"{getattr(ids, 'shape', type(ids).__name__)} {getattr(ids, 'dtype', '')}")
    (b, n), t, v = ids.shape, cache.length, self.cfg.v
    if cache.k[0].shape[0] != b:
        raise ValueError(f"ids hold b={b} sequences, the cache {cache.k[0].shape[0]}")
    if t + n > cache.n_max:
        raise ValueError(f"the KV cache holds n_max={cache.n_max} tokens: {t} cached + {n} new do not fit")
    if ids.min() < 0 or ids.max() >= v:
        raise ValueError(f"token ids must lie in [0, {v}), got {int(ids.min())} … {int(ids.max())}")
    shape = np.shape(positions)
    if len(shape) != 2 or shape[0] not in (1, b) or shape[1] != n:
        raise ValueError(f"positions must have shape (b, n) = ({b}, {n}) or (1, {n}), got {shape}")
    if np.min(positions) < 0 or np.max(positions) >= cos.shape[0]:
        raise ValueError(f"positions must lie in [0, {cos.shape[0]}) (the RoPE tables' rows), got "
                         f"{int(np.min(positions))} … {int(np.max(positions))}")
    if key_valid is not None and (np.shape(key_valid) != (b, t + n) or np.asarray(key_valid).dtype != bool):
        raise ValueError(f"key_valid must be a (b, t + n) = ({b}, {t + n}) boolean array, got "
                         f"{np.shape(key_valid)} {np.asarray(key_valid).dtype}")
    require_bool(last_only=last_only)


# --- llama.py -------------------------------------------------------------------------------
def llama_config(cfg: LlamaConfig):
    """Sizes are whole numbers ≥ 1, each key/value head serves a whole group of query heads, RoPE
    turns pairs of features, and eps and the RoPE base are positive."""
    sizes = {f: getattr(cfg, f) for f in ("L", "d", "h", "h_kv", "d_h", "d_ff", "v", "n_ctx")}
    require_int(**sizes, low=1)
    require_real(eps=cfg.eps, rope_base=cfg.rope_base, positive=True)
    require_bool(tied=cfg.tied)
    if int(cfg.h) % int(cfg.h_kv):
        raise ValueError(f"h must be a multiple of h_kv (each key/value head serves h / h_kv query heads), "
                         f"got h={int(cfg.h)}, h_kv={int(cfg.h_kv)}")
    if int(cfg.d_h) % 2:
        raise ValueError(f"d_h must be even (RoPE rotates pairs of features), got d_h={int(cfg.d_h)}")
    if cfg.rope_layout not in ("interleaved", "half"):
        raise ValueError(f"rope_layout must be 'interleaved' or 'half', got rope_layout={cfg.rope_layout!r}")


def forward(ids, w: LlamaWeights, cfg: LlamaConfig, cos_table, sin_table, *, cache, positions,
            key_valid, mask, attention, saved, last_only, attn_out, hidden_out):
    # ids in [0, v): checked on the host by Llama.encode, not here once per step on the device
    if mask is not None and key_valid is not None:
        raise ValueError("pass either mask or key_valid, not both: mask replaces the causal/padding mask")
    if mask is not None:  # a caller's mask: checked here once, not in every layer
        b, n = ids.shape
        n_past = 0 if cache is None else cache.length
        shared_checks.mask_against(mask, (b, cfg.h, n, n_past + n), "(b, h, n, n_past + n)")
    update = getattr(type(cache), "update", None)
    if hasattr(update, "check"):  # the new keys and values as the cache's own door refuses them, once, not per layer
        b, n = ids.shape
        kv = stand_in(w.W_E, (b, cfg.h_kv, n, cfg.d_h))  # [b, h_kv, n, d_h]
        update.check(cache, 0, kv, kv)
    if not cfg.tied:  # the untied LM head as lm_head refuses it
        embedding_checks.lm_head(stand_in(w.W_E, (cfg.d,)), None, W_out=w.W_out)
    if attention is not None and not callable(attention):
        raise TypeError(f"attention must be a function attention(q, k, v, mask) -> (o, kept), "
                        f"got {type(attention).__name__}")
    if saved is not None and not isinstance(saved, dict):
        raise TypeError(f"saved must be a dict to receive the activations, got {type(saved).__name__}")


def context_length(self: Llama, n: int):
    """n tokens fit in the model's context."""
    if n > self.config.n_ctx:
        raise ValueError(f"{n} tokens exceed the model's context of n_ctx={self.config.n_ctx}")


def generation_request(self: Llama, n_prompt: int, max_new_tokens, temperature, top_k, top_p):
    """A generation request, refused before any work, naming the bad setting."""
    require_int(max_new_tokens=max_new_tokens)
    sampling_checks.check_sampling(temperature, top_k, top_p)
    if n_prompt + max_new_tokens > self.config.n_ctx:
        raise ValueError(f"a prompt of {n_prompt} tokens + max_new_tokens={max_new_tokens} = "
                         f"{n_prompt + max_new_tokens} tokens exceed the model's context of "
                         f"n_ctx={self.config.n_ctx}: shorten the prompt or lower max_new_tokens")


def llama_encode(self: Llama, prompt):
    if isinstance(prompt, str):
        if self.tokenizer is None:
            raise ValueError("this model has no tokenizer: pass token ids, not text")
        tokenizer_shared.utf8_text(prompt)  # as the tokenizers' own encode refuses a lone surrogate
        return
    arr = np.asarray(to_numpy(prompt))
    if arr.ndim != 1 or (arr.size and not np.issubdtype(arr.dtype, np.integer)):
        raise TypeError(f"prompt must be text or a 1-D sequence of integer ids, got shape {arr.shape}, "
                        f"dtype {arr.dtype}")
    bad = [int(i) for i in arr if not 0 <= int(i) < self.config.v]
    if bad:
        raise ValueError(f"token ids must lie in [0, {self.config.v}), got {bad[:5]}")


def llama_logits(self: Llama, ids):
    parsed = self.encode(ids)  # the checked encode names a bad prompt
    if not parsed:
        raise ValueError("logits needs at least one token, got an empty sequence")
    context_length(self, len(parsed))
    return {"ids": parsed}  # parsed once: logits gets the ids


def llama_packed_logits(self: Llama, docs, n_ctx, *, restart_positions):
    if isinstance(docs, str) or not docs:
        raise ValueError("docs must be a non-empty list of texts or id sequences")
    ids = [self.encode(d) for d in docs]
    lengths = [len(d) for d in ids]
    empty = [i for i, n in enumerate(lengths) if not n]
    if empty:
        raise ValueError(f"documents {empty} have no tokens: every packed document needs at least one")
    n_ctx = min(sum(lengths), self.config.n_ctx) if n_ctx is None else n_ctx
    context_length(self, n_ctx)
    packing_checks.pack_documents(ids, n_ctx, pad_id=0, longest_first=False)  # the row size, and each document fits
    return {"docs": ids}


def some_tokens(self: Llama, text_or_ids, what: str):
    """At least one token (an empty list has no position to read), and no more than n_ctx. -> the ids"""
    ids = self.encode(text_or_ids)
    if not ids:
        raise ValueError(f"{what} needs at least one token, got an empty sequence")
    context_length(self, len(ids))
    return ids


def llama_iter_attention_weights(self: Llama, text_or_ids):
    return {"text_or_ids": some_tokens(self, text_or_ids, "attention_weights")}


def llama_attention_weights(self: Llama, text_or_ids, *, layer, head):
    layer_and_head(self.config.L, self.config.h, layer, head)
    return {"text_or_ids": some_tokens(self, text_or_ids, "attention_weights")}


def llama_hidden_states(self: Llama, text_or_ids):
    return {"text_or_ids": some_tokens(self, text_or_ids, "hidden_states")}


def llama_generation_bytes(self: Llama, n_prompt, max_new_tokens, *, b, use_cache):
    require_int(n_prompt=n_prompt, b=b, low=1)
    require_int(max_new_tokens=max_new_tokens)
    require_bool(use_cache=use_cache)


def sampling_seed(seed):
    """None, a NumPy Generator, or an integer ≥ 0: what np.random.default_rng takes as a seed."""
    if seed is not None and not isinstance(seed, np.random.Generator):
        require_int(seed=seed)


def given_cache(self: Llama, cache, n_tokens: int):
    """An empty cache with this model's L layers of h_kv heads of d_h, room for n_tokens."""
    if cache.length != 0:
        raise ValueError(f"the cache given already holds {cache.length} tokens; pass an empty one")
    k, cfg = getattr(cache, "k", None), self.config
    if isinstance(k, list) and all(hasattr(a, "shape") for a in k):  # KVCache, PagedKVCache: L × (·, h_kv, ·, d_h)
        got = (len(k), *(k[0].shape[1::2] if k else ()))
        if got != (cfg.L, cfg.h_kv, cfg.d_h):
            raise ValueError(f"the cache given holds (L, h_kv, d_h) = {got}; this model needs "
                             f"{(cfg.L, cfg.h_kv, cfg.d_h)}")
    if getattr(cache, "n_max", n_tokens) < n_tokens:
        raise ValueError(f"the cache given holds n_max={cache.n_max} tokens; the prompt and the new tokens "
                         f"need {n_tokens}")


def llama_next_token_probs(self: Llama, prompt, k):
    require_int(k=k, low=1)
    return {"prompt": llama_logits(self, prompt)["ids"]}  # the prompt, as logits checks it


def llama_stream(self: Llama, prompt, max_new_tokens, temperature, top_k, top_p, seed, use_cache, cache, stop_at_eos):
    ids = self.encode(prompt)
    if not ids:
        raise ValueError("the prompt is empty: give at least one token")
    generation_request(self, len(ids), max_new_tokens, temperature, top_k, top_p)
    sampling_seed(seed)
    require_bool(use_cache=use_cache, stop_at_eos=stop_at_eos)
    if use_cache and cache is not None:
        given_cache(self, cache, len(ids) + int(max_new_tokens))
    return {"prompt": ids}


def llama_generate_batch(self: Llama, prompts, max_new_tokens, temperature, top_k, top_p, seed, stop_at_eos):
    if isinstance(prompts, str):
        raise TypeError(f"generate_batch takes a list of prompts, got one str {prompts[:40]!r}: "
                        "pass [text], or use generate(text)")
    rows = [self.encode(p) for p in prompts]
    if not rows or not all(rows):
        raise ValueError("generate_batch needs at least one prompt and no empty prompt")
    generation_request(self, max(map(len, rows)), max_new_tokens, temperature, top_k, top_p)
    sampling_seed(seed)
    require_bool(stop_at_eos=stop_at_eos)
    return {"prompts": rows}
