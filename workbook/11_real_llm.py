"""Workbook, lesson 11 · A real LLM, end to end (`lessons/11_real_llm.py`).

Fill in the body; keep the name and signature. Check your work from the repository root,
with the virtual environment active:

    python -m transformer check 11

Shapes use the course's dimension names: v vocabulary; `...` stands for any leading axes
such as (b,).
"""
from __future__ import annotations

import numpy as np


def filter_logits(logits, temperature: float = 1.0, top_k=None, top_p=None):  # [..., v] -> [..., v]
    """Temperature, then top-k, then top-p: the logits a sampler draws the next token from.

        x = logits / T                        T < 1 sharpens the distribution, T > 1 flattens it
        top-k: every logit below the k-th largest of its row becomes −inf (ties at the k-th
               value are all kept)
        top-p: order the tokens by falling probability softmax(x) (ties in vocabulary order);
               keep a token iff the probability of the tokens strictly before it is < p
               (the nucleus: the smallest head whose mass reaches p); the rest become −inf

    logits (..., v)  ->  filtered logits (..., v), a NumPy array in logits' dtype; kept entries
    equal logits / T. top_k None or top_p None (or 1.0): that filter is off. The most likely
    token always survives. T = 0 is greedy: only the argmax (the first one on a tie) keeps its
    logit, every other entry is −inf.
    Example: probabilities [0.5, 0.3, 0.15, 0.05] with top_p = 0.75: 0.5 + 0.3 reaches 0.75, so
    the first two are kept: finite = [T, T, F, F].

    After trying: the package's version is `transformer/core/sampling.py`, `filter_logits`.
    """
    raise NotImplementedError(
        "filter_logits: start with temperature alone (T = 0 aside), then top-k on one row: the k-th largest "
        "value is a threshold, and np.where(x >= threshold, x, -np.inf) applies it. Leave top-p for last: "
        "it needs the tokens in order of falling probability.")
