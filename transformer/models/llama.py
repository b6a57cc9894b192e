"""A Llama-architecture decoder LLM (SmolLM2-135M) built from the core's functions (note 002).

    ids (b, n) --embed--> x (b, n, d)
    L × [ x = x + Attention(RMSNorm(x))       GQA, RoPE on q and k, causal mask, KV cache
          x = x + SwiGLU(RMSNorm(x)) ]
    RMSNorm --tied LM head: x W_Eᵀ--> logits (b, n, v)

Generation is one forward pass per new token. Without a cache, step t recomputes all t
positions; with the KV cache, the prompt is processed once (prefill) and each step then
feeds one token (decode), reading the keys and values of earlier positions from the cache.

Training runs the same forward: with `saved=` it keeps the activations its backward needs
(`llama_backward.forward_backward`), and the attention is a function passed in: `softmax_attention`
keeps the weights P, `dropout_attention` drops some of them out, and train/ passes FlashAttention's
tiled forward, which keeps each row's log-sum-exp instead (this module never imports flash/).
"""
from __future__ import annotations

import itertools

import numpy as np

from . import llama_checks as checks
from .llama_config import LayerWeights, LlamaConfig, LlamaWeights
from ..core.attention import attention_scores, dropout, repeat_kv, scaled_dot_product_attention, softmax
from . import counting
from .counting import SDPA_BUFFERS, packed_rows_per_pass
from .generation import (PREFILL_CHUNK, GenerationStats, decode_rows, device_kind, device_rows, engine_for, left_padded,
                         streams, through_cache)
from ..backend import get_xp, namespace, to_host, to_numpy
from ..require import checked_by
from ..core.embedding import embed, lm_head
from ..core.positions import apply_rope_half, apply_rope_interleaved, rope_cos_sin
from ..core.heads import merge_heads, split_heads
from ..core.kv_cache import KVCache
from ..core.layers import rms_norm, swiglu_ffn
from ..core.masks import causal_mask
from ..core.packing import map_rows, pack_documents
from ..core import sampling_checks
from ..core.sampling import sampling_settings

__all__ = ["LlamaConfig", "LayerWeights", "LlamaWeights", "Llama", "GenerationStats", "forward", "decoder_block",
           "attention_block", "softmax_attention", "dropout_attention", "decoder_mask", "PREFILL_CHUNK", "SDPA_BUFFERS"]


# --- the forward pass, top-down from small parts ----------------------------------------
# The weights were checked when loaded, and forward() builds q, k, v and the mask itself (or checks
# a caller's mask once): inside its door the blocks' calls (rms_norm, …) are trusted, their checks
# skipped. A decode step runs ~10 of them per layer, and checking each again cost ~20 % of a small
# model's step.
def softmax_attention(q, k, v, mask):  # [b, h, n, d_h], 2 × [b, h_kv, n_k, d_h] -> [b, h, n, d_h], {"P"}
    """softmax(q kᵀ/√d_h + mask) V with GQA, keeping the weights P (b, h, n, n_k): its backward needs them."""
    o, P = scaled_dot_product_attention(q, k, v, mask, return_weights=True)
    return o, {"P": P}


def attention_without_weights(q, k, v, mask):  # -> [b, h, n, d_h], {}
    """softmax_attention keeping nothing: generation's."""
    return scaled_dot_product_attention(q, k, v, mask), {}


def dropout_attention(q, k, v, mask, *, p: float, rng):  # -> [b, h, n, d_h], {"P", "keep": [b, h, n, n_k]}
    """softmax_attention with dropout on its weights, for training (as the Annotated Transformer and nanoGPT):
    P = softmax(q kᵀ/√d_h + mask), P̃ = dropout(P), o = P̃ V. Keeps P (for the softmax backward) and
    the keep-mask (for P̃), drawn from rng (a np.random.Generator: each layer draws the next masks)."""
    n_rep = q.shape[1] // k.shape[1]
    K, V = repeat_kv(k, n_rep), repeat_kv(v, n_rep)  # GQA: [b, h, n_k, d_h]
    P = softmax(attention_scores(q, K), mask=mask)  # [b, h, n, n_k]
    P_drop, keep = dropout(P, p, rng=rng)  # [b, h, n, n_k], the kept weights scaled by 1/(1 − p)
    return P_drop @ V, {"P": P, "keep": keep}  # [b, h, n, d_h]


def attention_block(x, lw: LayerWeights, cfg: LlamaConfig, cos, sin, mask, cache=None, layer: int = 0,
                    attention=softmax_attention, saved: dict | None = None,
                    attn_out: list | None = None):  # [b, n, d] -> [b, n, d]
    """Self-attention of one block: project, RoPE, cache, GQA attention, output projection.
    attention(q, k, v, mask) -> (o, kept: what its backward needs); saved receives q, k, v, o and kept,
    attn_out the weights P."""
    q = split_heads(x @ lw.W_q, cfg.h)  # [b, n, h·d_h] -> [b, h, n, d_h]
    k = split_heads(x @ lw.W_k, cfg.h_kv)  # [b, h_kv, n, d_h]
    v = split_heads(x @ lw.W_v, cfg.h_kv)  # [b, h_kv, n, d_h]
    # RoPE: rotate q and k by their positions, so q·k depends on the distance between them
    rope = apply_rope_interleaved if cfg.rope_layout == "interleaved" else apply_rope_half  # the weights' layout
    q = rope(q, cos, sin)  # [b, h, n, d_h]
    k = rope(k, cos, sin)  # [b, h_kv, n, d_h]
    # KV cache: store the new positions, read back all of them (only the h_kv heads are kept)
    if cache is not None:
        k, v = cache.update(layer, k, v)  # [b, h_kv, n_past + n, d_h]
    # GQA: each group of h / h_kv query heads shares one key/value head (repeated after the cache)
    o, kept = attention(q, k, v, mask)  # o: [b, h, n, d_h]
    if saved is not None:
        saved.update(q=q, k=k, v=v, o=o, **kept)
    if attn_out is not None:
        attn_out.append(kept.get("P"))
    return merge_heads(o) @ lw.W_o  # [b, n, h·d_h] @ [h·d_h, d] -> [b, n, d]


def decoder_block(x, lw: LayerWeights, cfg: LlamaConfig, cos, sin, mask, cache=None, layer: int = 0,
                  attn_out: list | None = None, attention=softmax_attention,
                  saved: dict | None = None):  # [b, n, d] -> [b, n, d]
    """Pre-norm block: x + Attention(RMSNorm(x)), then x + SwiGLU(RMSNorm(x)). attn_out receives the
    attention weights P; saved the block's activations its backward needs."""
    a = rms_norm(x, lw.attn_norm, cfg.eps)  # [b, n, d]
    if saved is not None:
        saved.update(x=x, a=a)
    x_mid = x + attention_block(a, lw, cfg, cos, sin, mask, cache, layer, attention, saved, attn_out)  # residual
    f = rms_norm(x_mid, lw.ffn_norm, cfg.eps)  # [b, n, d]
    if saved is not None:
        saved.update(x_mid=x_mid, f=f)
    return x_mid + swiglu_ffn(f, lw.W_gate, lw.W_up, lw.W_down)  # [b, n, d] residual


@checked_by(checks.decoder_mask)
def decoder_mask(n_q: int, n_past: int, key_valid=None, *, xp=None):  # -> [n_q, n_k] or [b, 1, n_q, n_k] or None
    """Causal mask for n_q new queries after n_past cached keys, and padded keys hidden.

    key_valid: (b, n_past + n_q) bool, False at left-padding positions. Returns None when
    every query may see every key (one decode step, no padding): no mask to apply.
    """
    if key_valid is None:
        return None if n_q == 1 else causal_mask(n_q, n_past + n_q, n_past, xp=xp)
    causal = causal_mask(n_q, n_past + n_q, n_past, xp=xp)  # [n_q, n_k]
    return causal[None, None, :, :] & key_valid[:, None, None, :]  # [b, 1, n_q, n_k]


@checked_by(checks.forward)
def forward(ids, w: LlamaWeights, cfg: LlamaConfig, cos_table, sin_table, *, cache=None, positions=None,
            key_valid=None, mask=None, attention=None, saved: dict | None = None,
            last_only: bool = False, attn_out: list | None = None,
            hidden_out: list | None = None):  # [b, n] int -> [b, n, v] (or [b, 1, v] if last_only)
    """The whole model on ids (b, n); with a cache, the ids come after cache.length cached ones.

    ids must lie in [0, v): they are not checked here, once per step on the device, but by
    Llama's methods on the host (`Llama.encode`).

    positions: (n,) or (b, n) token positions for RoPE (default n_past … n_past + n - 1).
    key_valid: (b, n_past + n) bool, False where a key is left padding.
    mask: a boolean mask broadcastable to (b, h, n, n_past + n) used instead of the causal
    one, e.g. `document_mask` for packed documents (then key_valid must be None).
    attention: attention(q, k, v, mask) -> (o (b, h, n, d_h), kept: a dict of what its backward needs),
    run by every block. None (the default): softmax attention over the causal mask (or `mask`), keeping
    its weights P where a caller takes them (saved, attn_out). One passed in (`dropout_attention`,
    train/'s FlashAttention) gets `mask` as the caller gave it: None where it masks itself.
    saved: a dict that receives the activations `llama_backward.forward_backward` needs: "ids", "cos",
    "sin" (RoPE's angles), per layer "layers.{l}." + "x" (the block's input), "a" (RMSNorm 1), "q", "k",
    "v" (after RoPE), "o" (the attention output), what the attention kept ("P", "keep" or "lse"), "x_mid"
    (after the attention residual), "f" (RMSNorm 2: SwiGLU's backward recomputes its hidden from f), then
    "x_final" and "h" (the final RMSNorm's input and output).
    last_only: apply the LM head to the last position only (all generation needs).
    attn_out / hidden_out: lists that receive each layer's attention weights (b, h, n, n_k)
    and the residual stream (b, n, d) after the embedding and after each block.
    """
    xp = get_xp(w.W_E)
    b, n = ids.shape
    n_past = 0 if cache is None else cache.length
    if positions is None:
        positions = xp.arange(n_past, n_past + n)  # [n]
    # RoPE angles: rows of the precomputed (n_ctx, d_h/2) tables
    cos = xp.take(cos_table, xp.reshape(positions, (-1,)), axis=0)  # [b·n or n, d_h/2]
    sin = xp.take(sin_table, xp.reshape(positions, (-1,)), axis=0)
    if positions.ndim == 2:  # one row of positions per sequence (left padding, packed rows)
        cos = xp.reshape(cos, (b, 1, n, cfg.d_h // 2))  # [b, 1, n, d_h/2], broadcasts over heads
        sin = xp.reshape(sin, (b, 1, n, cfg.d_h // 2))
    if saved is not None:
        saved.update(ids=ids, cos=cos, sin=sin)
    # Attention and mask: softmax over the causal mask (and padded keys hidden), unless the caller gave
    # a mask (checked at the door, once) or an attention of its own
    if attention is None:
        attention = softmax_attention if saved is not None or attn_out is not None else attention_without_weights
        mask = decoder_mask(n, n_past, key_valid, xp=xp) if mask is None else mask  # [n, n_k], [b, 1, n, n_k], None
    # Embedding, then L decoder blocks on the residual stream
    x = embed(ids, w.W_E)  # [b, n, d]; the ids were checked on the host (Llama.encode)
    if hidden_out is not None:
        hidden_out.append(x)
    for layer, lw in enumerate(w.layers):
        acts = None if saved is None else {}  # what this block's backward needs
        x = decoder_block(x, lw, cfg, cos, sin, mask, cache, layer, attn_out, attention, acts)  # [b, n, d]
        if saved is not None:
            saved.update({f"layers.{layer}.{name}": t for name, t in acts.items()})
        if hidden_out is not None:
            hidden_out.append(x)
    if cache is not None:
        cache.advance(n)  # every layer holds the n new positions
    # Final RMSNorm and the LM head (tied: the embedding table transposed)
    if last_only:
        x = x[:, -1:, :]  # [b, 1, d]
    x_norm = rms_norm(x, w.norm, cfg.eps)  # [b, n, d]
    if saved is not None:
        saved.update(x_final=x, h=x_norm)
    return lm_head(x_norm, w.W_E) if cfg.tied else lm_head(x_norm, W_out=w.W_out)  # [b, n, v]


class Llama:
    """A Llama model holding its weights, tokenizer and RoPE tables.

    >>> from transformer.models.llama_gguf import load_smollm2        # the loader builds it from a file
    >>> m = load_smollm2()                                             # doctest: +SKIP
    >>> m.tokenizer.decode(m.generate("The capital of France is", max_new_tokens=1))  # doctest: +SKIP
    ' Paris'
    """

    fast_path = True  # generation through the cache runs llama_fast.FastForward where it applies; False: forward()
    device_step = "graph"  # on a GPU, decode as a CUDA graph where it applies (generation.device_kind); None: never

    @checked_by(checks.llama_init)
    def __init__(self, config: LlamaConfig, weights: LlamaWeights, tokenizer=None, *, xp=None):
        self.config, self.weights, self.tokenizer = config, weights, tokenizer
        self.xp = get_xp(weights.W_E) if xp is None else namespace(xp)
        self.rope_rows, self.rope_cos, self.rope_sin = 0, None, None  # RoPE tables, grown on demand
        self.last_stats = GenerationStats()

    # --- RoPE tables ------------------------------------------------------------------
    def rope_tables(self, n: int):  # -> 2 × [≥ n, d_h/2] float32
        """cos and sin of positions 0 … n − 1 (or more rows), grown on demand (doubling, capped at n_ctx):
        built for all n_ctx up front, a file's n_ctx = 2²⁰ would cost 256 MiB before the first token."""
        if n > self.rope_rows:
            rows = min(max(n, 2 * self.rope_rows, 256), self.config.n_ctx)
            positions = self.xp.arange(rows)  # [rows]
            self.rope_cos, self.rope_sin = rope_cos_sin(positions, self.config.d_h, self.config.rope_base)
            self.rope_rows = rows
        return self.rope_cos, self.rope_sin  # 2 × [rows, d_h/2]

    cos = property(lambda self: self.rope_tables(self.config.n_ctx)[0])  # [n_ctx, d_h/2], for forward() callers
    sin = property(lambda self: self.rope_tables(self.config.n_ctx)[1])  # [n_ctx, d_h/2]

    # --- inputs ---------------------------------------------------------------------
    @checked_by(checks.llama_encode)
    def encode(self, prompt) -> list[int]:
        """Text -> ids with the model's tokenizer; a sequence of ids in [0, v) is passed through as ints."""
        if isinstance(prompt, str):
            return self.tokenizer.encode(prompt)
        return [int(i) for i in np.asarray(to_numpy(prompt))]

    def _ids_array(self, ids):  # list[int] -> [1, n] int64 on the model's device
        return self.xp.asarray(np.asarray([ids], dtype=np.int64))

    # --- full forward passes (no cache) ---------------------------------------------
    @checked_by(checks.llama_logits)
    def logits(self, ids):  # [n] -> [n, v]
        """Next-token logits at every position of one sequence (text or ids), no cache."""
        ids = self.encode(ids)
        return forward(self._ids_array(ids), self.weights, self.config, *self.rope_tables(len(ids)))[0, ...]  # [n, v]

    @checked_by(checks.llama_packed_logits)
    def packed_logits(self, docs, n_ctx: int | None = None, *, restart_positions: bool = True) -> list:
        """Several documents (texts or ids) packed into rows of n_ctx tokens, one forward
        pass, and each document's next-token logits cut back out: a list of [n_i, v].

        Each token sees only earlier tokens of its own document (`document_mask`), so every
        document's logits equal `logits(doc)` alone. n_ctx defaults to the total length (one
        row, no padding). restart_positions=False numbers each row 0 … n_ctx − 1 straight
        through: RoPE makes that change nothing, since scores depend on distances only.
        """
        docs = [self.encode(d) for d in docs]
        n_ctx = min(sum(map(len, docs)), self.config.n_ctx) if n_ctx is None else n_ctx
        p = pack_documents(docs, n_ctx)
        def run(part):  # a few rows at a time (packed_rows_per_pass) -> [rows, n_ctx, v]
            ids, positions, mask = part.model_inputs(self.xp, causal=True, restart_positions=restart_positions)
            return forward(ids, self.weights, self.config, *self.rope_tables(n_ctx), positions=positions, mask=mask)
        return map_rows(run, p, packed_rows_per_pass(self.config, n_ctx))  # per document [n_i, v]

    @checked_by(checks.llama_iter_attention_weights)
    def iter_attention_weights(self, text_or_ids):  # -> yields L × [h, n, n] NumPy
        """Each layer's causal attention probabilities, one layer at a time: the blocks run only as
        the next layer is asked for, so memory holds one layer's (h, n, n), never all L of them,
        and a caller that wants layer l stops after l + 1 blocks."""
        ids = self.encode(text_or_ids)
        n, w, cfg = len(ids), self.weights, self.config
        cos, sin = (t[:n, ...] for t in self.rope_tables(n))  # [n, d_h/2]: positions 0 … n − 1
        mask = decoder_mask(n, 0, xp=self.xp)  # [n, n] causal (None for one token)
        x = embed(self._ids_array(ids), w.W_E)  # [1, n, d]; ids checked by encode
        for lw in w.layers:
            maps: list = []
            x = decoder_block(x, lw, cfg, cos, sin, mask, attn_out=maps)  # [1, n, d]
            yield to_numpy(maps[0][0, ...])  # [h, n, n]

    @checked_by(checks.llama_attention_weights)
    def attention_weights(self, text_or_ids, *, layer: int | None = None, head: int | None = None):
        """The causal attention probabilities: row i is how much position i reads from each
        position j ≤ i (each row sums to 1). layer=None: a list of every layer's [h, n, n]
        (L of them in memory: 30 · 9 · n² floats for SmolLM2); layer=l (−1 the last): that layer's
        [h, n, n] only, from l + 1 blocks. head=k keeps that head: [n, n] (per layer)."""
        maps = self.iter_attention_weights(text_or_ids)  # L × [h, n, n], computed as consumed
        if layer is not None:
            maps = itertools.islice(maps, layer % self.config.L, None)
            m = next(maps)  # [h, n, n]
            return m if head is None else m[head]  # [h, n, n] or [n, n]
        return [m if head is None else m[head] for m in maps]  # L × [h, n, n] or L × [n, n]

    @checked_by(checks.llama_hidden_states)
    def hidden_states(self, text_or_ids) -> list:  # -> (L + 1) × [n, d] NumPy
        """The residual stream: after the embedding, then after each of the L blocks
        (before the final RMSNorm)."""
        ids = self.encode(text_or_ids)
        states: list = []
        forward(self._ids_array(ids), self.weights, self.config, *self.rope_tables(len(ids)), last_only=True,
                hidden_out=states)
        return [to_numpy(s[0, ...]) for s in states]  # (L + 1) × [n, d]

    @checked_by(checks.llama_next_token_probs)
    def next_token_probs(self, prompt, k: int = 10) -> list[tuple[int, str, float]]:
        """The k most likely next tokens after `prompt`: (id, text, probability), best first (NaN refused)."""
        z = forward(self._ids_array(ids := self.encode(prompt)), self.weights, self.config,
                    *self.rope_tables(len(ids)), last_only=True)[:, -1, :]  # [1, v]: v logits, not n·v
        sampling_checks.step_logits(z, 0)  # NaN or +inf: refused, as in generation
        p = to_numpy(softmax(z[0]))  # [v]
        top = np.argsort(-p, kind="stable")[:k]
        return [(int(i), self.tokenizer.decode([int(i)]) if self.tokenizer else "", float(p[i])) for i in top]

    # --- generation -----------------------------------------------------------------
    def new_cache(self, b: int = 1, n_max: int | None = None) -> KVCache:
        """A contiguous KV cache for b sequences of up to n_max tokens (default n_ctx)."""
        cfg = self.config
        n_max = cfg.n_ctx if n_max is None else n_max
        return KVCache(cfg.L, b, cfg.h_kv, n_max, cfg.d_h, dtype=self.weights.W_E.dtype, xp=self.xp)

    @checked_by(checks.llama_kv_cache_bytes)
    def kv_cache_bytes(self, n_tokens: int, b: int = 1) -> int:
        """2 (K and V) · L · b · h_kv · n · d_h · bytes per element, for this model's dtype.

        Only the h_kv key/value heads are stored: GQA makes SmolLM2's cache h / h_kv = 3× smaller;
        in float32, 2·30·3·64·4 = 46,080 bytes per token.
        """
        return counting.kv_cache_bytes(self.config, n_tokens, batch=b, dtype=self.weights.W_E.dtype)  # any backend's dtype

    @checked_by(checks.llama_generation_bytes)
    def generation_bytes(self, n_prompt: int, max_new_tokens: int, *, b: int = 1, use_cache: bool = True) -> int:
        """Memory a generation takes beyond the weights, at its peak: the KV cache of n_prompt +
        max_new_tokens tokens, plus the largest attention pass: SDPA_BUFFERS float32 arrays of
        (b, h, n_q, n_k) and its (n_q, n_k) boolean mask in forward(), or on the fast path (NumPy
        with the cache) one such array softmaxed in place and the mask as booleans and a float32 bias;
        plus what grows with the batch: the logits (b, v), sampling's copy, 3 × (b, n_q, d_ff) of SwiGLU.
        With the cache, prefill passes hold n_q ≤ PREFILL_CHUNK queries over the keys so far; without
        it, the last step recomputes all n_prompt + max_new_tokens − 1 positions (9.2 GB for SmolLM2
        at 8,000). In float32 for SmolLM2, 8,000 + 64 tokens: 371.6 MB of cache + 0.17 GB of passes."""
        n_prompt, max_new_tokens, b = int(n_prompt), int(max_new_tokens), int(b)
        if use_cache:
            cache = self.kv_cache_bytes(n_prompt + max_new_tokens, b)
            last = PREFILL_CHUNK * ((n_prompt - 1) // PREFILL_CHUNK)  # where the last prefill pass starts
            qk = max((n_prompt - last) * n_prompt, PREFILL_CHUNK * last)  # largest n_q · n_k of a pass: the last, or
            # the full one before it (a pass's n_q · n_k grows with its start until the last, which may be short)
        else:
            cache, qk = 0, max(n_prompt, n_prompt + max_new_tokens - 1) ** 2
        n_q = min(n_prompt, PREFILL_CHUNK) if use_cache else n_prompt + max_new_tokens - 1  # a pass's queries
        batch = 2 * b * self.config.v * 4 + 3 * b * n_q * self.config.d_ff * 4  # logits and their copy; SwiGLU
        if use_cache and self.fast_path and isinstance(self.weights.W_E, np.ndarray):  # llama_fast.FastForward
            return cache + batch + b * self.config.h * qk * 4 + 5 * b * qk
        return cache + batch + SDPA_BUFFERS * b * self.config.h * qk * 4 + qk

    def _stop_ids(self):
        eos = None if self.tokenizer is None else self.tokenizer.eos_id
        return set() if eos is None else {eos}

    def readable_engine(self, ids, cache, cos, sin, positions, key_valid=None):  # [b, n] NumPy -> [b, v]
        """The reference engine of the generation loop (generation.py): forward() through the cache."""
        xp = self.xp
        return forward(xp.asarray(ids), self.weights, self.config, cos, sin, cache=cache, positions=xp.asarray(positions),
                       key_valid=None if key_valid is None else xp.asarray(key_valid), last_only=True)[:, -1, :]

    def _step(self, cache, cos, sin, use_cache=True, positions=None, key_valid=None):  # -> step(ids [b, n]) -> [b, v]
        """The loop's step: the engine through the cache, or (use_cache=False) forward() over the whole
        sequence every time. Its engine's name goes to self.last_stats.engine."""
        if use_cache:
            engine, self.last_stats.engine = engine_for(self, cache)
            return lambda ids: through_cache(engine, ids, cache, cos, sin, positions, key_valid)
        self.last_stats.engine, seen = "no cache", []

        def recompute(ids):  # every position, every step
            seen.extend(ids[0].tolist())
            return forward(self._ids_array(seen), self.weights, self.config, cos, sin, last_only=True)[:, -1, :]
        return recompute

    @checked_by(checks.llama_stream)
    def stream(self, prompt, max_new_tokens: int = 64, temperature: float = 0.0, top_k=None, top_p=None,
               seed=None, use_cache: bool = True, cache=None, stop_at_eos: bool = True, suppress_tokens=()):
        """An iterator of the new token ids, one at a time (see `generate`).

        The request is checked at the door, before the first token is asked for.
        """
        ids = self.encode(prompt)
        suppress_tokens = tuple(int(i) for i in suppress_tokens)  # checked at the door: ids in [0, v)
        sampling = sampling_settings(temperature, top_k, top_p)  # checked at the door: now Python numbers
        max_new_tokens = int(max_new_tokens)
        self.last_stats = stats = GenerationStats(prompt_tokens=len(ids))
        if use_cache and cache is None and max_new_tokens > 0:
            cache = self.new_cache(1, len(ids) + max_new_tokens)
        cos, sin = self.rope_tables(len(ids) + max_new_tokens)  # 2 × [≥ n, d_h/2]: every position it reaches
        x, stop = np.asarray([ids], dtype=np.int64), self._stop_ids() if stop_at_eos else set()  # [1, n]
        on_device = use_cache and max_new_tokens > 0
        device = device_kind(self, cache, sampling, stop, suppress_tokens) if on_device else None
        if device:  # the decode step on the GPU, sampling there too
            rows = device_rows(device, self, x, cache, cos, sin, max_new_tokens, sampling, seed, stop, stats)
        else:
            rows = decode_rows(self._step(cache, cos, sin, use_cache), x, max_new_tokens, sampling,
                               rng=np.random.default_rng(seed), stop=stop, stats=stats, suppress=suppress_tokens)
        return (int(nxt[0]) for nxt, _ in rows)

    def generate(self, prompt, max_new_tokens: int = 64, temperature: float = 0.0, top_k=None, top_p=None,
                 seed=None, use_cache: bool = True, cache=None, stop_at_eos: bool = True,
                 suppress_tokens=()) -> list[int]:
        """Continue `prompt` (text or ids); return the new ids (ending with EOS if it came).

        temperature 0 is greedy; otherwise sample from softmax(logits / T) after top-k and
        top-p filtering, with a seeded generator. use_cache=False recomputes the whole
        sequence every step (same tokens, slower). cache: an empty cache object with
        update/advance/length (default: a contiguous KVCache sized to the request).
        stop_at_eos=False always produces max_new_tokens (for timing). Timings land in
        `self.last_stats`, and which path computed the steps in `self.last_stats.engine`.
        On a GPU (CuPy, float32, one prompt) the decode steps run as a CUDA graph that also samples
        ("graph", `device_step`): greedy gives the same ids; a temperature, top-k and top-p draw from the
        same distribution with the device's own random stream, reproducible from `seed`.
        suppress_tokens: ids never generated (a trained decoder's padding id): their logits are -inf
        before each step's choice, greedy or sampled; the steps then run in the host loop.
        """
        return list(self.stream(prompt, max_new_tokens, temperature, top_k, top_p, seed, use_cache, cache,
                                stop_at_eos, suppress_tokens))

    @checked_by(checks.llama_generate_batch)
    def generate_batch(self, prompts, max_new_tokens: int = 64, temperature: float = 0.0, top_k=None,
                       top_p=None, seed=None, stop_at_eos: bool = True) -> list[list[int]]:
        """Generate for several prompts at once, left-padded to a common length.

        Padding goes on the left so every sequence's last prompt token sits in the same
        column; padded keys are masked out and each row's positions start at 0 on its
        first real token, so each row's logits are those it has alone: greedy rows get the tokens they
        get alone. seed: one seed, one random stream shared by the rows (two equal prompts differ), or
        one seed a prompt, row i sampled as `generate(prompts[i], seed=seed[i])` samples it. Each decode
        step reads every weight once for all b rows. Timings land in `self.last_stats` (batch=b).
        """
        rows = [self.encode(p) for p in prompts]
        b = len(rows)
        sampling = sampling_settings(temperature, top_k, top_p)  # checked at the door
        max_new_tokens = int(max_new_tokens)
        pad = self.tokenizer.pad_id if self.tokenizer and self.tokenizer.pad_id is not None else 0
        x, valid, positions = left_padded(rows, max_new_tokens, pad)  # [b, n_p], 2 × [b, n_p + max_new_tokens]
        self.last_stats = stats = GenerationStats(prompt_tokens=x.size, batch=b)  # padding included
        cache = self.new_cache(b, valid.shape[1])
        step = self._step(cache, *self.rope_tables(valid.shape[1]), positions=positions, key_valid=valid)
        out = [[] for _ in range(b)]
        for nxt, live in decode_rows(step, x, max_new_tokens, sampling, rng=streams(seed), pad=pad,
                                     stop=self._stop_ids() if stop_at_eos else set(), stats=stats):
            for i in np.flatnonzero(live):  # a finished row was fed padding: its id is no output
                out[i].append(int(nxt[i]))
        return out
