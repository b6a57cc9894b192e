"""Workbook, lesson 19 · Training from scratch: watching induction heads form
(`lessons/19_training_from_scratch.py`).

Fill in the bodies; keep the names and signatures. Check your work from the repository root,
with the virtual environment active:

    python -m transformer check 19

Shapes use the course's dimension names: L layers, h heads, n positions. The probe is a
sequence t_1 … t_m t_1 … t_m of n = 2m tokens; P[i, j] is query i's attention weight on key j.
"""
from __future__ import annotations

import numpy as np


def induction_head_scores(maps, n_half: int) -> dict:  # [..., L, h, n, n] -> name -> [..., L, h]
    """Two scores per head, from its attention weights on the probe (m = n_half, n = 2m):

        "previous token":  mean over i = 1 … 2m − 1 of P[i, i − 1]
        "induction":       mean over i = m … 2m − 2 of P[i, i − m + 1]

    Query i of the second copy holds the token whose earlier copy is at i − m; the token after
    that copy, at i − m + 1, is the one to predict next. A perfect head scores 1.
    maps (L, h, n, n), or any (..., L, h, n, n)  ->  {"previous token": (..., L, h), "induction": (..., L, h)}.
    Example: m = 3 (n = 6): the induction score reads P[3, 1] and P[4, 2].

    After trying: the package's version is `transformer/tasks/induction.py`, `induction_head_scores`.
    """
    raise NotImplementedError(
        "induction_head_scores: start by writing out, for m = 3, the rows i and the keys each score reads; "
        "NumPy picks P[..., i, key] for many i at once when i and key are arrays of the same length.")


def induction_accuracy(pred_ids, ids) -> float:  # [b, 2·n_half], [b, 2·n_half] -> share
    """The share of the repeated half's predictable tokens the model predicted right.

        pred_ids[:, i] is the model's guess for ids[:, i + 1] (the argmax of the logits at i)
        scored: the guesses at i = n_half … 2·n_half − 2, which predict t_2 … t_m of the second copy

    The first half is random, so it cannot be predicted; nor can the second copy's first token,
    t_1, as nothing says the sequence repeats until it has begun. Chance is about 1/v.
    ids, pred_ids (b, 2·n_half) ints  ->  a float in [0, 1].
    Example: ids [[5, 6, 7, 5, 6, 7]] and pred_ids [[0, 0, 0, 6, 5, 0]]: the guesses at 3 and 4 are
    scored, 6 is right and 5 is wrong: 0.5.

    After trying: the package's version is `transformer/tasks/induction_data.py`, `induction_accuracy`.
    """
    raise NotImplementedError(
        "induction_accuracy: start with the example above: write down, for each scored position i, the guess "
        "pred_ids[0, i] and the token it should equal.")
