"""Solutions to the "Try it" exercises of lesson 03 (scaled dot-product attention).

Each exercise_k() works the answer out by hand or in a few lines of NumPy, as a learner would;
check_k(answer, T) compares it with the package and asserts that the two agree.
"""
import math

import numpy as np

K = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]  # the three keys of the lesson's worked example
V = [[4.0, 0.0], [0.0, 4.0], [2.0, 3.0]]  # and their values


def exercise_1():
    """The worked example with the query q = (0, 2): scores, weights, output.

    scores q·k_j / √2 = [0, 2, 2] / √2 = [0, 1.414, 1.414]; keys 1 and 2 tie, so they get equal weight:
    e^(s − max) = [e^-1.414, 1, 1] = [0.243, 1, 1], sum 2.243, p = [0.108, 0.446, 0.446];
    o = 0.108·(4, 0) + 0.446·(0, 4) + 0.446·(2, 3) = (1.325, 3.120).
    """
    s = [0 / math.sqrt(2), 2 / math.sqrt(2), 2 / math.sqrt(2)]
    e = [math.exp(x - max(s)) for x in s]
    p = [x / sum(e) for x in e]
    o = [sum(p[j] * V[j][i] for j in range(3)) for i in range(2)]
    return {"weights": p, "output": o}


def check_1(answer, T):
    q = np.array([[[[0.0, 2.0]]]])  # (b, h, n_q, d_k)
    o, p = T.scaled_dot_product_attention(q, np.array([[K]]), np.array([[V]]), return_weights=True)
    assert np.allclose(answer["weights"], p[0, 0, 0], atol=1e-12), (answer["weights"], p[0, 0, 0])
    assert np.allclose(answer["output"], o[0, 0, 0], atol=1e-12), (answer["output"], o[0, 0, 0])
    assert np.allclose(answer["weights"], [0.108, 0.446, 0.446], atol=5e-4)  # the rounded numbers in the docstring


def exercise_2():
    """Predict: every key equal (here all (1, 1)). Every score is the same, so softmax gives 1/3 to each,
    whatever the query, and the output is the plain mean of the values: ((4+0+2)/3, (0+4+3)/3) = (2, 7/3)."""
    return [(4 + 0 + 2) / 3, (0 + 4 + 3) / 3]


def check_2(answer, T):
    rng = np.random.default_rng(0)
    for _ in range(3):  # any query gives the same answer
        q = rng.normal(size=(1, 1, 1, 2))
        o = T.scaled_dot_product_attention(q, np.ones((1, 1, 3, 2)), np.array([[V]]))
        assert np.allclose(answer, o[0, 0, 0], atol=1e-12), (answer, o[0, 0, 0])


def exercise_3():
    """Predict, then run: the textbook softmax np.exp(s) / np.exp(s).sum() on s = [1000, 1001, 1002] in
    float32. e^1000 is far beyond float32's largest number (3.4·10^38 ≈ e^88.7): every exp is inf and
    inf / inf is nan. Subtracting the max first gives [−2, −1, 0]: e^-2 = 0.1353, e^-1 = 0.3679,
    e^0 = 1, sum 1.5032, weights [0.0900, 0.2447, 0.6652]."""
    s = np.array([1000.0, 1001.0, 1002.0], dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        naive = np.exp(s) / np.exp(s).sum()  # inf / inf
    e = np.exp(s - s.max())  # the max subtracted: every exponent ≤ 0
    return {"stable": e / e.sum(), "naive_finite": bool(np.isfinite(naive).all())}


def check_3(answer, T):
    p = T.softmax(np.array([1000.0, 1001.0, 1002.0], dtype=np.float32))
    assert p.dtype == np.float32 and np.all(np.isfinite(p))
    np.testing.assert_allclose(answer["stable"], p, rtol=0, atol=1e-6)
    assert answer["naive_finite"] == bool(1000 < np.log(np.finfo(np.float32).max)), answer  # e^1000 overflows float32
