"""A trained decoder's named weights as a `Llama`: one model and one generation loop for SmolLM2 and the
decoders trained here.

Training keeps its weights as a dict of named arrays ("W_E", "layers.{l}.W_q", …, see
`DecoderConfig.parameter_shapes`), with RoPE in the rotate-half layout. A `Llama` keeps them as
`LlamaWeights`, with RoPE on interleaved pairs (as GGUF stores SmolLM2). This loader reads the dict
into `LlamaWeights` — no copy but the two RoPE'd projections, whose columns it reorders within each
head — so that a checkpoint generates through `Llama.generate` and `generate_batch`, with the same
sampling (temperature, top-k, top-p), batches and engines as SmolLM2.

Why reordering the columns is exact: `interleaved_to_half_permutation` gives p with
apply_rope_half(x[p]) = apply_rope_interleaved(x)[p]. The training computes q_half = a W_q and
rotates it with the half layout; taking W_q' = W_q[:, p⁻¹] per head gives q' = q_half[p⁻¹], whose
interleaved rotation is the half rotation of q_half, permuted by p⁻¹ — the same for k — and a dot
product q·k does not change when both vectors are permuted alike.
"""
from __future__ import annotations

import numpy as np

from . import llama_params_checks as checks
from .llama import LayerWeights, Llama, LlamaConfig, LlamaWeights
from ..backend import get_xp, to_numpy
from ..core.positions import interleaved_to_half_permutation
from ..require import checked_by

__all__ = ["llama_config_of", "llama_from_params", "greedy_generate"]


def llama_config_of(cfg) -> LlamaConfig:
    """The LlamaConfig of a trained decoder's config (DecoderConfig: v, d, h, h_kv, L, d_ff, n_max, …)."""
    return LlamaConfig(L=cfg.L, d=cfg.d, h=cfg.h, h_kv=cfg.h_kv, d_h=cfg.d // cfg.h, d_ff=cfg.d_ff, v=cfg.v,
                       n_ctx=cfg.n_max, eps=cfg.eps, rope_base=cfg.rope_base, tied=cfg.tied, name="trained decoder")


def half_to_interleaved_columns(W, heads: int, d_h: int):  # [d, heads·d_h] -> [d, heads·d_h]
    """Reorder each head's columns from the rotate-half layout to interleaved pairs (W[:, p⁻¹] per head)."""
    xp = get_xp(W)
    inverse = np.argsort(interleaved_to_half_permutation(d_h))  # p⁻¹
    cols = (np.arange(heads)[:, None] * d_h + inverse[None, :]).reshape(-1)  # [heads·d_h]
    return xp.take(W, xp.asarray(cols), axis=1)


@checked_by(checks.llama_from_params)
def llama_from_params(params: dict, cfg, tokenizer=None) -> Llama:
    """A Llama holding a trained decoder's weights (views, but W_q and W_k reordered for interleaved RoPE)."""
    lc = llama_config_of(cfg)
    layers = []
    for l in range(cfg.L):
        p = {k.removeprefix(f"layers.{l}."): w for k, w in params.items() if k.startswith(f"layers.{l}.")}
        layers.append(LayerWeights(attn_norm=p["norm1"], W_q=half_to_interleaved_columns(p["W_q"], lc.h, lc.d_h),
                                   W_k=half_to_interleaved_columns(p["W_k"], lc.h_kv, lc.d_h), W_v=p["W_v"],
                                   W_o=p["W_o"], ffn_norm=p["norm2"], W_gate=p["W_gate"], W_up=p["W_up"],
                                   W_down=p["W_down"]))
    weights = LlamaWeights(W_E=params["W_E"], layers=layers, norm=params["norm"],
                           W_out=None if cfg.tied else params["W_out"])
    return Llama(lc, weights, tokenizer)


@checked_by(checks.trained_greedy_generate)
def greedy_generate(params: dict, cfg, prompt_ids, max_new: int):  # [b, n0] -> [b, n0 + max_new]
    """Greedy decoding of a trained decoder through `Llama.generate_batch`, the loop SmolLM2 runs: the
    prompts (equal lengths) in one prefill, then one token a row a step through the KV cache. Returns
    the prompts followed by the max_new argmax tokens. Logits holding NaN or +inf (finite weights whose
    products overflow) are refused, as for SmolLM2: an argmax of NaN would be token 0."""
    xp = get_xp(params["W_E"])
    rows = to_numpy(prompt_ids).astype(np.int64)  # [b, n0]
    new = llama_from_params(params, cfg).generate_batch([list(r) for r in rows], max_new,
                                                        stop_at_eos=False)  # b × max_new ids
    out = np.concatenate([rows, np.asarray(new, dtype=np.int64).reshape(len(rows), max_new)], axis=1)
    return xp.asarray(out)  # [b, n0 + max_new]
