"""The refusals of seq2seq_decode.py's public functions: greedy translation, with and without the KV
cache, refused alike."""
from __future__ import annotations

from ..require import require_int
from .seq2seq_checks import params_of, source


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
