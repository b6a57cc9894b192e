"""Seeded data of the induction task: random tokens t₁ … t_m, then the same tokens again.

Everything is drawn from a `np.random.Generator` (`np.random.default_rng(seed)`): the same seed
gives the same bytes. Targets follow the next-token convention of train/data.py: targets[i] is
the token the model should predict *after reading* ids[i], IGNORE_INDEX (−100) where there is
nothing to predict. Held-out sequences are those `is_heldout` (train/data.py) picks by a hash of
their first half, so training never draws them; held-out batches come from seed +
HELDOUT_SEED_OFFSET. Documents of varying length (`induction_documents`) are laid out in rows,
padded or packed, by train/data.py's `padded_rows` / `packed_rows`.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import induction_data_checks as checks
from ..require import checked_by
from ..train.data import HELDOUT_SEED_OFFSET, IGNORE_INDEX, MAX_DRAWS, keep_split

__all__ = ["InductionBatch", "induction_batch", "induction_split", "induction_accuracy", "induction_documents"]


class InductionBatch(NamedTuple):
    """ids [b, 2·n_half]: t₁ … t_{n_half} t₁ … t_{n_half}; targets [b, 2·n_half]: the next token
    where induction can predict it, IGNORE_INDEX elsewhere."""
    ids: np.ndarray
    targets: np.ndarray


def induction_targets(ids: np.ndarray) -> np.ndarray:  # [b, 2·n_half] -> [b, 2·n_half]
    """Position i predicts ids[i + 1]. Only positions n_half … 2·n_half − 2 are scored: there the
    current token t_k appeared once before, at k − 1, and the token after it, t_{k+1}, is the
    answer (what an induction head copies). The first half is random (nothing to predict); the
    last position of the first half would have to guess t₁ from its position alone; the last
    position has no next token."""
    b, n = ids.shape
    n_half = n // 2
    targets = np.full((b, n), IGNORE_INDEX, dtype=np.int64)  # [b, 2·n_half]
    targets[:, n_half:n - 1] = ids[:, n_half + 1:]  # the repeated half, shifted by one
    return targets


def draw_halves(rng, k: int, n_half: int, v: int, first_token: int, distinct: bool):  # -> [k, n_half]
    """k random first halves from first_token … v − 1; with distinct, no token twice in a row."""
    if distinct:  # a random permutation of the tokens per row, cut to n_half
        return rng.random((k, v - first_token)).argsort(axis=1)[:, :n_half] + first_token  # [k, n_half]
    return rng.integers(first_token, v, size=(k, n_half))  # [k, n_half]


@checked_by(checks.induction_batch)
def induction_batch(rng, b: int, n_half: int, v: int, *, first_token: int = 1, distinct: bool = True,
                    split: str = "train") -> InductionBatch:  # -> ids, targets [b, 2·n_half]
    """b rows of the induction task: n_half random tokens, then the same tokens again.

    Tokens are drawn from first_token … v − 1: ids below first_token are left to special
    tokens (0 = padding by default), which the task never shows. distinct=True draws each
    row's tokens without repetition (needs v − first_token ≥ n_half), so every token of the
    second half has exactly one earlier occurrence to copy from. split="train" or "heldout"
    keeps only the rows of that split (`is_heldout` on the first half).

    >>> x = induction_batch(np.random.default_rng(0), 1, 3, 10)
    >>> bool((x.ids[:, :3] == x.ids[:, 3:]).all()), x.targets[0, :3].tolist()
    (True, [-100, -100, -100])
    >>> bool(x.targets[0, 3] == x.ids[0, 4]) and bool(x.targets[0, 4] == x.ids[0, 5]), int(x.targets[0, 5])
    (True, -100)
    """
    kept = np.zeros((0, n_half), dtype=np.int64)
    for _ in range(MAX_DRAWS):  # draw until the split has b rows (a tenth of draws are held out)
        draw = draw_halves(rng, 2 * b if split == "train" else 12 * b, n_half, v, first_token, distinct)
        kept = np.concatenate([kept, keep_split(draw.astype(np.int64), split)])  # [k, n_half]
        if len(kept) >= b:
            break
    else:
        raise ValueError(f"too few sequences fall in the {split!r} split for n_half={n_half}, v={v}, "
                         f"first_token={first_token}: raise v or n_half")
    first = kept[:b]  # [b, n_half]
    ids = np.concatenate([first, first], axis=1)  # [b, 2·n_half]
    return InductionBatch(ids, induction_targets(ids))


@checked_by(checks.induction_split)
def induction_split(seed: int, n_train_batches: int, n_heldout_batches: int, b: int, n_half: int, v: int, *,
                    first_token: int = 1, distinct: bool = True) -> tuple:
    """(train, heldout): lists of InductionBatch, training drawn from default_rng(seed), held-out
    from default_rng(seed + HELDOUT_SEED_OFFSET), each only from its own split of sequences."""
    train_rng = np.random.default_rng(seed)
    held_rng = np.random.default_rng(seed + HELDOUT_SEED_OFFSET)
    kw = dict(first_token=first_token, distinct=distinct)
    train = [induction_batch(train_rng, b, n_half, v, split="train", **kw) for _ in range(n_train_batches)]
    held = [induction_batch(held_rng, b, n_half, v, split="heldout", **kw) for _ in range(n_heldout_batches)]
    return train, held


@checked_by(checks.induction_accuracy)
def induction_accuracy(pred_ids, ids) -> float:  # [b, 2·n_half], [b, 2·n_half] -> share
    """Share of the repeated half's predictable tokens predicted right.

    pred_ids[:, i] is the model's guess for ids[:, i + 1] (argmax of the logits at i). The
    scored positions are those `induction_targets` scores: i = n_half … 2·n_half − 2, which
    predict t₂ … t_{n_half} of the second half. Chance is about 1/v.

    >>> ids = np.array([[5, 6, 7, 5, 6, 7]])
    >>> induction_accuracy(np.array([[0, 0, 0, 6, 7, 0]]), ids), induction_accuracy(np.array([[0, 0, 0, 6, 5, 0]]), ids)
    (1.0, 0.5)
    """
    n_half = ids.shape[1] // 2
    right = np.asarray(pred_ids)[:, n_half:-1] == np.asarray(ids)[:, n_half + 1:]  # [b, n_half − 1]
    return float(right.mean())


@checked_by(checks.induction_documents)
def induction_documents(rng, count: int, v: int, n_half_range=(4, 16), *, first_token: int = 1,
                        distinct: bool = True, split: str = "train") -> list:  # -> count arrays [2·n_half_i]
    """count induction documents of varying length (n_half uniform in n_half_range, both ends
    included), for padding or packing. Document i's first half is unpredictable: pass
    score_from=[len(d) // 2 for d in docs] to padded_rows / packed_rows."""
    lo, hi = n_half_range
    halves = rng.integers(lo, hi + 1, size=count)  # [count]
    return [induction_batch(rng, 1, int(n), v, first_token=first_token, distinct=distinct,
                            split=split).ids[0] for n in halves]  # arguments checked at the door
