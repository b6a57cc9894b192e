"""The refusals of induction.py's public functions, one check per function and of the same name."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..train import decoder_checks
from ..train.shared_checks import output_folder, path_like
from ..core.packing_checks import documents_fit
from ..require import require_bool, require_int, require_real

decoder_fits = decoder_checks.decoder_fits  # train_induction's sizes, once they make a config

N_CTX = 64  # induction.N_CTX, a packed row: restated, since induction.py imports this module (a test holds them equal)


def documents(docs):
    """A non-empty list of 1-D integer documents of even length ≥ 4 (two halves of ≥ 2 tokens)."""
    if not isinstance(docs, (list, tuple)) or not docs:
        raise ValueError(f"docs must be a non-empty list of documents, got {type(docs).__name__}"
                         + (" of length 0" if isinstance(docs, (list, tuple)) else ""))
    for i, d in enumerate(docs):
        a = np.asarray(d)
        if a.ndim != 1 or a.dtype.kind not in "iu":
            raise ValueError(f"docs[{i}] must be a 1-D array of integer ids, got dtype {a.dtype}, shape {a.shape}")
        if len(a) < 4 or len(a) % 2:
            raise ValueError(f"docs[{i}] has {len(a)} tokens: an induction document is two equal halves of ≥ 2")


def induction_rows(docs, *, packed):
    documents(docs)
    require_bool(packed=packed)
    if packed:  # a document longer than a packed row, as packed_rows refuses it
        documents_fit([len(np.asarray(d)) for d in docs], N_CTX)


def induction_heldout_accuracy(params, cfg, docs):
    decoder_checks.params_of(params, cfg)
    documents(docs)
    for n in sorted({len(d) for d in docs}):  # the ids of each batch of one length, as decoder_forward refuses them
        ids = np.stack([np.asarray(d, dtype=np.int64) for d in docs if len(d) == n])  # [b, n]
        decoder_checks.token_rows("ids", ids, cfg, 0, cfg.v, "token ids")


def attention_maps(params, cfg, ids):
    decoder_checks.params_of(params, cfg)
    a = np.asarray(ids)
    if a.dtype.kind not in "iu" or a.size == 0 or a.ndim > 2 or (a.ndim == 2 and a.shape[0] != 1):
        raise ValueError(f"ids must be one sequence of integer ids, (n,) or (1, n), got dtype {a.dtype}, "
                         f"shape {a.shape}")
    decoder_checks.token_rows("ids", a.astype(np.int64).reshape(1, -1), cfg, 0, cfg.v, "token ids")  # decoder_forward's


def induction_head_scores(maps, n_half):
    require_int(n_half=n_half, low=2)
    W = np.asarray(maps)
    if W.ndim < 2 or W.shape[-1] != W.shape[-2] or W.shape[-1] < 2 * n_half:
        raise ValueError(f"maps must end in (n, n) with n ≥ 2·n_half = {2 * n_half}, got shape {W.shape}")


def train_induction(*, steps, seed, out, progress, packed, snapshot_every, on_step, sizes, lr_max, workers):
    require_int(steps=steps, snapshot_every=snapshot_every, workers=workers, low=1)
    if sizes is not None:
        if not isinstance(sizes, dict):
            raise TypeError(f"sizes must be a dict of DecoderConfig fields to change, got {type(sizes).__name__}")
        fields = ("v", "d", "h", "h_kv", "L", "d_ff", "n_max", "rope_base", "eps", "tied")  # not dropout: never drops
        unknown = sorted(set(sizes) - set(fields))
        if unknown:
            raise ValueError(f"sizes: {unknown[0]!r} is not a DecoderConfig field ({', '.join(fields)})")
        if sizes.get("v", 32) != 32 or sizes.get("n_max", 64) < 64:
            raise ValueError("sizes: the task needs v = 32 and n_max ≥ 64 (its tokens and its longest packed row)")
    if lr_max is not None:
        require_real(lr_max=lr_max, positive=True)
    require_int(seed=seed, low=0)
    require_bool(progress=progress, packed=packed)
    if on_step is not None and not callable(on_step):
        raise TypeError(f"on_step must be a function (step, params, loss) or None, got {on_step!r}")
    if out is not None:
        if not isinstance(out, (str, Path)):
            raise TypeError(f"out must be a folder path (str or Path) or None, got {out!r}")
        writable_folder(Path(out))


def writable_folder(out: Path) -> None:
    """Refuse, before any training, a folder that cannot receive checkpoint.npz and metrics.json
    (train/shared_checks.output_folder: creates it and writes a probe file)."""
    output_folder(out)


def load_decoder(path_or_dir):
    if not isinstance(path_or_dir, (str, Path)):
        raise TypeError(f"path_or_dir must be a path (str or Path), got {path_or_dir!r}")
    path_like("path_or_dir", path_or_dir)  # "" too, as checkpoint_contents refuses it
