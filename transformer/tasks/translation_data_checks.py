"""The refusals of translation_data.py's public functions, one check per function and of the same name."""
from __future__ import annotations

import numpy as np

from ..require import require_int
from ..train.shared_checks import generator, int_range, split_name


def translation_batch(rng, b, *, n_range, split):
    generator(rng)
    require_int(b=b, low=1)
    int_range("n_range", n_range, low=1)
    split_name(split)


def translation_split(seed, n_train_batches, n_heldout_batches, b, *, n_range):
    require_int(seed=seed, n_train_batches=n_train_batches, n_heldout_batches=n_heldout_batches)
    translation_batch(np.random.default_rng(0), b, n_range=n_range, split="train")


def translation_alignment(n_src):
    require_int(n_src=n_src, low=1)


def token_ids(ids, vocab):
    a = np.asarray(ids)
    if a.ndim != 1 or (a.size and not np.issubdtype(a.dtype, np.integer)):
        raise ValueError(f"ids must be a 1-D sequence of integer ids, got dtype {a.dtype}, shape {a.shape}")
    v = 51 if vocab is None else vocab.v  # translation_vocab().v
    bad = a[(a != -100) & ((a < 0) | (a >= v))]
    if bad.size:
        raise ValueError(f"token ids must lie in [0, {v}) (or be -100), got {int(bad[0])}")


def detokenize(ids, vocab):
    token_ids(ids, vocab)


def reference_translation(src, vocab=None):
    token_ids(src, vocab)
