"""The refusals of induction_data.py's public functions, one check per function and of the same name."""
from __future__ import annotations

import numpy as np

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


def induction_split(seed, n_train_batches, n_heldout_batches, b, n_half, v, *, first_token, distinct):
    require_int(seed=seed, n_train_batches=n_train_batches, n_heldout_batches=n_heldout_batches)
    induction_batch(np.random.default_rng(0), b, n_half, v, first_token=first_token, distinct=distinct, split="train")


def induction_accuracy(pred_ids, ids):
    for name, x in (("pred_ids", pred_ids), ("ids", ids)):
        a = np.asarray(x)
        if a.ndim != 2 or not np.issubdtype(a.dtype, np.integer):
            raise ValueError(f"{name} must be integer ids (b, 2·n_half), got dtype {a.dtype}, shape {a.shape}")
    if np.shape(pred_ids) != np.shape(ids):
        raise ValueError(f"pred_ids {np.shape(pred_ids)} and ids {np.shape(ids)} must have one shape")
    if np.shape(ids)[1] < 4 or np.shape(ids)[1] % 2:
        raise ValueError(f"ids must hold two equal halves of ≥ 2 tokens, got length {np.shape(ids)[1]}")


def induction_documents(rng, count, v, n_half_range, *, first_token, distinct, split):
    require_int(count=count, low=1)
    int_range("n_half_range", n_half_range, low=1)
    induction_batch(rng, 1, n_half_range[1], v, first_token=first_token, distinct=distinct, split=split)
