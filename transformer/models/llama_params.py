"""A trained decoder as a `Llama`: its config a `LlamaConfig`, its weight dict a `LlamaWeights` (and back).

Training keeps its weights as a dict of named arrays ("W_E", "layers.{l}.W_q", …, see
`DecoderConfig.parameter_shapes`): the optimizer's format and the checkpoint's. The model is
SmolLM2's, with RoPE in the rotate-half layout of HF checkpoints (`rope_layout="half"`). Read into
`LlamaWeights` the dict gives the same arrays, not copies, so that an optimizer's in-place update is
the model's; the gradients (`llama_backward.forward_backward`) come back as a `LlamaWeights` and go
the other way into a dict of the same names. So training runs `llama.forward` and its backward, and
a checkpoint generates through `Llama.generate` and `generate_batch`, with the same sampling
(temperature, top-k, top-p), batches and engines as SmolLM2.
"""
from __future__ import annotations

import numpy as np

from . import llama_params_checks as checks
from .llama import LayerWeights, Llama, LlamaConfig, LlamaWeights
from ..backend import get_xp, to_numpy
from ..require import checked_by

__all__ = ["llama_config_of", "weights_from_params", "params_from_weights", "llama_from_params", "greedy_generate"]

# each LayerWeights field and its name in the dict, after "layers.{l}.", in the dict's order
LAYER_NAMES = {"attn_norm": "norm1", "W_q": "W_q", "W_k": "W_k", "W_v": "W_v", "W_o": "W_o", "ffn_norm": "norm2",
               "W_gate": "W_gate", "W_up": "W_up", "W_down": "W_down"}


def llama_config_of(cfg) -> LlamaConfig:
    """The LlamaConfig of a trained decoder's config (DecoderConfig: v, d, h, h_kv, L, d_ff, n_max, …):
    d_h = d / h, n_ctx = n_max, RoPE in the rotate-half layout."""
    return LlamaConfig(L=cfg.L, d=cfg.d, h=cfg.h, h_kv=cfg.h_kv, d_h=cfg.d // cfg.h, d_ff=cfg.d_ff, v=cfg.v,
                       n_ctx=cfg.n_max, eps=cfg.eps, rope_base=cfg.rope_base, tied=cfg.tied, name="trained decoder",
                       rope_layout="half")


def weights_from_params(params: dict, L: int) -> LlamaWeights:
    """The dict's arrays as LlamaWeights of L layers: the same arrays, no copy."""
    layers = [LayerWeights(**{field: params[f"layers.{l}.{name}"] for field, name in LAYER_NAMES.items()})
              for l in range(L)]
    return LlamaWeights(W_E=params["W_E"], layers=layers, norm=params["norm"], W_out=params.get("W_out"))


def params_from_weights(w: LlamaWeights) -> dict:
    """LlamaWeights (or their gradients) as the dict of named arrays, in `parameter_shapes` order: no copy."""
    params = {"W_E": w.W_E}
    for l, lw in enumerate(w.layers):
        params.update({f"layers.{l}.{name}": getattr(lw, field) for field, name in LAYER_NAMES.items()})
    params["norm"] = w.norm
    if w.W_out is not None:
        params["W_out"] = w.W_out
    return params


@checked_by(checks.llama_from_params)
def llama_from_params(params: dict, cfg, tokenizer=None) -> Llama:
    """A Llama holding a trained decoder's weights (the same arrays)."""
    return Llama(llama_config_of(cfg), weights_from_params(params, cfg.L), tokenizer)


@checked_by(checks.greedy_generate)
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
