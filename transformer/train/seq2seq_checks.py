"""The refusals of seq2seq.py's public functions, one check per function and of the same name; the
pieces they share (the weight dict against the config, the source ids and lengths) serve the checks
of seq2seq_decode.py and tasks/translate.py too.

Inside these doors the core's formulas are trusted (their own checks skipped), so they check everything once: the
config, the weight dict against it, the source and target ids against the vocabulary and n_max,
the source lengths against the source, and the saved activations against the weights.
"""
from __future__ import annotations

from ..backend import get_xp
from ..require import require_array, require_float, require_int, require_named_weights, require_real
from ..core.shared_checks import fits_in_memory, itemsize
from .decoder_checks import DTYPES, token_rows

FIELDS = ("v", "d", "h", "d_ff", "L_enc", "L_dec", "n_max")


def seq2seq_config(cfg):
    for f in FIELDS:
        require_int(**{f: getattr(cfg, f)}, low=1)
    if cfg.d % cfg.h:
        raise ValueError(f"d={cfg.d} must be divisible by the number of heads h={cfg.h}")
    require_real(eps=cfg.eps)
    if cfg.eps < 0:
        raise ValueError(f"eps must be ≥ 0, got eps={cfg.eps}")


def config(cfg):  # by its fields: seq2seq.py imports this module, so this one cannot import Seq2SeqConfig
    if not all(hasattr(cfg, f) for f in (*FIELDS, "parameter_shapes", "parameter_count")):
        raise TypeError(f"cfg must be a Seq2SeqConfig, got {type(cfg).__name__}")


def params_of(params, cfg):
    """params holds exactly the config's weights, each of its shape, all of one float dtype."""
    config(cfg)
    require_named_weights(params, cfg.parameter_shapes())


def source(src, src_lengths, cfg):
    """src (b, n_src) ids in [0, v) with n_src ≤ n_max; src_lengths (b,) integers in [1, n_src]."""
    token_rows("src", src, cfg, 0, cfg.v, "token ids")
    require_array("src_lengths", src_lengths)
    xp = get_xp(src_lengths)
    if not xp.isdtype(src_lengths.dtype, "integral"):
        raise TypeError(f"src_lengths must be integers, got dtype {src_lengths.dtype}")
    b, n_src = src.shape
    if tuple(src_lengths.shape) != (b,):
        raise ValueError(f"src_lengths must have shape (b,) = ({b},), got {tuple(src_lengths.shape)}")
    lo, hi = int(xp.min(src_lengths)), int(xp.max(src_lengths))
    if lo < 1 or hi > n_src:
        raise ValueError(f"src_lengths must lie in [1, n_src={n_src}] (at least one real source word), "
                         f"got min {lo}, max {hi}")


def init_seq2seq(cfg, seed, *, dtype, xp):
    config(cfg)
    require_int(seed=seed)
    if str(dtype) not in DTYPES:
        raise ValueError(f"dtype must be 'float32' or 'float64', got {dtype!r}")
    n_params, d, d_ff = cfg.parameter_count(), cfg.d, cfg.d_ff  # v=2**40 asked NumPy for 64 TiB
    fits_in_memory(f"an encoder–decoder of {n_params:,} weights (L_enc={cfg.L_enc}, L_dec={cfg.L_dec}, d={d}, "
                   f"d_ff={d_ff})", itemsize(str(dtype)) * n_params + 8 * max(cfg.v * d, d * d_ff), xp)


def seq2seq_forward(params, src, tgt_in, cfg, src_lengths):
    params_of(params, cfg)
    source(src, src_lengths, cfg)
    token_rows("tgt_in", tgt_in, cfg, 0, cfg.v, "token ids")
    if tgt_in.shape[0] != src.shape[0]:
        raise ValueError(f"tgt_in must have the batch b={src.shape[0]} of src, got shape {tuple(tgt_in.shape)}")


def seq2seq_backward(d_logits, saved, params, cfg):
    params_of(params, cfg)
    if not isinstance(saved, dict) or not {"src", "tgt", "enc", "z", "dec", "y"} <= set(saved):
        raise TypeError("saved must be the dict seq2seq_forward returned beside the logits")
    if len(saved["enc"]) != cfg.L_enc or len(saved["dec"]) != cfg.L_dec:
        raise ValueError(f"saved holds {len(saved['enc'])} encoder and {len(saved['dec'])} decoder layers, "
                         f"cfg L_enc={cfg.L_enc}, L_dec={cfg.L_dec}")
    require_float("d_logits", d_logits)
    want = (*saved["tgt"].shape, cfg.v)
    if tuple(d_logits.shape) != want:
        raise ValueError(f"d_logits must have shape (b, n_tgt, v) = {want}, got {tuple(d_logits.shape)}")


def seq2seq_loss_and_grads(params, batch, cfg):
    if not isinstance(batch, tuple) or len(batch) != 4:
        raise TypeError(f"batch must be a TranslationBatch (src_ids, src_lengths, tgt_in, tgt_out), "
                        f"got {type(batch).__name__}")
    src_ids, src_lengths, tgt_in, tgt_out = batch
    seq2seq_forward(params, src_ids, tgt_in, cfg, src_lengths)
    require_array("tgt_out", tgt_out)
    if tuple(tgt_out.shape) != tuple(tgt_in.shape):
        raise ValueError(f"tgt_out must have the shape of tgt_in {tuple(tgt_in.shape)}, got {tuple(tgt_out.shape)}")
    xp = get_xp(tgt_out)
    if not xp.isdtype(tgt_out.dtype, "integral"):
        raise TypeError(f"tgt_out must be integers, got dtype {tgt_out.dtype}")
    bad = (tgt_out != -100) & ((tgt_out < 0) | (tgt_out >= cfg.v))
    if bool(xp.any(bad)):
        raise ValueError(f"tgt_out must lie in [0, {cfg.v}) or be −100 (ignored), got {int(xp.min(tgt_out))} … "
                         f"{int(xp.max(tgt_out))}")
