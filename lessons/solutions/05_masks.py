"""Solutions to the "Try it" exercises of lesson 05 (masks).

Each exercise_k() works the answer out by hand or in a few lines of NumPy; check_k(answer, T) compares
it with the package.
"""
import numpy as np


def exercise_1():
    """The mask "window 3 or token 0" for n = 6, written in NumPy (a causal sliding window of 3 keys,
    plus the first token, which every query keeps seeing: the "attention sink" of StreamingLLM).

    np.tril keeps j ≤ i (causal); np.triu(…, k=−2) keeps j ≥ i − 2 (the window); key 0 is one
    column. Row i reads keys i−2, i−1, i (those ≥ 0) and key 0: rows 0–2 gain nothing from key 0
    (it is in their window already); rows 3, 4, 5 gain one key each. Pairs: 1 + 2 + 3 + 4 + 4 + 4 = 18.
    """
    n, w = 6, 3
    ones = np.ones((n, n), dtype=bool)
    window = np.tril(ones) & np.triu(ones, k=-(w - 1))  # (n, n): i − w < j ≤ i
    sink = np.zeros((n, n), dtype=bool)
    sink[:, 0] = True  # every query reads key 0
    mask = window | sink  # (n, n)
    return {"mask": mask, "pairs": int(mask.sum())}


def check_1(answer, T):
    n = 6
    mask = T.sliding_window_mask(n, 3) | (T.global_mask(n, [0]) & T.causal_mask(n))  # (n, n)
    assert np.array_equal(np.asarray(answer["mask"]), mask), (answer["mask"], mask)
    assert answer["pairs"] == T.attended_pairs(mask) == 18


def exercise_2():
    """Attended pairs of a causal mask at n = 1000: row i reads i + 1 keys, so 1 + 2 + … + n =
    n(n+1)/2 = 1000·1001/2 = 500,500, about half of the n² = 1,000,000 of full attention."""
    n = 1000
    return n * (n + 1) // 2


def check_2(answer, T):
    assert answer == T.attended_pairs(T.causal_mask(1000)), (answer, T.attended_pairs(T.causal_mask(1000)))


def exercise_3():
    """A causal window of w = 128 over n = 4096 tokens: the first w rows read 1 … w keys, the other
    n − w rows read w each: w(w+1)/2 + (n − w)·w = 8,256 + 3968·128 = 516,160 pairs, 3.1 % of the
    n(n+1)/2 = 8,390,656 of the causal mask."""
    n, w = 4096, 128
    return w * (w + 1) // 2 + (n - w) * w


def check_3(answer, T):
    got = T.attended_pairs(T.sliding_window_mask(4096, 128))
    assert answer == got, (answer, got)
