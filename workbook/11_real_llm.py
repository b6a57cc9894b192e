"""Workbook, lesson 11 · A real LLM, end to end (`lessons/11_real_llm.py`).

Fill in the bodies; keep the names and signatures. Check your work from the repository root,
with the virtual environment active:

    python -m transformer check 11

Shapes use the course's dimension names: v vocabulary; `...` stands for any leading axes
such as (b,).
"""
from __future__ import annotations

import numpy as np

from transformer import softmax  # or your own from 03


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


def sample_next(logits, temperature: float = 0.0, top_k=None, top_p=None, rng=None):  # [..., v] -> [...] int
    """One token id per row: the argmax when temperature is 0 (greedy), else a draw from

        p = softmax(filter_logits(logits, temperature, top_k, top_p))      (above)

    by the inverse CDF: one uniform number u = rng.random() a row, and the first token whose
    cumulative probability exceeds it,

        c_j = p_0 + … + p_j,      token = the smallest j with c_j > u

    so token j is drawn with probability c_j − c_{j−1} = p_j; a filtered token (p_j = 0) adds an
    empty interval and is never drawn. rng: a np.random.Generator, or an int seed for
    np.random.default_rng (greedy needs none). rng.choice(v, p=p) draws the same way, one row at a time.
    logits (..., v), such as (b, v)  ->  ids (...), ints; one row (v,) gives one int.
    Example: p = [0.1, 0.2, 0.3, 0.4] and u = 0.65: c = [0.1, 0.3, 0.6, 1.0], so token 3
    (0.6 ≤ 0.65 < 1.0); u = 0.25 gives token 1.

    After trying: the package's version is `transformer/core/sampling.py`, `sample_next`.
    """
    raise NotImplementedError(
        "sample_next: start with temperature 0 (np.argmax over the last axis); then, for one row, compute p and its "
        "np.cumsum, and find the example's token 3 for u = 0.65 by hand before writing the comparison.")
