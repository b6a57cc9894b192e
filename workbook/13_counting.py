"""Workbook, lesson 13 · Counting a model: parameters, FLOPs, bytes (`lessons/13_counting.py`).

Fill in the bodies; keep the names and signatures. Check your work from the repository root,
with the virtual environment active:

    python -m transformer check 13

Both functions read a Llama-style decoder's config (RMSNorm, SwiGLU, RoPE, no biases): the legend's
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
