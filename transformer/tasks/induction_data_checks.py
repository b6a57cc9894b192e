"""The refusals of induction_data.py's public functions, one check per function and of the same name."""
from __future__ import annotations

import numpy as np

from ..core.shared_checks import fits_in_memory
from ..require import require_bool, require_int
from ..train.shared_checks import generator, int_range, split_name


def token_range(v, first_token):
    require_int(v=v, low=1)
    require_int(first_token=first_token)
    if first_token >= v:
        raise ValueError(f"first_token={first_token} leaves no token below v={v} to draw")


def induction_batch(rng, b, n_half, v, *, first_token, distinct, split):
    generator(rng)
    require_int(b=b, n_half=n_half, low=1)
    token_range(v, first_token)
    require_bool(distinct=distinct)
    split_name(split)
    if distinct and n_half > v - first_token:
        raise ValueError(f"n_half={n_half} distinct tokens need v − first_token ≥ n_half, got {v} − {first_token}; "
                         f"raise v or pass distinct=False")
    fits_in_memory(f"an induction batch of b={b} rows (n_half={n_half}, v={v})", batch_bytes(b, n_half, v, first_token,
                                                                                           distinct, split))


def batch_bytes(b, n_half, v, first_token, distinct, split="train"):
    """What one batch draws: 2·b rows (12·b held out) of random keys for each token to sort (distinct) or of
    tokens, then ids and targets (b, 2·n_half): b=2**40 or v=2**40 asked NumPy for TiB."""
    rows = (2 if split == "train" else 12) * int(b)
    return rows * (16 * (int(v) - int(first_token)) if distinct else 8 * int(n_half)) + 32 * int(b) * int(n_half)


def induction_split(seed, n_train_batches, n_heldout_batches, b, n_half, v, *, first_token, distinct):
    require_int(seed=seed, n_train_batches=n_train_batches, n_heldout_batches=n_heldout_batches)
    induction_batch(np.random.default_rng(0), b, n_half, v, first_token=first_token, distinct=distinct, split="train")
    n = int(n_train_batches) + int(n_heldout_batches)  # kept in two lists: n_train_batches=2**40 ran for ever
    fits_in_memory(f"{n:,} induction batches of b={b} rows", n * 32 * int(b) * int(n_half))


def induction_accuracy(pred_ids, ids):
    parsed = {}
    for name, x in (("pred_ids", pred_ids), ("ids", ids)):
        parsed[name] = a = np.asarray(x)  # parsed once: a list of rows read as ids.shape failed inside
        if a.ndim != 2 or not np.issubdtype(a.dtype, np.integer):
            raise ValueError(f"{name} must be integer ids (b, 2·n_half), got dtype {a.dtype}, shape {a.shape}")
    if np.shape(pred_ids) != np.shape(ids):
        raise ValueError(f"pred_ids {np.shape(pred_ids)} and ids {np.shape(ids)} must have one shape")
    if np.shape(ids)[1] < 4 or np.shape(ids)[1] % 2:
        raise ValueError(f"ids must hold two equal halves of ≥ 2 tokens, got length {np.shape(ids)[1]}")
    return parsed


def induction_documents(rng, count, v, n_half_range, *, first_token, distinct, split):
    require_int(count=count, low=1)
    int_range("n_half_range", n_half_range, low=1)
    induction_batch(rng, 1, n_half_range[1], v, first_token=first_token, distinct=distinct, split=split)
    fits_in_memory(f"{count:,} induction documents", int(count) * (112 + 16 * int(n_half_range[1])))  # an array each
