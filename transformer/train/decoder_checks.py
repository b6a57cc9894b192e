"""The refusals of decoder.py's public functions, one check per function and of the same name.

Inside these doors the core's formulas are trusted (their own checks skipped), so they check everything once:
the config, the weight dict against the config, the ids, positions and document ids against the
config's sizes, and the saved activations against the weights.
"""
from __future__ import annotations

import numpy as np

from ..backend import get_xp
from ..core import loss_checks, shared_checks as core_shared
from ..require import (require_array, require_bool, require_float, require_int, require_named_weights, require_real,
                       stand_in)

ATTENTION = ("plain", "tiled")
DTYPES = ("float32", "float64")


def decoder_config(cfg):
    for f in ("v", "d", "h", "h_kv", "L", "d_ff", "n_max"):
        require_int(**{f: getattr(cfg, f)}, low=1)
    if cfg.h % cfg.h_kv:
        raise ValueError(f"query heads h={cfg.h} must be a multiple of key/value heads h_kv={cfg.h_kv}")
    if cfg.d % cfg.h:
        raise ValueError(f"d={cfg.d} must be divisible by the number of heads h={cfg.h}")
    if (cfg.d // cfg.h) % 2:
        raise ValueError(f"d_h = d / h = {cfg.d // cfg.h} must be even: RoPE turns pairs of features")
    require_real(rope_base=cfg.rope_base, positive=True)
    require_real(eps=cfg.eps)
    if cfg.eps < 0:
        raise ValueError(f"eps must be ≥ 0, got eps={cfg.eps}")
    require_bool(tied=cfg.tied)
    require_real(dropout=cfg.dropout)
    if not 0 <= cfg.dropout < 1:
        raise ValueError(f"dropout must be in [0, 1) (the share of attention weights dropped in training), "
                         f"got dropout={cfg.dropout}")


def config(cfg):  # by its fields: decoder.py imports this module, so this one cannot import DecoderConfig
    if not all(hasattr(cfg, f) for f in ("v", "d", "h", "h_kv", "L", "d_ff", "n_max", "parameter_shapes")):
        raise TypeError(f"cfg must be a DecoderConfig, got {type(cfg).__name__}")


def params_of(params, cfg):
    """params holds exactly the config's weights, each of its shape, all of one float dtype."""
    config(cfg)
    require_named_weights(params, cfg.parameter_shapes())


def token_rows(name, t, cfg, low, high, what):
    """A (b, n) integer array with 1 ≤ n ≤ n_max and values in [low, high)."""
    require_array(name, t)
    xp = get_xp(t)
    if not xp.isdtype(t.dtype, "integral"):
        raise TypeError(f"{name} must be integers, got dtype {t.dtype}")
    if t.ndim != 2 or t.shape[1] == 0 or t.shape[1] > cfg.n_max:
        raise ValueError(f"{name} must be (b, n) with 1 ≤ n ≤ n_max={cfg.n_max}, got shape {tuple(t.shape)}")
    if t.size and bool(xp.any((t < low) | (t >= high))):  # one device -> host transfer
        raise ValueError(f"{name} must lie in [{low}, {high}) ({what}), got min {int(xp.min(t))}, max {int(xp.max(t))}")


def blocks(block_q, block_k):
    for name, bsz in (("block_q", block_q), ("block_k", block_k)):
        if bsz is not None:
            require_int(**{name: bsz}, low=1)


def init_decoder(cfg, seed, *, dtype, xp):
    config(cfg)
    require_int(seed=seed)
    if str(dtype) not in DTYPES:
        raise ValueError(f"dtype must be 'float32' or 'float64', got {dtype!r}")
    decoder_fits(cfg, dtype, xp)


def decoder_fits(cfg, dtype="float32", xp=None):
    """The weights, their gradients and AdamW's m and v, and RoPE's tables of n_max positions, in the memory
    available: sizes={"L": 10**6} allocated for minutes, {"d_ff": 10**9} failed inside NumPy."""
    d_h = cfg.d // cfg.h
    layer = cfg.d * (cfg.h + 2 * cfg.h_kv) * d_h + cfg.h * d_h * cfg.d + 3 * cfg.d * cfg.d_ff + 2 * cfg.d
    n_params = cfg.v * cfg.d * (1 if cfg.tied else 2) + cfg.L * layer + cfg.d
    item = core_shared.itemsize(str(dtype))
    core_shared.fits_in_memory(f"a decoder of {n_params:,} weights (L={cfg.L}, d={cfg.d}, d_ff={cfg.d_ff}, "
                               f"n_max={cfg.n_max}) with its gradients and AdamW state",
                               4 * item * n_params + 2 * item * cfg.n_max * (d_h // 2), xp)


def decoder_forward(params, ids, cfg, *, positions, doc_ids, attention, block_q, block_k, training, rng):
    params_of(params, cfg)
    token_rows("ids", ids, cfg, 0, cfg.v, "token ids")
    for name, t, low, high, what in (("positions", positions, 0, cfg.n_max, "RoPE positions below n_max"),
                                     ("doc_ids", doc_ids, -1, 2 ** 62, "document index, −1 = padding")):
        if t is not None:
            token_rows(name, t, cfg, low, high, what)
            if tuple(t.shape) != tuple(ids.shape):
                raise ValueError(f"{name} must have the shape of ids {tuple(ids.shape)}, got {tuple(t.shape)}")
    if attention not in ATTENTION:
        raise ValueError(f"attention must be 'plain' or 'tiled', got {attention!r}")
    blocks(block_q, block_k)
    require_bool(training=training)
    if rng is not None and not isinstance(rng, np.random.Generator):
        require_int(rng=rng)  # a seed
    if training and cfg.dropout > 0:
        if attention != "plain":
            raise ValueError(f"dropout={cfg.dropout} in training needs attention='plain': the tiled attention keeps "
                             f"no weights P to drop")
        if rng is None:
            raise ValueError(f"dropout={cfg.dropout} in training needs rng= (a np.random.Generator or an int seed): "
                             f"the weights dropped must be reproducible")


def decoder_backward(d_logits, saved, params, cfg, *, block_q, block_k):
    params_of(params, cfg)
    blocks(block_q, block_k)
    if not isinstance(saved, dict) or "ids" not in saved or "layers.0.x" not in saved:
        raise TypeError("saved must be the dict decoder_forward returned beside the logits")
    if f"layers.{cfg.L - 1}.x" not in saved or f"layers.{cfg.L}.x" in saved:
        raise ValueError(f"saved holds another number of layers than cfg.L={cfg.L}")
    require_float("d_logits", d_logits)
    want = (*saved["ids"].shape, cfg.v)
    if tuple(d_logits.shape) != want:
        raise ValueError(f"d_logits must have shape (b, n, v) = {want}, got {tuple(d_logits.shape)}")


def decoder_loss_and_grads(params, ids, targets, cfg, *, positions, doc_ids, attention, block_q, block_k,
                           training, rng):
    decoder_forward(params, ids, cfg, positions=positions, doc_ids=doc_ids, attention=attention, block_q=block_q,
                    block_k=block_k, training=training, rng=rng)
    require_array("targets", targets)
    if tuple(targets.shape) != tuple(ids.shape):
        raise ValueError(f"targets must have the shape of ids {tuple(ids.shape)}, got {tuple(targets.shape)}")
    logits = stand_in(params["W_E"], (*ids.shape, cfg.v))  # [b, n, v], what the forward pass will give
    loss_checks.cross_entropy(logits, targets, ignore_index=-100)  # dtype and range; -100: cross_entropy's default


def activation_bytes(cfg, b, n, *, attention, packed, itemsize):
    config(cfg)
    require_int(b=b, n=n, itemsize=itemsize, low=1)
    if attention not in ATTENTION:
        raise ValueError(f"attention must be 'plain' or 'tiled', got {attention!r}")
    require_bool(packed=packed)
