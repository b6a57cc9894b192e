"""The refusals of translate.py's public functions, one check per function and of the same name."""
from __future__ import annotations

from pathlib import Path

from ..require import require_bool, require_int
from ..train.decoder_checks import DTYPES
from ..train.seq2seq_checks import params_of, source
from ..train.shared_checks import output_folder
from .translation_data_checks import vocab_arg


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
    vocab_arg(vocab)


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
