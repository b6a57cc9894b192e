"""Solutions to lesson 11's "Try it" (a real LLM)."""
import math

import numpy as np


def exercise_1():
    """Logits z = (2, 1, 0) at temperature T = 0.5 become z / T = (4, 2, 0):
    softmax = (e⁴, e², 1) / (e⁴ + e² + 1) = (54.60, 7.39, 1) / 62.99 = (0.867, 0.117, 0.016).
    At T = 1 the top token had only e² / (e² + e + 1) = 0.665."""
    e = [math.exp(4), math.exp(2), 1.0]
    return [v / sum(e) for v in e]


def check_1(answer, T):
    np.testing.assert_allclose(answer, T.next_token_probs(np.array([2.0, 1.0, 0.0]), temperature=0.5), rtol=1e-12)


def exercise_2():
    """Top-p in NumPy, then on p = (0.5, 0.3, 0.15, 0.05) with top-p 0.9. Sort the probabilities in
    decreasing order (np.argsort), take the running sums (np.cumsum): 0.5, 0.8, 0.95, 1.0. Keep every
    token whose running sum *before* it is still below p: the third token is the first to reach 0.9,
    so the nucleus keeps 3 tokens; renormalise them by 0.95: (0.526, 0.316, 0.158, 0)."""
    probs = np.array([0.5, 0.3, 0.15, 0.05])
    order = np.argsort(-probs)  # most likely first
    before = np.cumsum(probs[order]) - probs[order]  # mass of the tokens ranked above each one
    keep = np.zeros(probs.shape, dtype=bool)
    keep[order] = before < 0.9  # a token stays while the nucleus has not reached p yet
    kept = np.where(keep, probs, 0.0)
    return kept / kept.sum()


def check_2(answer, T):
    z = np.log(np.array([0.5, 0.3, 0.15, 0.05]))
    np.testing.assert_allclose(answer, T.next_token_probs(z, temperature=1.0, top_p=0.9), rtol=0, atol=1e-12)
