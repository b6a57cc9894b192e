"""Workbook, lesson 13 · Counting a model: parameters, FLOPs, bytes (`lessons/13_counting.py`).

Fill in the bodies; keep the names and signatures. Check your work from the repository root,
with the virtual environment active:

    python -m transformer check 13

The functions read a Llama-style decoder's config (RMSNorm, SwiGLU, RoPE, no biases): the legend's
sizes as attributes, config.L layers, config.d width, config.h query heads and config.h_kv
key/value heads of config.d_h numbers each, config.d_ff the FFN's width, config.v the vocabulary,
and config.tied (the LM head reuses the embedding table). The checker passes such a config;
`load_config("llama-3-8b")` (from transformer) makes one from a model's name.
"""
from __future__ import annotations

import numpy as np


def count_parameters(config) -> int:
    """Every number the model learns, part by part:

        embeddings       v · d
        attention        d · h·d_h (W_q)  +  2 · d · h_kv·d_h (W_k, W_v)  +  h·d_h · d (W_o)     per layer
        FFN              3 · d · d_ff (W_gate, W_up, W_down)                                     per layer
        norms            d per RMSNorm: two per layer and a final one
        LM head          v · d, or 0 when tied to the embeddings

    W_q is a (d, h·d_h) matrix and W_k, W_v are (d, h_kv·d_h): h·d_h need not equal d.
    config  ->  an int. Example: Llama-3-8B has 8,030,261,248 parameters, SmolLM2-135M 134,515,008.

    After trying: the package's version is `transformer/models/counting.py`, `count_parameters`.
    """
    raise NotImplementedError(
        "count_parameters: start with one layer's attention and FFN for a small config (lesson 13's exercise 2 "
        "has one), part by part as in the table; print each part before adding them up.")


def forward_flops(config, n_tokens: int, *, batch: int = 1, phase: str = "prefill", logits: str = "all") -> dict:
    """The FLOPs of one forward pass's matrix products, part by part (lesson 13, section 2).

    A product (m × k)(k × n) costs 2·m·k·n FLOPs: a multiply and an add for each term. In a
    layer, n_q tokens go through the weight matrices and each query meets n_k keys:

        qkvo     2·n_q·d·h·d_h (W_q)  +  2·2·n_q·d·h_kv·d_h (W_k, W_v)  +  2·n_q·h·d_h·d (W_o)
        ffn      2·n_q·3·d·d_ff (W_gate, W_up, W_down)
        scores   2·h·n_q·n_k·d_h      S = Q Kᵀ, every (query, key) pair: the dense n_q × n_k scores
        mix      2·h·n_q·n_k·d_h      P V
    each × L layers (W_q is (d, h·d_h), W_k and W_v (d, h_kv·d_h), each head's scores (n_q, n_k));
    and once, after the last layer,
        head     2·t·d·v              the LM head on t tokens (tied to the embedding or not)

    phase="prefill": the n_tokens of a prompt at once, n_q = n_k = n_tokens; the head runs on
    every token (logits="all", t = n_q) or on the last one only (logits="last", t = 1).
    phase="decode": one new token with n_tokens already in the KV cache: n_q = 1 (the past's K and
    V are not computed again), n_k = n_tokens + 1 (the cached keys and its own); t = 1.
    Every count above is for one sequence: multiply each by batch. Then
        matmul = qkvo + ffn + head,   attention = scores + mix,   total = matmul + attention,
        tokens = batch · n_q          (the queries processed)

    config (its L, d, h, h_kv, d_h, d_ff, v), n_tokens  ->  a dict of ints with the keys qkvo, ffn,
    head, scores, mix, matmul, attention, total and tokens.
    Example, L = 1, d = 4, h = 2, h_kv = 1, d_h = 2, d_ff = 8, v = 10, a decode step with n_tokens = 3:
    qkvo = 2·(16 + 16 + 16) = 96, ffn = 192, scores = mix = 2·2·1·4·2 = 32, head = 80: matmul = 368,
    attention = 64, total = 432, tokens = 1.

    After trying: the package's version is `transformer/models/counting.py`, `forward_flops`.
    """
    raise NotImplementedError(
        "forward_flops: start by writing n_q, n_k and t for the phase; then one layer's qkvo for one sequence, "
        "checked on the example (96), before the other parts.")


def arithmetic_intensity(config, n_tokens: int, *, batch: int = 1, dtype="float16") -> dict:
    """FLOPs per byte moved, for prefilling n_tokens and for one decode step at position n_tokens
    (lesson 13, section 3): far below the GPU's ridge point, the step waits on memory.

        FLOPs:  forward_flops (above) of the pass: prefill with logits="last", or a decode step
        bytes:  every weight matrix read once a pass, whatever batch and n_tokens are,
                    W = L·(d·h·d_h + 2·d·h_kv·d_h + h·d_h·d + 3·d·d_ff) + v·d    numbers
                (the LM head's v·d counts, tied or not; the embedding table is only looked up),
                plus the KV cache's rows of 2·L·h_kv·d_h numbers (kv_cache_bytes_per_token, below):
                    prefill writes batch·n_tokens of them; decode reads batch·n_tokens and writes batch
                all in `dtype`, np.dtype(dtype).itemsize bytes a number
        intensity = FLOPs / bytes

    Activations are left out (small next to the weights at these shapes). W_q is (d, h·d_h), W_k and
    W_v (d, h_kv·d_h).  ->  {"prefill": {"flops", "bytes", "intensity"}, "decode": {…}}, ints but intensity.
    Example, L = 1, d = 4, h = 2, h_kv = 1, d_h = 2, d_ff = 8, v = 10, n_tokens = 3, float16: W = 144 + 40
    = 184 numbers, 368 bytes; a KV row is 8 bytes; prefill: 1,088 FLOPs / (368 + 3·8) bytes = 2.78,
    decode: 432 FLOPs / (368 + 4·8) bytes = 1.08. Llama-3-8B at 1,024 tokens: 980 and 1.03.

    After trying: the package's version is `transformer/models/counting.py`, `arithmetic_intensity`.
    """
    raise NotImplementedError(
        "arithmetic_intensity: start with the weights' bytes W (the same for both phases) and check 368 on the "
        "example; then each phase's FLOPs from your forward_flops and its KV bytes.")


def kv_cache_bytes_per_token(config, dtype="float16") -> int:
    """What one more token adds to the KV cache:

        2 (K and V) · L · h_kv · d_h · bytes per number

    Each layer stores, for every token, one K and one V row of shape (h_kv, d_h); only the key/value
    heads are stored, so GQA and MQA shrink the cache by h / h_kv. dtype: the cache's dtype, a name
    ("float16"), a NumPy dtype or a type such as np.float64 (np.dtype(dtype).itemsize is its bytes per
    number, whichever of these it is).
    config, dtype  ->  an int. Example: Llama-3-8B in float16: 2 · 32 · 8 · 128 · 2 = 131,072 bytes.

    After trying: the package's version is `transformer/models/counting.py`, `kv_cache_bytes_per_token`.
    """
    raise NotImplementedError(
        "kv_cache_bytes_per_token: start by counting the numbers one layer stores for one token, "
        "K and V together, and check it on Llama-3-8B's layer (8 key/value heads of 128).")
