"""The refusals of the public functions of seq2seq.py, seq2seq_decode.py and translate.py, one check
per function and of the same name.

Inside these doors the core's formulas are trusted (their own checks skipped), so they check everything once: the
config, the weight dict against it, the source and target ids against the vocabulary and n_max,
the source lengths against the source, and the saved activations against the weights.
"""
from __future__ import annotations

from pathlib import Path

from ..backend import get_xp
from ..require import require_array, require_bool, require_float, require_int, require_named_weights, require_real
from .checks import output_folder
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
    if not all(hasattr(cfg, f) for f in (*FIELDS, "parameter_shapes")):
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


def translate_greedy(params, cfg, src_ids, src_lengths, max_len, *, bos, eos, pad, counts):
    params_of(params, cfg)
    source(src_ids, src_lengths, cfg)
    require_int(max_len=max_len, low=1)
    if max_len > cfg.n_max:
        raise ValueError(f"max_len={max_len} exceeds n_max={cfg.n_max}: the positions stop there")
    require_int(bos=bos, eos=eos, pad=pad)
    for name, t in (("bos", bos), ("eos", eos), ("pad", pad)):
        if t >= cfg.v:
            raise ValueError(f"{name}={t} is not a token id of the vocabulary (v={cfg.v})")
    if counts is not None and not isinstance(counts, dict):
        raise TypeError(f"counts must be a dict (filled with the projections computed) or None, got "
                        f"{type(counts).__name__}")


translate_greedy_uncached = translate_greedy


# --- translate.py ---------------------------------------------------------------------------
def translation_exact_match(params, cfg, held, vocab):
    params_of(params, cfg)
    if not isinstance(held, (list, tuple)) or not held:
        raise TypeError(f"held must be a non-empty list of TranslationBatch, got {type(held).__name__}")
    for i, batch in enumerate(held):
        if not all(hasattr(batch, f) for f in ("src_ids", "src_lengths", "tgt_in", "tgt_out")):
            raise TypeError(f"held[{i}] must be a TranslationBatch, got {type(batch).__name__}")
        source(batch.src_ids, batch.src_lengths, cfg)
        if batch.src_ids.shape[1] + 2 > cfg.n_max:
            raise ValueError(f"held[{i}] has sources of {batch.src_ids.shape[1]} words: decoding them needs "
                             f"n_max ≥ {batch.src_ids.shape[1] + 2}, the config has n_max={cfg.n_max}")


def train_translation(*, steps, seed, out, progress, on_step, dtype, cross_attention):
    require_int(steps=steps, low=1)
    require_int(seed=seed)
    if out is not None and (not isinstance(out, (str, Path)) or str(out) == ""):
        raise TypeError(f"out must be a folder path (str or Path) or None, got out={out!r}")
    require_bool(progress=progress, cross_attention=cross_attention)
    if on_step is not None and not callable(on_step):
        raise TypeError(f"on_step must be a function (step, params, loss) or None, got {on_step!r}")
    if str(dtype) not in DTYPES:
        raise ValueError(f"dtype must be 'float32' or 'float64', got {dtype!r}")
    if out is not None:  # last: it creates the folder
        output_folder(out)


def load_seq2seq(dir, *, xp):
    if not isinstance(dir, (str, Path)) or str(dir) == "":
        raise TypeError(f"dir must be a checkpoint folder (str or Path), got dir={dir!r}")
