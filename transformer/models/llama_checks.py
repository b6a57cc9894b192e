"""The refusals of llama.py's public functions, one check per function and of the same name.

A method's check takes `self` first and is named class_method (`llama_logits`). Parse, then check:
a check that tokenizes a prompt to judge it returns `{name: ids}`, and the door hands the ids to the
method, so a prompt is tokenized once. The small pieces several doors share (a prompt's tokens
against the context, a generation request, a seed, a given cache) sit beside the first door that
uses them.
"""
from __future__ import annotations

import numpy as np

from ..backend import get_xp, to_numpy
from ..core import embedding_checks, packing_checks, sampling_checks, shared_checks
from ..require import require_array, require_bool, require_float, require_int, require_real, stand_in
from ..tokenizers import shared_checks as tokenizer_shared
from .shared_checks import layer_and_head

# The config and weight classes (LlamaConfig, …) appear in annotations only, never imported:
# llama.py imports this module, and the annotations are never evaluated.


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
    # ids in [0, v): checked on the host by Llama.encode, not here once per step on the device; their kind and
    # shape cost nothing to check (a list, a float array, a 1-D row failed inside NumPy or on ids.shape)
    integer_array("ids", ids)
    if ids.ndim != 2 or ids.shape[1] == 0:
        raise ValueError(f"ids must be (b, n) with n ≥ 1, got shape {tuple(ids.shape)}")
    if positions is not None:
        integer_array("positions", positions)
        if tuple(positions.shape) not in ((ids.shape[1],), tuple(ids.shape)):
            raise ValueError(f"positions must be (n,) or (b, n) = {tuple(ids.shape)}, got {tuple(positions.shape)}")
    require_bool(last_only=last_only)
    if key_valid is not None:  # checked once here, not by decoder_mask in every step's mask
        key_valid_shape(key_valid, ids.shape[0], ids.shape[1] + (0 if cache is None else cache.length))
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


def decoder_mask(n_q, n_past, key_valid, *, xp):
    require_int(n_q=n_q, low=1)
    require_int(n_past=n_past)
    if key_valid is not None:
        key_valid_shape(key_valid, None, n_past + n_q)


def key_valid_shape(key_valid, b, n_k):
    """key_valid: (b, n_past + n) booleans, False at left padding (b None: any batch)."""
    require_array("key_valid", key_valid)
    if not get_xp(key_valid).isdtype(key_valid.dtype, "bool"):
        raise TypeError(f"key_valid must be booleans (False at left padding), got dtype {key_valid.dtype}")
    if key_valid.ndim != 2 or key_valid.shape[1] != n_k or (b is not None and key_valid.shape[0] != b):
        raise ValueError(f"key_valid must be (b, n_past + n) = ({'b' if b is None else b}, {n_k}), one flag a key, "
                         f"got shape {tuple(key_valid.shape)}")


def integer_array(name, a):
    """An array of integers (its dtype read, never its values: no device -> host transfer)."""
    require_array(name, a)
    if not get_xp(a).isdtype(a.dtype, "integral"):
        raise TypeError(f"{name} must be integers, got dtype {a.dtype}")


def llama_init(self: Llama, config, weights, tokenizer, *, xp):
    """Floating-point weights: an integer table ran until the KV cache refused its keys, named k_new."""
    arrays = [("W_E", weights.W_E), ("norm", weights.norm), ("W_out", weights.W_out)]
    arrays += [(f"layers[{i}].{name}", a) for i, lw in enumerate(weights.layers) for name, a in vars(lw).items()]
    for name, a in arrays:
        if a is not None:
            require_float(name, a)


def context_length(self: Llama, n: int):
    """n tokens fit in the model's context."""
    if n > self.config.n_ctx:
        raise ValueError(f"{n} tokens exceed the model's context of n_ctx={self.config.n_ctx}")


def generation_request(self: Llama, n_prompt: int, max_new_tokens, temperature, top_k, top_p, *, b: int = 1,
                       use_cache: bool = True):
    """A generation request, refused before any work, naming the bad setting: its sampling, its length
    against the context, and its memory (the KV cache of b rows, the largest attention pass) against the
    memory available, before the cache is allocated."""
    require_int(max_new_tokens=max_new_tokens)
    sampling_checks.check_sampling(temperature, top_k, top_p)
    if n_prompt + max_new_tokens > self.config.n_ctx:
        tokens = f"{n_prompt} token{'s' if n_prompt != 1 else ''}"
        raise ValueError(f"a prompt of {tokens} + max_new_tokens={max_new_tokens} = "
                         f"{n_prompt + max_new_tokens} tokens exceed the model's context of "
                         f"n_ctx={self.config.n_ctx}: shorten the prompt or lower max_new_tokens")
    rows = f"{b} rows of " if b > 1 else ""
    shared_checks.fits_in_memory(f"generating {rows}{n_prompt} + {max_new_tokens} tokens",
                                 self.generation_bytes(n_prompt, max_new_tokens, b=b, use_cache=use_cache), self.xp)


def llama_encode(self: Llama, prompt):
    if isinstance(prompt, str):
        if self.tokenizer is None:
            raise ValueError("this model has no tokenizer: pass token ids, not text")
        n_bytes = len(tokenizer_shared.utf8_text(prompt))  # as the tokenizers' own encode refuses a lone surrogate
        longest = self.tokenizer.max_token_bytes
        if n_bytes > self.config.n_ctx * longest:  # refused before tokenizing: 4 MB of spaces took 32 s
            raise ValueError(f"a text of {n_bytes:,} bytes holds at least {-(-n_bytes // longest):,} tokens (none "
                             f"stands for more than {longest} byte{'s' if longest != 1 else ''}), more than the "
                             f"model's context of n_ctx={self.config.n_ctx}: shorten it")
        return
    try:
        arr = np.asarray(to_numpy(prompt))
    except (TypeError, ValueError):  # a ragged list [[1, 2], [3]]: NumPy's "inhomogeneous shape"
        raise TypeError(f"prompt must be text or a 1-D sequence of integer ids, got {str(prompt)[:40]}") from None
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
    shared_checks.fits_in_memory(f"the logits of {len(ids):,} documents ({sum(lengths):,} tokens × v = "
                                 f"{self.config.v:,} float32)", 4 * sum(lengths) * self.config.v, self.xp)
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


def llama_kv_cache_bytes(self: Llama, n_tokens, b):
    require_int(n_tokens=n_tokens)
    require_int(b=b, low=1)  # b = 0 answered 0 bytes; b = -2 was named "batch"


def llama_generation_bytes(self: Llama, n_prompt, max_new_tokens, *, b, use_cache):
    require_int(n_prompt=n_prompt, b=b, low=1)
    require_int(max_new_tokens=max_new_tokens)
    require_bool(use_cache=use_cache)
    if n_prompt + max_new_tokens > self.config.n_ctx:
        raise ValueError(f"n_prompt={n_prompt} + max_new_tokens={max_new_tokens} tokens exceed the model's context of "
                         f"n_ctx={self.config.n_ctx}: no generation holds that many")


def sampling_seed(seed):
    """None, a NumPy Generator, or an integer ≥ 0: what np.random.default_rng takes as a seed."""
    if seed is not None and not isinstance(seed, np.random.Generator):
        require_int(seed=seed)


def given_cache(self: Llama, cache, n_tokens: int):
    """An empty cache with this model's L layers of h_kv heads of d_h, room for n_tokens."""
    if not all(hasattr(cache, name) for name in ("length", "update", "advance")):
        raise TypeError(f"cache must be a KV cache, with length, update and advance (model.new_cache(), T.KVCache, "
                        f"T.PagedKVCache), got {type(cache).__name__}")
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


def llama_stream(self: Llama, prompt, max_new_tokens, temperature, top_k, top_p, seed, use_cache, cache, stop_at_eos,
                 suppress_tokens):
    ids = self.encode(prompt)
    if not ids:
        raise ValueError("the prompt is empty: give at least one token")
    require_bool(use_cache=use_cache, stop_at_eos=stop_at_eos)
    generation_request(self, len(ids), max_new_tokens, temperature, top_k, top_p, use_cache=use_cache)
    sampling_seed(seed)
    if use_cache and cache is not None:
        given_cache(self, cache, len(ids) + int(max_new_tokens))
    return {"prompt": ids, "suppress_tokens": suppressed_ids(self, suppress_tokens)}


def suppressed_ids(self: Llama, suppress_tokens) -> tuple:
    """Ids in [0, v), as a tuple, leaving at least one id that may be generated."""
    try:
        ids = tuple(suppress_tokens)
    except TypeError:
        raise TypeError("suppress_tokens must be a collection of token ids, "
                        f"got {type(suppress_tokens).__name__}") from None
    for i, t in enumerate(ids):
        require_int(**{f"suppress_tokens[{i}]": t})
    v = self.config.v
    bad = [int(t) for t in ids if not 0 <= int(t) < v]
    if bad:
        raise ValueError(f"suppress_tokens must lie in [0, {v}), got {bad[:5]}")
    if len(set(map(int, ids))) >= v:
        raise ValueError(f"suppress_tokens holds every id of the vocabulary (v={v}): no token could be generated")
    return tuple(int(t) for t in ids)


def llama_generate_batch(self: Llama, prompts, max_new_tokens, temperature, top_k, top_p, seed, stop_at_eos):
    if isinstance(prompts, str):
        raise TypeError(f"generate_batch takes a list of prompts, got one str {prompts[:40]!r}: "
                        "pass [text], or use generate(text)")
    if not isinstance(prompts, (list, tuple)):
        raise TypeError(f"generate_batch takes a list of prompts (texts or id lists), got {type(prompts).__name__}")
    rows = [self.encode(p) for p in prompts]
    if not rows or not all(rows):
        raise ValueError("generate_batch needs at least one prompt and no empty prompt")
    generation_request(self, max(map(len, rows)), max_new_tokens, temperature, top_k, top_p, b=len(rows))
    if isinstance(seed, (list, tuple)):  # one a prompt
        if len(seed) != len(rows):
            raise ValueError(f"seed must be one seed, or one for each of the {len(rows)} prompts; got {len(seed)}")
        for s in seed:
            sampling_seed(s)
    else:
        sampling_seed(seed)
    require_bool(stop_at_eos=stop_at_eos)
    return {"prompts": rows}
