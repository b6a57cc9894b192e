"""The refusals of translation_data.py's public functions, one check per function and of the same name."""
from __future__ import annotations

import numpy as np

from ..core.shared_checks import fits_in_memory
from ..require import require_int
from ..train.shared_checks import generator, int_range, split_name


def translation_batch(rng, b, *, n_range, split):
    generator(rng)
    require_int(b=b, low=1)
    int_range("n_range", n_range, low=1)
    split_name(split)
    fits_in_memory(f"a translation batch of b={b} sentences", batch_bytes(b, n_range))  # b=2**40 ran for ever


def batch_bytes(b, n_range):
    """A batch's sentences drawn one by one (an array object each), then its three (b, n_max + 1) id arrays."""
    return int(b) * (24 * (int(n_range[1]) + 1) + 120)


def translation_split(seed, n_train_batches, n_heldout_batches, b, *, n_range):
    require_int(seed=seed, n_train_batches=n_train_batches, n_heldout_batches=n_heldout_batches)
    translation_batch(np.random.default_rng(0), b, n_range=n_range, split="train")
    n = int(n_train_batches) + int(n_heldout_batches)
    fits_in_memory(f"{n:,} translation batches of b={b} sentences", n * batch_bytes(b, n_range))


def translation_alignment(n_src):
    require_int(n_src=n_src, low=1)


def vocab_arg(vocab):
    """None (the task's own vocabulary) or a T.TranslationVocab."""
    if vocab is not None and not all(hasattr(vocab, f) for f in ("v", "source_ids", "translate")):
        raise TypeError(f"vocab must be None or a T.TranslationVocab (T.translation_vocab()), "
                        f"got {type(vocab).__name__}")


def token_ids(ids, vocab):
    vocab_arg(vocab)
    a = np.asarray(ids)
    if a.ndim != 1 or (a.size and not np.issubdtype(a.dtype, np.integer)):
        raise ValueError(f"ids must be a 1-D sequence of integer ids, got dtype {a.dtype}, shape {a.shape}")
    v = 51 if vocab is None else vocab.v  # translation_vocab().v
    bad = a[(a != -100) & ((a < 0) | (a >= v))]
    if bad.size:
        raise ValueError(f"token ids must lie in [0, {v}) (or be -100), got {int(bad[0])}")


def detokenize(ids, vocab):
    token_ids(ids, vocab)


def reference_translation(src, vocab):
    token_ids(src, vocab)  # a bad id was dropped in silence, as padding is
