"""Counting a model exactly: parameters, FLOPs, KV-cache and attention bytes (notes 001, 002, 004).

Everything is computed from a config (a built-in name, a config.json dict or path, or a
`ModelConfig`), in the dimension names of the legend: b, n, d, h, h_kv, d_h, d_ff, v, L.

Parameters, per decoder layer (biases where the model has them):

    attention  d·h·d_h (W_q) + 2·d·h_kv·d_h (W_k, W_v) + h·d_h·d (W_o)
    FFN        3·d·d_ff (SwiGLU: gate, up, down)  or  2·d·d_ff (W_1, W_2)
    norms      2 per layer, d numbers each (RMSNorm γ) or 2d (LayerNorm γ, β)
  plus the token embedding v·d, the LM head v·d unless tied, and a final norm.

FLOPs count matrix products only, as 2·m·k·n for an (m, k) @ (k, n) product (one multiply
and one add per term). Projections cost 2 · (weights) per token; attention adds two terms
that grow with the context: S = Q Kᵀ and P V, each 2·h·d_h·n_q·n_k per layer.

KV cache (note 001):  bytes per token = 2 (K and V) · L · h_kv · d_h · bytes per number.
"""
from __future__ import annotations

import math
import operator

import numpy as np

from ..require import require_int
from .configs import ModelConfig, load_config

SDPA_BUFFERS = 4  # scores, masked scores, exp, and the normalised weights, alive together in softmax
PACKED_PASS_BYTES = 1 << 28  # Llama.packed_logits runs as many rows at once as fit 256 MiB


def packed_rows_per_pass(cfg, n_ctx: int) -> int:
    """Packed rows one pass of Llama.packed_logits holds at once: float32 logits [n_ctx, v], one layer's
    scores [h, n_ctx, n_ctx] × SDPA_BUFFERS and SwiGLU's three [n_ctx, d_ff] a row, within
    PACKED_PASS_BYTES (SmolLM2: 1 row at n_ctx = 512 or 2048, 18 at 64)."""
    per_row = 4 * n_ctx * (cfg.v + SDPA_BUFFERS * cfg.h * n_ctx + 3 * cfg.d_ff)
    return max(1, PACKED_PASS_BYTES // per_row)


__all__ = [
    "DTYPE_BYTES", "dtype_bytes", "parameter_breakdown", "count_parameters",
    "forward_flops", "prefill_flops", "decode_flops", "kv_cache_bytes_per_token",
    "kv_cache_bytes", "attention_score_bytes", "arithmetic_intensity", "paged_memory_report",
]

# Bytes per number of the storage formats one meets for weights and caches.
DTYPE_BYTES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "float8": 1, "int8": 1}


def dtype_bytes(dtype) -> int:
    """Bytes per element: a name from DTYPE_BYTES, or a NumPy dtype, its type or its string
    ("f2", "<f4", np.float16, np.dtype("int8")).

    >>> dtype_bytes("bfloat16"), dtype_bytes("f4"), dtype_bytes(np.float64)
    (2, 4, 8)
    """
    if isinstance(dtype, str) and dtype in DTYPE_BYTES:
        return DTYPE_BYTES[dtype]
    try:  # NumPy/CuPy dtypes, scalar types and dtype strings: numbers only ("U", "O" are not)
        np_dtype = np.dtype(dtype)
        if np_dtype.kind in "biufc":
            return int(np_dtype.itemsize)
    except (TypeError, ValueError):
        pass
    name = str(getattr(dtype, "name", None) or dtype).rsplit(".", 1)[-1]  # other Array-API dtypes
    if name in DTYPE_BYTES:
        return DTYPE_BYTES[name]
    raise ValueError(f"unknown dtype {dtype!r}: use one of {', '.join(DTYPE_BYTES)} or a NumPy number "
                     "dtype such as 'f2'")


def _count(name: str, n) -> int:  # Python or NumPy integer -> int
    require_int(**{name: n})
    return int(n)


# ---------------------------------------------------------------- parameters

def _attention_weights(c: ModelConfig) -> int:  # matrices of one attention block
    return c.d * c.h * c.d_h + 2 * c.d * c.h_kv * c.d_h + c.h * c.d_h * c.d  # W_q, W_k and W_v, W_o


def _attention_params(c: ModelConfig) -> int:  # one attention block, biases included
    biases = (c.h * c.d_h + 2 * c.h_kv * c.d_h if c.qkv_bias else 0) + (c.d if c.o_bias else 0)
    return _attention_weights(c) + biases


def _ffn_weights(c: ModelConfig) -> int:  # W_gate, W_up (d, d_ff), W_down (d_ff, d); or W_1, W_2
    return (3 if c.gated_ffn else 2) * c.d * c.d_ff


def _ffn_params(c: ModelConfig) -> int:  # one FFN block, biases included
    biases = ((2 if c.gated_ffn else 1) * c.d_ff + c.d) if c.ffn_bias else 0
    return _ffn_weights(c) + biases


def _norm_params(c: ModelConfig) -> int:  # one norm
    return c.d if c.norm == "rms" else 2 * c.d


def _n_blocks(c: ModelConfig) -> tuple[int, int]:
    """(attention blocks, FFN blocks): an encoder–decoder's decoder layers hold two attentions."""
    if c.family == "encoder-decoder":
        return c.L_enc + 2 * c.L, c.L_enc + c.L  # encoder self; decoder self + cross
    return c.L, c.L


def parameter_breakdown(config) -> dict:
    """Parameters by part: embeddings, attention, ffn, norms, lm_head, pooler, and total.

    lm_head is 0 when it is tied to the token embedding. For an encoder–decoder the
    decoder layers hold a self- and a cross-attention block and three norms.

    >>> parameter_breakdown("gpt2")["total"]
    124439808
    """
    c = load_config(config)
    enc_dec = c.family == "encoder-decoder"
    n_attn, n_ffn = _n_blocks(c)
    n_norms = 2 * c.L + (c.L + 2 * c.L_enc if enc_dec else 0)  # per-layer norms
    if c.final_norm:
        n_norms += 2 if enc_dec else 1  # one after each stack
    if c.embed_norm:
        n_norms += 1
    emb = c.v * c.d  # token embedding (shared by encoder, decoder and head when tied)
    if c.positions == "learned":
        emb += c.n_ctx * c.d
    emb += c.type_vocab * c.d
    parts = {
        "embeddings": emb,
        "attention": n_attn * _attention_params(c),
        "ffn": n_ffn * _ffn_params(c),
        "norms": n_norms * _norm_params(c),
        "lm_head": c.v * c.d if (c.lm_head and not c.tied) else 0,
        "pooler": c.d * c.d + c.d if c.pooler else 0,
    }
    parts["total"] = sum(parts.values())
    return parts


def count_parameters(config) -> int:
    """Total number of parameters (a tied head counted once).

    >>> count_parameters("llama-3-8b")
    8030261248
    """
    return parameter_breakdown(config)["total"]


# ---------------------------------------------------------------- FLOPs

def _qkvo_flops(c: ModelConfig, n_q: int, n_kv: int) -> int:
    """Projections of one attention block: queries/output for n_q tokens, keys/values for n_kv."""
    return 2 * (n_q * c.d * c.h * c.d_h  # Q = X W_q
                + 2 * n_kv * c.d * c.h_kv * c.d_h  # K = C W_k, V = C W_v
                + n_q * c.h * c.d_h * c.d)  # O W_o


def _ffn_flops(c: ModelConfig, n: int) -> int:
    return 2 * n * c.d * c.d_ff * (3 if c.gated_ffn else 2)


def _score_flops(c: ModelConfig, n_q: int, n_k: int) -> int:
    """S = Q Kᵀ: h heads of (n_q, d_h) @ (d_h, n_k). P V costs the same."""
    return 2 * c.h * n_q * n_k * c.d_h


def forward_flops(config, n_tokens: int, *, batch: int = 1, phase: str = "prefill",
                  logits: str = "all", n_source: int | None = None) -> dict:
    """Matmul FLOPs of one forward pass, split by part.

    phase="prefill": n_tokens tokens at once, each query scored against all n_tokens keys
    (dense n×n scores, as naive attention computes them before masking).
    phase="decode": one new token at position n_tokens, with n_tokens tokens already in
    the KV cache: its query meets n_tokens + 1 keys; K/V of the past are not recomputed.
    logits: "all" (a head on every prefill token) or "last" (only the next token's logits).
    n_source: source length of an encoder–decoder (default n_tokens).

    Returns ints: qkvo, ffn, head (LM head, or BERT's pooler), scores (Q Kᵀ), mix (P V),
    matmul (= qkvo + ffn + head: grows like n), attention (= scores + mix: grows like n²),
    total, and tokens (queries processed, for per-token figures).
    """
    c = load_config(config)
    n = _count("n_tokens", n_tokens)
    b = _count("batch", batch)
    if phase not in ("prefill", "decode"):
        raise ValueError(f"phase must be 'prefill' or 'decode', got {phase!r}")
    if logits not in ("all", "last"):
        raise ValueError(f"logits must be 'all' or 'last', got {logits!r}")
    if phase == "decode" and c.family == "encoder":
        raise ValueError(f"{c.name!r} is an encoder: it has no decode step (it generates nothing)")
    n_src = n if n_source is None else _count("n_source", n_source)
    f = dict(qkvo=0, ffn=0, head=0, scores=0, mix=0)

    def add_self_attention(n_q, n_k, layers):
        f["qkvo"] += layers * _qkvo_flops(c, n_q, n_q)  # only the new tokens are projected
        f["scores"] += layers * _score_flops(c, n_q, n_k)
        f["mix"] += layers * _score_flops(c, n_q, n_k)

    n_q, n_k = (n, n) if phase == "prefill" else (1, n + 1)
    if c.family == "encoder-decoder" and phase == "prefill":  # the encoder runs once, on the source
        add_self_attention(n_src, n_src, c.L_enc)
        f["ffn"] += c.L_enc * _ffn_flops(c, n_src)
    add_self_attention(n_q, n_k, c.L)
    if c.family == "encoder-decoder":  # cross-attention: queries from the decoder, K/V from the source
        kv_tokens = n_src if phase == "prefill" else 0  # cross K/V are cached after the first pass
        f["qkvo"] += c.L * _qkvo_flops(c, n_q, kv_tokens)
        f["scores"] += c.L * _score_flops(c, n_q, n_src)
        f["mix"] += c.L * _score_flops(c, n_q, n_src)
    f["ffn"] += c.L * _ffn_flops(c, n_q)
    if c.lm_head:
        head_tokens = n_q if (phase == "prefill" and logits == "all") else 1
        f["head"] = 2 * head_tokens * c.d * c.v  # (n, d) @ (d, v)
    elif c.pooler:
        f["head"] = 2 * c.d * c.d  # the first token through a (d, d) dense layer
    f = {k: b * val for k, val in f.items()}
    f["matmul"] = f["qkvo"] + f["ffn"] + f["head"]
    f["attention"] = f["scores"] + f["mix"]
    f["total"] = f["matmul"] + f["attention"]
    f["tokens"] = b * n_q
    return f


def prefill_flops(config, n_tokens: int, *, batch: int = 1, logits: str = "all") -> dict:
    """forward_flops for a prompt of n_tokens processed at once."""
    return forward_flops(config, n_tokens, batch=batch, phase="prefill", logits=logits)


def decode_flops(config, n_tokens: int, *, batch: int = 1) -> dict:
    """forward_flops for one generated token with n_tokens already cached."""
    return forward_flops(config, n_tokens, batch=batch, phase="decode")


# ---------------------------------------------------------------- memory

def kv_cache_bytes_per_token(config, dtype="float16") -> int:
    """2 (K and V) · L · h_kv · d_h · bytes: what one more token adds to the cache (note 001).

    Only the h_kv key/value heads are stored; GQA/MQA shrink the cache by h/h_kv.
    >>> kv_cache_bytes_per_token("llama-3-8b")  # 2 · 32 · 8 · 128 · 2
    131072
    """
    c = load_config(config)
    if c.family == "encoder":
        raise ValueError(f"{c.name!r} is an encoder: it attends bidirectionally in one pass and "
                         "keeps no KV cache")
    return 2 * c.L * c.h_kv * c.d_h * dtype_bytes(dtype)


def kv_cache_bytes(config, n_tokens: int, batch: int = 1, dtype="float16") -> int:
    """Bytes of a KV cache holding n_tokens tokens for each of `batch` sequences.

    For an encoder–decoder this is the decoder's self-attention cache; the cross-attention
    K/V of the source add the same per source token.
    """
    n = _count("n_tokens", n_tokens)
    b = _count("batch", batch)
    return b * n * kv_cache_bytes_per_token(config, dtype)


def attention_score_bytes(config, n_tokens: int, batch: int = 1, dtype="float32") -> int:
    """Bytes of the (b, h, n, n) score matrix naive attention materialises in one layer.

    Layers run one after another, so this is the peak for the scores; it grows like n²
    while the KV cache grows like n (the reason for tiled, flash-style attention).
    """
    c = load_config(config)
    n = _count("n_tokens", n_tokens)
    b = _count("batch", batch)
    return b * c.h * n * n * dtype_bytes(dtype)


def _matmul_weight_params(c: ModelConfig) -> int:
    """Numbers in the weight matrices a forward pass multiplies by (a tied head counts: it is read)."""
    n_attn, n_ffn = _n_blocks(c)
    head = c.v * c.d if c.lm_head else (c.d * c.d if c.pooler else 0)
    return n_attn * _attention_weights(c) + n_ffn * _ffn_weights(c) + head


def arithmetic_intensity(config, n_tokens: int, *, batch: int = 1, dtype="float16") -> dict:
    """FLOPs per byte moved, for prefilling n_tokens vs one decode step at position n_tokens.

    Bytes moved: every weight matrix read once per pass (whatever b and n are), plus the
    KV cache traffic (prefill writes n tokens; decode reads n and writes 1), all in `dtype`.
    Activations are left out (they are small next to weights at these shapes).
    Prefill reuses each weight for b·n tokens; decode for only b tokens: about
    2 FLOPs per 2-byte weight, ~1 FLOP/byte, far below what a GPU needs to be busy
    (hundreds of FLOPs per byte), so decode is memory-bound.
    """
    c = load_config(config)
    n = _count("n_tokens", n_tokens)
    b = _count("batch", batch)
    wbytes = _matmul_weight_params(c) * dtype_bytes(dtype)
    out = {}
    pre = forward_flops(c, n, batch=b, phase="prefill", logits="last")
    kv_pre = 0 if c.family == "encoder" else kv_cache_bytes(c, n, b, dtype)
    out["prefill"] = _intensity(pre["total"], wbytes + kv_pre)
    if c.family != "encoder":
        dec = forward_flops(c, n, batch=b, phase="decode")
        out["decode"] = _intensity(dec["total"], wbytes + kv_cache_bytes(c, n + 1, b, dtype))
    return out


def _intensity(flops: int, nbytes: int) -> dict:
    return {"flops": flops, "bytes": nbytes, "intensity": flops / nbytes if nbytes else math.inf}


def paged_memory_report(config, lengths, *, block_size: int = 16, n_max: int | None = None,
                        dtype="float16") -> dict:
    """KV memory for a batch of requests of the given lengths: paged vs contiguous.

    contiguous_reserved: b · n_max tokens (each request preallocated to the longest allowed)
    paged_reserved:      Σ ⌈n_i / block_size⌉ · block_size tokens (whole blocks only)
    used:                Σ n_i tokens actually stored
    waste_* = reserved - used; paged waste is less than one block per request (the
    internal fragmentation of each last block).
    """
    lengths = [_count("request length", operator.index(x)) for x in lengths]  # NumPy ints too
    bs = _count("block_size", block_size)
    if bs == 0:
        raise ValueError("block_size must be ≥ 1, got 0")
    n_max = max(lengths, default=0) if n_max is None else _count("n_max", n_max)
    if any(x > n_max for x in lengths):
        raise ValueError(f"a request of {max(lengths)} tokens exceeds n_max={n_max}")
    per_tok = kv_cache_bytes_per_token(config, dtype)
    used = sum(lengths) * per_tok
    blocks = sum(-(-x // bs) for x in lengths)  # ⌈n_i / bs⌉ each
    paged = blocks * bs * per_tok
    contiguous = len(lengths) * n_max * per_tok
    return {
        "requests": len(lengths), "tokens": sum(lengths), "blocks": blocks,
        "bytes_per_token": per_tok, "used": used,
        "paged_reserved": paged, "contiguous_reserved": contiguous,
        "paged_waste": paged - used, "contiguous_waste": contiguous - used,
        "paged_utilisation": used / paged if paged else 1.0,
        "contiguous_utilisation": used / contiguous if contiguous else 1.0,
    }
