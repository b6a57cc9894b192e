"""The refusals of llama_params.py: a trained decoder's weight dict against its config, and a greedy request."""
from __future__ import annotations

from ..backend import get_xp
from ..require import require_array, require_int, require_named_weights

__all__ = ["llama_from_params", "greedy_generate"]

CONFIG_FIELDS = ("v", "d", "h", "h_kv", "L", "d_ff", "n_max", "rope_base", "eps", "tied", "parameter_shapes")


def llama_from_params(params, cfg, tokenizer):
    """params holds exactly the config's weights (cfg.parameter_shapes()), each of its shape, of one dtype."""
    missing_fields = [f for f in CONFIG_FIELDS if not hasattr(cfg, f)]
    if missing_fields:
        raise TypeError(f"cfg must be a trained decoder's config (DecoderConfig), got {type(cfg).__name__} "
                        f"without {missing_fields[:3]}")
    require_named_weights(params, cfg.parameter_shapes())


def greedy_generate(params, cfg, prompt_ids, max_new):
    llama_from_params(params, cfg, None)
    require_array("prompt_ids", prompt_ids)
    xp = get_xp(prompt_ids)
    if not xp.isdtype(prompt_ids.dtype, "integral"):
        raise TypeError(f"prompt_ids must be integers, got dtype {prompt_ids.dtype}")
    if prompt_ids.ndim != 2 or 0 in prompt_ids.shape:
        raise ValueError(f"prompt_ids must be (b, n) with b, n ≥ 1, got shape {tuple(prompt_ids.shape)}")
    if bool(xp.any((prompt_ids < 0) | (prompt_ids >= cfg.v))):  # one device -> host transfer
        raise ValueError(f"prompt_ids must lie in [0, {cfg.v}) (token ids), got min {int(xp.min(prompt_ids))}, "
                         f"max {int(xp.max(prompt_ids))}")
    require_int(max_new=max_new)
    if prompt_ids.shape[1] + max_new > cfg.n_max:
        raise ValueError(f"prompt of {prompt_ids.shape[1]} tokens + max_new={max_new} exceeds n_max={cfg.n_max}")
