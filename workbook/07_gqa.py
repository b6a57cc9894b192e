"""Workbook, lesson 07 · MHA, GQA, MQA: sharing keys and values (`lessons/07_gqa.py`).

Fill in the bodies; keep the names and signatures. Check your work from the repository root,
with the virtual environment active:

    python -m transformer check 07

Shapes use the course's dimension names: b batch, n positions, h query heads, h_kv key/value
heads, d_h head size; n_rep = h / h_kv query heads share each key/value head.
"""
from __future__ import annotations

import numpy as np


def repeat_kv(x, n_rep: int):  # [b, h_kv, n, d_h] -> [b, h_kv·n_rep, n, d_h]
    """Repeat each key/value head n_rep times, so h_kv heads serve h = h_kv · n_rep query heads.

        out[:, i] = x[:, i // n_rep]        i = 0 … h − 1

    Key/value head j becomes heads j·n_rep … j·n_rep + n_rep − 1: the n_rep query heads of one
    group sit next to each other. n_rep = 1 (MHA) returns x as it is.
    x (b, h_kv, n, d_h)  ->  (b, h_kv·n_rep, n, d_h), that is (b, h, n, d_h).
    Example: heads [A, B] with n_rep = 2 give [A, A, B, B], not [A, B, A, B].

    After trying: the package's version is `transformer/core/attention.py`, `repeat_kv`.
    """
    raise NotImplementedError(
        "repeat_kv: start from the rule out[:, i] = x[:, i // n_rep]. Make a tiny x with h_kv = 2 whose head j "
        "is filled with the number j, and print the heads you get for n_rep = 3: they must read 0 0 0 1 1 1.")
