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
